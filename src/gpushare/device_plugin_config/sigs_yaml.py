"""YAML text to the JSON value the device plugin decodes, as sigs.k8s.io/yaml v1.6.0 makes it.

sigs.k8s.io/yaml (yaml.go: Unmarshal) decodes the first YAML document with go.yaml.in/yaml/v2
v2.4.3 into Go's interface{} (resolve.go: YAML 1.1 scalars, `y`/`no`/`on` are booleans, `1e3` a
float, `0o17` an int; decode.go: merge keys, aliases), turns map keys into strings and the scalar
under Config's only string field (`version`) into its string form (convertToJSONableObject), and
writes it with encoding/json (NaN and infinities cannot be written). go-yaml v2 is a port of
libyaml, so the events and the syntax errors come from libyaml itself (PyYAML's CParser).
"""

from __future__ import annotations

import base64
import calendar
import math
import re
import struct
from decimal import Decimal
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.cyaml import CParser

from gpushare.device_plugin_config.go_json import Number, fold

# Deeper nesting than this is refused by us, not by the plugin (go-yaml allows 10000 levels);
# it keeps every walk below Python's recursion limit.
MAX_DEPTH = 100
MAX_REWRITES = 100
SLASH_MARK = "\ue000"  # a private-use character, see _first_document
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1

STR, INT, FLOAT, BOOL, NULL, MERGE, BINARY, TIMESTAMP = (
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "merge", "binary", "timestamp")
)
RESOLVABLE = {"", STR, BOOL, INT, FLOAT, NULL, TIMESTAMP}
# resolve.go's resolveMap: these plain scalars mean a fixed value whatever their tag says.
RESOLVE_MAP: dict[str, tuple[str, Any]] = {
    **{word: (BOOL, True) for word in "y Y yes Yes YES true True TRUE on On ON".split()},
    **{word: (BOOL, False) for word in "n N no No NO false False FALSE off Off OFF".split()},
    **{word: (NULL, None) for word in ("", "~", "null", "Null", "NULL")},
    **{word: (FLOAT, math.nan) for word in (".nan", ".NaN", ".NAN")},
    **{word: (FLOAT, math.inf) for word in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{word: (FLOAT, -math.inf) for word in ("-.inf", "-.Inf", "-.INF")},
    "<<": (MERGE, "<<"),
}
YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
GO_DECIMAL_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+\.?[0-9]*)([eE][-+]?[0-9]+)?")
ANCHOR_PROPERTY = re.compile(r"&[0-9A-Za-z_-]*\s*")
LIBYAML_TAG = re.compile(r"![0-9A-Za-z_\-;/?:@&=+$.%!~*'()]*")
TIMESTAMP_FORMS = re.compile(
    r"(\d{4})-(\d\d?)-(\d\d?)(?:(?:[Tt](\d\d?):(\d\d?):(\d\d?)(?:[.,]\d+)?(?:Z|[-+](\d\d):(\d\d)))"
    r"|(?: (\d\d?):(\d\d?):(\d\d?)(?:[.,]\d+)?))?",
    re.ASCII,
)


class YAMLError(Exception):
    """sigs.k8s.io/yaml could not turn the text into JSON; str() is the Go error text."""


class TooDeep(Exception):
    """The text nests deeper than MAX_DEPTH levels: not judged here (the plugin's own limit is 10000)."""


@dataclass(eq=False)
class _Node:
    kind: str  # scalar | mapping | sequence | alias
    tag: str = ""
    value: str = ""
    implicit: bool = False
    anchor: str = ""  # the name an alias refers to
    closer: str = ""  # for a collection in flow style, the indicator that closes it: ] or }
    children: list[_Node] = field(default_factory=list)


class _GoMap(dict):  # type: ignore[type-arg]
    """A Go map[interface{}]interface{}: keyed by (Go type, value), so that 1, 1.0 and true differ."""


def to_json(text: str) -> Any:
    """The JSON value (None, bool, str, Number, list, dict in Go's key order) sigs.k8s.io/yaml makes of text."""
    root = _first_document(text)
    if root is None:
        return None
    return _marshal(_jsonable(_Decoder().decode(root), top=True))


def json_text(value: Any) -> str:
    """The compact JSON text encoding/json writes for a value from to_json."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Number):
        return value.text
    if isinstance(value, str):
        return _json_quote(value)
    if isinstance(value, list):
        return "[" + ",".join(json_text(item) for item in value) + "]"
    return "{" + ",".join(f"{_json_quote(key)}:{json_text(item)}" for key, item in value.items()) + "}"


# --- YAML events to go-yaml's node tree (decode.go: parser) ----------------------------------


def _first_document(text: str) -> _Node | None:
    text = text.removeprefix("\ufeff")  # both skip a byte-order mark (and libyaml's marks do not count it)
    if SLASH_MARK not in text:
        text = text.replace("\\/", "\\" + SLASH_MARK)
    for _ in range(MAX_REWRITES):
        try:
            return _parse(text)
        except _Rewrite as rewrite:
            text = rewrite.text
    return _parse(text, rewrite=False)


class _Rewrite(Exception):
    """The text rewritten so that libyaml reads it as go-yaml v2 does."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


def _parse(text: str, rewrite: bool = True) -> _Node | None:
    """The first document's node tree, from libyaml's events."""
    parser = CParser(text.encode("utf-8", "surrogatepass"))
    anchors: dict[str, _Node] = {}
    stack: list[_Node] = [_Node("sequence")]  # a holder for the document's root
    try:
        while True:
            event = parser.get_event()
            if isinstance(event, yaml.StreamEndEvent | yaml.DocumentEndEvent):
                break
            if isinstance(event, yaml.DocumentStartEvent) and event.version not in (None, (1, 1)):
                # go-yaml v2 (parserc.go: yaml_parser_process_directives) knows only %YAML 1.1.
                raise YAMLError(_where(event.start_mark.line) + "found incompatible YAML document")
            if isinstance(event, yaml.CollectionEndEvent):
                stack.pop()
            elif isinstance(event, yaml.AliasEvent):
                if event.anchor not in anchors:
                    raise YAMLError(f"yaml: unknown anchor '{event.anchor}' referenced")
                stack[-1].children.append(_Node("alias", anchor=event.anchor, children=[anchors[event.anchor]]))
            elif isinstance(event, yaml.NodeEvent):
                node = _event_node(event, text)
                if event.tag is not None and rewrite:
                    _check_tag(text, event.start_mark)
                if isinstance(event, yaml.ScalarEvent):
                    _check_scalar(text, event, stack[-1])
                stack[-1].children.append(node)
                if event.anchor is not None:
                    anchors[event.anchor] = node
                if isinstance(event, yaml.CollectionStartEvent):
                    stack.append(node)
                    if len(stack) > MAX_DEPTH:
                        raise TooDeep()
    except yaml.MarkedYAMLError as err:
        if rewrite:
            _rewrite(text, err)
        line = 0
        if err.problem_mark is not None and err.problem_mark.line:
            line = err.problem_mark.line + isinstance(err, yaml.scanner.ScannerError)
        elif err.context_mark is not None:
            line = err.context_mark.line
        raise YAMLError(_where(line) + (err.problem or "unknown problem parsing YAML content")) from None
    except yaml.reader.ReaderError as err:
        raise YAMLError(f"yaml: {err.reason}") from None
    children = stack[0].children
    return children[0] if children else None


# Where libyaml 0.2.5 (PyYAML's) and go-yaml v2's port of an older libyaml scan differently:
# - in a flow collection, go-yaml ends a plain scalar at `?` (then finds a stray key indicator)
#   and keeps `a:` followed by a flow indicator as the scalar "a:", where libyaml refuses it;
# - go-yaml takes `,`, `[` and `]` into a tag, libyaml refuses them (written %2C, %5B, %5D both agree);
# - in double quotes go-yaml knows the escape \' and not \/, libyaml the other way round: \/ is
#   written \ and SLASH_MARK, an escape libyaml refuses where go-yaml refuses \/, and read back
#   as \/ anywhere else.


def _rewrite(text: str, err: yaml.MarkedYAMLError) -> None:
    problem, start, at = err.problem, err.context_mark, err.problem_mark
    if problem == "found unexpected ':'" and start is not None and at is not None:
        scalar = text[start.index : at.index + 1]
        raise _Rewrite(text[: start.index] + "'" + scalar.replace("'", "''") + "'" + text[at.index + 1 :])
    if problem == "found unknown escape character" and at is not None and text[at.index + 1 : at.index + 2] == "'":
        raise _Rewrite(text[: at.index] + "\\x27" + text[at.index + 2 :])
    if err.context in ("while scanning a tag", "while parsing a tag") and at is not None and text[at.index : at.index + 1] in (",", "[", "]"):
        raise _Rewrite(text[: at.index] + f"%{ord(text[at.index]):02X}" + text[at.index + 1 :])


def _check_tag(text: str, mark: Any) -> None:
    """go-yaml reads `,`, `[` and `]` as part of a tag (rewritten %2C, %5B, %5D for libyaml, which ends the
    tag there) and wants a blank after a verbatim tag `!<...>`, where libyaml also takes a `,`."""
    at = mark.index
    while at < len(text) and text[at] == "&":
        at = ANCHOR_PROPERTY.match(text, at).end()  # type: ignore[union-attr]
    if text[at : at + 2] == "!<":
        end = text.find(">", at) + 1
        if end and text[end : end + 1] not in ("", " ", "\t", "\r", "\n", "\x85", "\u2028", "\u2029"):
            line = mark.line + _line_breaks(text[mark.index : end])
            raise YAMLError(_where(line + 1 if line else 0) + "did not find expected whitespace or line break")
    elif text[at : at + 1] == "!":
        end = LIBYAML_TAG.match(text, at).end()  # type: ignore[union-attr]
        if text[end : end + 1] in (",", "[", "]") and end < len(text):
            raise _Rewrite(text[:end] + f"%{ord(text[end]):02X}" + text[end + 1 :])


def _check_scalar(text: str, event: Any, parent: _Node) -> None:
    raw = text[event.start_mark.index : event.end_mark.index]
    if not event.style and parent.closer and not event.tag and not event.anchor and "?" in raw:
        line = event.start_mark.line + _line_breaks(raw[: raw.index("?")])
        raise YAMLError(_where(line) + f"did not find expected ',' or '{parent.closer}'")


def _line_breaks(text: str) -> int:
    return len(re.findall("\r\n|[\r\n\x85\u2028\u2029]", text))


def _event_node(event: Any, text: str) -> _Node:
    if isinstance(event, yaml.ScalarEvent):
        value = event.value.replace("\\" + SLASH_MARK, "\\/")
        return _Node("scalar", tag=event.tag or "", value=value, implicit=event.implicit[0])
    if isinstance(event, yaml.SequenceStartEvent):
        return _Node("sequence", closer="]" if event.flow_style else "")
    # a flow mapping not opened by { is a single pair in a flow sequence (`[a: b]`)
    braced = event.anchor or event.tag or text[event.start_mark.index : event.start_mark.index + 1] == "{"
    return _Node("mapping", closer=("}" if braced else "]") if event.flow_style else "")


def _where(line: int) -> str:
    """go-yaml's parser.fail(): a line only when it is not 0 (0-based for parser errors, 1-based for scanner ones)."""
    return f"yaml: line {line}: " if line else "yaml: "


# --- go-yaml v2 decoding into interface{} (decode.go: decoder) --------------------------------


class _Decoder:
    def __init__(self) -> None:
        self.decodes = 0
        self.aliased = 0
        self.alias_depth = 0
        self.depth = 0
        self.expanding: set[int] = set()

    def decode(self, node: _Node, into: _GoMap | None = None) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:  # aliases can nest a document deeper than it is written
            raise TooDeep()
        value = self._decode(node, into)
        self.depth -= 1
        return value

    def _decode(self, node: _Node, into: _GoMap | None) -> Any:
        self.decodes += 1
        if self.alias_depth:
            self.aliased += 1
        if self.aliased > 100 and self.decodes > 1000 and self.aliased / self.decodes > _allowed_alias_ratio(self.decodes):
            raise YAMLError("yaml: document contains excessive aliasing")
        if node.kind == "alias":
            if id(node) in self.expanding:
                raise YAMLError(f"yaml: anchor '{node.anchor}' value contains itself")
            self.expanding.add(id(node))
            self.alias_depth += 1
            value = self.decode(node.children[0], into)
            self.alias_depth -= 1
            self.expanding.discard(id(node))
            return value
        if node.kind == "scalar":
            return _scalar(node)
        if node.kind == "sequence":
            return [self.decode(child) for child in node.children]
        mapping = _GoMap() if into is None else into
        for key_node, value_node in zip(node.children[::2], node.children[1::2]):
            if key_node.kind == "scalar" and key_node.value == "<<" and (key_node.implicit or key_node.tag == MERGE):
                self._merge(value_node, mapping)
                continue
            key = self.decode(key_node)
            if isinstance(key, list | dict):
                raise YAMLError(f"yaml: invalid map key: {_go_syntax(key)}")
            mapping[_go_key(key)] = self.decode(value_node)
        return mapping

    def _merge(self, node: _Node, into: _GoMap) -> None:
        def is_map(n: _Node) -> bool:
            return n.kind == "mapping" or (n.kind == "alias" and n.children[0].kind == "mapping")

        if is_map(node):
            self.decode(node, into)
        elif node.kind == "sequence" and all(is_map(child) for child in node.children):
            for child in reversed(node.children):
                self.decode(child, into)
        else:
            raise YAMLError("yaml: map merge requires map or sequence of maps as the value")


def _allowed_alias_ratio(decodes: int) -> float:
    low, high = 400_000, 4_000_000
    if decodes <= low:
        return 0.99
    if decodes >= high:
        return 0.10
    return 0.99 - 0.89 * (decodes - low) / (high - low)


def _go_key(key: Any) -> tuple[str, Any]:
    if key is None:
        return ("nil", None)
    if isinstance(key, bool):
        return ("bool", key)
    if isinstance(key, int):
        return ("uint64" if key > INT64_MAX else "int", key)
    return (type(key).__name__, key)  # float (each NaN its own key, as in Go) or str


def _scalar(node: _Node) -> Any:
    if not node.tag and not node.implicit:
        return node.value  # quoted or block scalar without a tag
    if node.tag == BINARY:
        try:
            data = base64.b64decode(node.value.replace("\r", "").replace("\n", ""), validate=True)
        except ValueError:
            raise YAMLError("yaml: !!binary value contains invalid base64 data") from None
        return data.decode("utf-8", "surrogateescape")
    tag, value = _resolve(node.tag, node.value)
    return node.value if tag == TIMESTAMP else value  # go-yaml v2 keeps timestamps as strings in interface{}


def _resolve(tag: str, text: str) -> tuple[str, Any]:
    if tag not in RESOLVABLE:
        return tag, text
    rtag, value = _resolve_plain(tag, text)
    if tag in ("", rtag, STR):
        return rtag, value
    if tag == FLOAT and rtag == INT and value <= INT64_MAX:
        return FLOAT, float(value)
    raise YAMLError(f"yaml: cannot decode {_short_tag(rtag)} `{text}` as a {_short_tag(tag)}")


def _resolve_plain(tag: str, text: str) -> tuple[str, Any]:
    hint = _hint(text)
    if tag == STR or not hint:
        return STR, text
    if text in RESOLVE_MAP:
        return RESOLVE_MAP[text]
    if hint == ".":
        number = _go_parse_float(text)
        if number is not None:
            return FLOAT, number
    elif hint == "D":
        if tag in ("", TIMESTAMP) and _is_timestamp(text):
            return TIMESTAMP, text
        plain = text.replace("_", "")
        integer = _go_parse_int(plain)
        if integer is None:
            integer = _go_parse_uint(plain)
        if integer is not None:
            return INT, integer
        if YAML_STYLE_FLOAT.fullmatch(plain):
            number = _go_parse_float(plain)
            if number is not None:
                return FLOAT, number
        # resolve.go goes on with "0b" and "-0b" prefixes, which ParseInt's base 0 has already read.
    return STR, text


def _hint(text: str) -> str:
    """resolve.go's resolveTable: which resolutions the first character allows."""
    if not text:
        return "N"  # only "" itself, which RESOLVE_MAP reads as null
    first = text[0]
    if first in "+-0123456789":
        return "D"  # 'S' (sign) and 'D' (digit) are resolved alike
    if first in "yYnNtTfFoO~":
        return "M"
    return "." if first == "." else ""


def _short_tag(tag: str) -> str:
    prefix = "tag:yaml.org,2002:"
    return "!!" + tag[len(prefix) :] if tag.startswith(prefix) else tag


def _go_parse_uint(text: str) -> int | None:
    """strconv.ParseUint(text, 0, 64): the 0b, 0o, 0x and 0 (octal) prefixes; no sign."""
    if not text:
        return None
    base, digits = 10, text
    if text[0] == "0":
        prefixed = len(text) >= 3 and text[1] in "bBoOxX"
        base, digits = ({"b": 2, "o": 8, "x": 16}[text[1].lower()], text[2:]) if prefixed else (8, text[1:])
    if any(char not in "0123456789abcdef"[:base] for char in digits.lower()):
        return None
    value = int(digits, base) if digits else 0
    return value if value <= UINT64_MAX else None


def _go_parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64)."""
    negative = text[:1] == "-"
    magnitude = _go_parse_uint(text[1:] if text[:1] in ("+", "-") else text)
    if magnitude is None or magnitude > INT64_MAX + negative:
        return None
    return -magnitude if negative else magnitude


def _go_parse_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64) for decimal text; out of range is an error, not infinity."""
    if not GO_DECIMAL_FLOAT.fullmatch(text):
        return None
    number = float(text)
    return None if math.isinf(number) else number


def _is_timestamp(text: str) -> bool:
    """go-yaml's parseTimestamp: the four layouts of allowedTimestampFormats, checked as time.Parse does."""
    match = TIMESTAMP_FORMS.fullmatch(text)
    if match is None:
        return False
    year, month, day = (int(part) for part in match.groups()[:3])
    clock = [int(part) for part in (match.group(4, 5, 6) if match.group(4) else match.group(9, 10, 11)) if part]
    zone = [int(part) for part in match.group(7, 8) if part]
    return (
        1 <= month <= 12
        and 1 <= day <= calendar.monthrange(year or 2000, month)[1]
        and (not clock or (clock[0] < 24 and clock[1] < 60 and clock[2] < 60))
        and (not zone or (zone[0] <= 24 and zone[1] <= 60))
    )


# --- sigs.k8s.io/yaml's JSON conversion and encoding/json's Marshal ---------------------------


def _jsonable(value: Any, top: bool = False) -> Any:
    """convertToJSONableObject: string keys; the scalar under Config.version becomes a string."""
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if not isinstance(value, _GoMap):
        return value
    result: dict[str, Any] = {}
    for (go_type, key), item in value.items():
        if go_type in ("nil", "uint64"):
            type_name = "%!s(<nil>)" if go_type == "nil" else "uint64"
            raise YAMLError(
                f"unsupported map key of type: {type_name}, key: {_go_syntax(key)}, value: {_go_syntax(item)}"
            )
        if go_type == "bool":
            name = "true" if key else "false"
        elif go_type == "float":
            name = format_float(key, "g", 32)
            name = {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(name, name)
        else:
            name = str(key)
        if top and fold(name) == "version" and not isinstance(item, list | dict | type(None)):
            result[name] = _go_string_form(item)
        else:
            result[name] = _jsonable(item)
    return result


def _go_string_form(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float(value, "g", 32)
    return str(value)


def _marshal(value: Any) -> Any:
    """encoding/json's Marshal, kept as values: map keys sorted, numbers as written, NaN refused."""
    if isinstance(value, dict):
        return {_valid_utf8(key): _marshal(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_marshal(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return Number(str(value))
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise YAMLError(f"json: unsupported value: {format_float(value, 'g', 64)}")
        exponent = value != 0 and (abs(value) < 1e-6 or abs(value) >= 1e21)
        text = format_float(value, "e" if exponent else "f", 64)
        return Number(re.sub(r"e-0(\d)$", r"e-\1", text))
    return _valid_utf8(value)


def _valid_utf8(text: str) -> str:
    """encoding/json writes each byte that is not UTF-8 as U+FFFD."""
    return re.sub("[\udc80-\udcff]", "\ufffd", text)


def _json_quote(text: str) -> str:
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
    return '"' + "".join(
        escapes.get(char) or (f"\\u{ord(char):04x}" if ord(char) < 0x20 or char in "<>&\u2028\u2029" else char)
        for char in text
    ) + '"'


def format_float(value: float, fmt: str, bits: int) -> str:
    """strconv.FormatFloat(value, fmt, -1, bits) for fmt e, f and g."""
    if bits == 32:
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            value = math.copysign(math.inf, value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1, value) < 0 else ""
    digits, point = _shortest_digits(abs(value), bits)
    if fmt == "g":
        fmt = "e" if not -4 <= point - 1 < 6 else "f"
    if fmt == "e":
        exponent = point - 1 if digits != "0" else 0
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}" if digits != "0" else f"{sign}0"
    whole = (digits + "0" * point)[:point]
    fraction = digits[point:]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


def _shortest_digits(value: float, bits: int) -> tuple[str, int]:
    """The fewest digits d1d2... that read back as value (a float32 when bits is 32): value = 0.d1d2... x 10**point."""
    if value == 0:
        return "0", 1
    if bits == 64:
        text = repr(value)
    else:
        text = next(
            candidate
            for candidate in (f"{value:.{precision}e}" for precision in range(9))
            if struct.unpack("<f", struct.pack("<f", float(candidate)))[0] == value
        )
    _, digits, exponent = Decimal(text).normalize().as_tuple()
    assert isinstance(exponent, int)
    return "".join(map(str, digits)), len(digits) + exponent


def _go_syntax(value: Any) -> str:
    """fmt's %#v of a value go-yaml decoded (for its error texts)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return hex(value) if value > INT64_MAX else str(value)
    if isinstance(value, float):
        return format_float(value, "g", 64)
    if isinstance(value, str):
        return _go_quote(value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_element(item) for item in value) + "}"
    items = sorted(value.items(), key=lambda item: (item[0][0], _sortable(item[0][1])))
    return "map[interface {}]interface {}{" + ", ".join(
        f"{_go_element(key)}:{_go_element(item)}" for (_, key), item in items
    ) + "}"


def _sortable(key: Any) -> Any:
    return -math.inf if isinstance(key, float) and math.isnan(key) else key


def _go_element(value: Any) -> str:
    return "interface {}(nil)" if value is None else _go_syntax(value)


def _go_quote(text: str) -> str:
    """strconv.Quote."""
    escapes = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif "\udc80" <= char <= "\udcff":
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'

"""A YAML text's first document as Go values, decoded as go.yaml.in/yaml/v2 v2.4.3 decodes it into interface{}.

That is how sigs.k8s.io/yaml (yaml.go: Unmarshal) starts: scalars resolved the YAML 1.1 way
(resolve.go: `y`, `no` and `on` are booleans, `1e3` is a float, `0o17` and `010` are ints,
`1:30` is a string), merge keys and aliases as decode.go has them. go-yaml v2 is a port of
libyaml, so the events and the syntax errors come from libyaml itself (PyYAML's CParser), with
the few places where the two read a text differently rewritten (see _rewrite).

Go values: None, bool, int (an int above int64 is a uint64), float, str, list, GoMap.
"""

from __future__ import annotations

import base64
import calendar
import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.cyaml import CParser

from gpushare.device_plugin_config.go_format import INT64_MAX, UINT64_MAX, go_syntax

# Deeper nesting than this is refused by us, not by the plugin (go-yaml allows 10000 levels);
# it keeps every walk below Python's recursion limit.
MAX_DEPTH = 100
MAX_REWRITES = 100
SLASH_MARK = "\ue000"  # a private-use character, see _first_document

STR, INT, FLOAT, BOOL, NULL, MERGE, BINARY, TIMESTAMP = (
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "merge", "binary", "timestamp")
)
RESOLVABLE = {"", STR, BOOL, INT, FLOAT, NULL, TIMESTAMP}
# resolve.go's resolveMap: these plain scalars mean a fixed value whatever their tag says.
RESOLVE_MAP: dict[str, tuple[str, Any]] = {
    **{word: (BOOL, True) for word in ["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"]},
    **{word: (BOOL, False) for word in ["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"]},
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


class GoMap(dict):  # type: ignore[type-arg]
    """A Go map[interface{}]interface{}: keyed by (Go type, value), so that 1, 1.0 and true differ."""


def decode(text: str) -> Any:
    """The first document of text as go-yaml v2 decodes it into interface{}; None when there is none."""
    root = _first_document(text)
    return None if root is None else _Decoder().decode(root)


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
    in_tag = err.context in ("while scanning a tag", "while parsing a tag")
    if in_tag and at is not None and text[at.index : at.index + 1] in (",", "[", "]"):
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

    def decode(self, node: _Node, into: GoMap | None = None) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:  # aliases can nest a document deeper than it is written
            raise TooDeep()
        value = self._decode(node, into)
        self.depth -= 1
        return value

    def _decode(self, node: _Node, into: GoMap | None) -> Any:
        self.decodes += 1
        if self.alias_depth:
            self.aliased += 1
        ratio = self.aliased / self.decodes
        if self.aliased > 100 and self.decodes > 1000 and ratio > _allowed_alias_ratio(self.decodes):
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
        mapping = GoMap() if into is None else into
        for key_node, value_node in zip(node.children[::2], node.children[1::2]):
            if key_node.kind == "scalar" and key_node.value == "<<" and (key_node.implicit or key_node.tag == MERGE):
                self._merge(value_node, mapping)
                continue
            key = self.decode(key_node)
            if isinstance(key, list | dict):
                raise YAMLError(f"yaml: invalid map key: {go_syntax(key)}")
            mapping[_go_key(key)] = self.decode(value_node)
        return mapping

    def _merge(self, node: _Node, into: GoMap) -> None:
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



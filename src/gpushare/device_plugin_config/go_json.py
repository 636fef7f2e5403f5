"""Go's encoding/json (Go 1.26) decoding a JSON value into typed Go values, errors included.

JSON values are None, bool, str, Number, list and dict. A decoder is a function (Decoder, JSON
value, current Go value or None for its zero value) -> new Go value, the way json.Unmarshal fills
a variable: null leaves a plain value as it is and sets a pointer or slice to nil; a value of the
wrong JSON type is an UnmarshalTypeError that is saved while decoding goes on (decode.go:
saveError, the first one wins); an error a custom UnmarshalJSON returns stops decoding at once.
Both carry the struct and field path where they happened (addErrorContext), which is the
`Go struct field Sharing.sharing.timeSlicing` of the plugin's messages. Structs are dicts keyed
by JSON field name; a missing key is the zero value (or a nil pointer).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpushare.device_plugin_config.go_format import INT64_MAX, UINT64_MAX, json_quote

Decode = Callable[["Decoder", Any, Any], Any]


@dataclass(frozen=True)
class Number:
    """A JSON number, as Go's encoding/json writes it (`4`, `4.5`, `1e+21`)."""

    text: str


class GoError(Exception):
    """An error Go code returns; str() is its Error() text."""


class UnmarshalTypeError(GoError):
    """json.UnmarshalTypeError: `json: cannot unmarshal <value> into Go ... of type <type>`."""

    def __init__(self, value: str, type_name: str) -> None:
        super().__init__(value, type_name)
        self.value, self.type_name, self.struct, self.field = value, type_name, "", ""

    def __str__(self) -> str:
        if self.struct or self.field:
            return (
                f"json: cannot unmarshal {self.value} into Go struct field {self.struct}.{self.field} "
                f"of type {self.type_name}"
            )
        return f"json: cannot unmarshal {self.value} into Go value of type {self.type_name}"


class Decoder:
    """One json.Unmarshal call (decode.go: decodeState)."""

    def __init__(self) -> None:
        self.saved: GoError | None = None
        self.struct = ""
        self.fields: list[str] = []

    def with_context(self, err: GoError) -> GoError:
        if isinstance(err, UnmarshalTypeError) and (self.struct or self.fields):
            err.struct = self.struct
            err.field = ".".join(self.fields + ([err.field] if err.field else []))
        return err

    def mismatch(self, value: Any, type_name: str, what: str | None = None) -> None:
        if self.saved is None:
            self.saved = self.with_context(UnmarshalTypeError(what or json_kind(value), type_name))


def unmarshal(value: Any, decode: Decode, current: Any = None) -> Any:
    """json.Unmarshal of a JSON value into a variable holding current: the new value, or the error it returns."""
    decoder = Decoder()
    try:
        result = decode(decoder, value, current)
    except GoError as err:
        # Go adds the context where decoding stopped: the innermost field (it is not unwound on error).
        raise decoder.with_context(err) from None
    if decoder.saved is not None:
        raise decoder.saved
    return result


def json_text(value: Any) -> str:
    """The compact JSON text encoding/json writes for a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Number):
        return value.text
    if isinstance(value, str):
        return json_quote(value)
    if isinstance(value, list):
        return "[" + ",".join(json_text(item) for item in value) + "]"
    return "{" + ",".join(f"{json_quote(key)}:{json_text(item)}" for key, item in value.items()) + "}"


def json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Number):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def string_type(type_name: str = "string") -> Decode:
    def decode(d: Decoder, value: Any, current: Any) -> Any:
        if isinstance(value, str):
            return value
        if value is not None:
            d.mismatch(value, type_name)
        return "" if current is None else current

    return decode


def bool_type(d: Decoder, value: Any, current: Any) -> Any:
    if isinstance(value, bool):
        return value
    if value is not None:
        d.mismatch(value, "bool")
    return bool(current)


def int_type(type_name: str = "int") -> Decode:
    """int or uint64: a JSON number whose text strconv.ParseInt (ParseUint) reads in range."""
    unsigned = type_name == "uint64"
    low, high, pattern = (0, UINT64_MAX, r"[0-9]+") if unsigned else (-INT64_MAX - 1, INT64_MAX, r"-?[0-9]+")

    def decode(d: Decoder, value: Any, current: Any) -> Any:
        if isinstance(value, Number):
            if re.fullmatch(pattern, value.text) and low <= int(value.text) <= high:
                return int(value.text)
            d.mismatch(value, type_name, f"number {value.text}")
        elif value is not None:
            d.mismatch(value, type_name)
        return current or 0

    return decode


def raw_message(d: Decoder, value: Any, current: Any) -> Any:
    """json.RawMessage: takes every value as it is."""
    return value


def pointer_to(elem: Decode) -> Decode:
    """*T: null sets nil (None); anything else is decoded into the (new) element."""

    def decode(d: Decoder, value: Any, current: Any) -> Any:
        return None if value is None else elem(d, value, current)

    return decode


def _collection(json_type: type, type_name: str, fill: Decode) -> Decode:
    """A slice or map type: null sets nil, a value of another JSON type is a mismatch, else `fill`."""

    def decode(d: Decoder, value: Any, current: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, json_type):
            d.mismatch(value, type_name)
            return current
        return fill(d, value, current)

    return decode


def slice_of(elem: Decode, type_name: str) -> Decode:
    """[]T: an array is decoded element by element into the existing ones."""

    def fill(d: Decoder, value: list[Any], current: Any) -> Any:
        old = current or []
        return [elem(d, item, old[i] if i < len(old) else None) for i, item in enumerate(value)]

    return _collection(list, type_name, fill)


def map_of(elem: Decode, type_name: str) -> Decode:
    """map[string]T: each member decoded into a fresh element (a value of the wrong type is saved, as
    for a struct field, but without a field path: a map key is not one)."""
    return _collection(dict, type_name, lambda d, value, current: {
        **(current or {}), **{key: elem(d, item, None) for key, item in value.items()}})


def raw_map(d: Decoder, value: Any, current: Any) -> Any:
    """map[string]json.RawMessage."""
    if value is None or isinstance(value, dict):
        return value or {}
    d.mismatch(value, "map[string]json.RawMessage")
    return {}


class StructType:
    """A struct type `pkg.Name`: fields by JSON name, each with the path Go prints for it and its decoder.

    A key matches its field exactly or else case-insensitively (decode.go: foldName); other keys are
    ignored. The path is more than the name for a field promoted from an embedded struct.
    """

    def __init__(self, type_name: str, fields: dict[str, tuple[tuple[str, ...], Decode]]) -> None:
        self.type_name, self.fields = type_name, fields
        self._folded = {fold(name): name for name in fields}

    def field_name(self, key: str) -> str | None:
        """The field a key of a JSON object fills, if any."""
        return key if key in self.fields else self._folded.get(fold(key))

    def __call__(self, d: Decoder, value: Any, current: Any) -> Any:
        if value is None:
            return current
        if not isinstance(value, dict):
            d.mismatch(value, self.type_name)
            return current
        result = dict(current or {})
        for key, item in value.items():
            name = self.field_name(key)
            if name is None:
                continue
            path, decode = self.fields[name]
            outer = d.struct, len(d.fields)
            d.struct = self.type_name.rpartition(".")[2]
            d.fields.extend(path)
            result[name] = decode(d, item, result.get(name))
            d.struct = outer[0]
            del d.fields[outer[1] :]
        return result


def fold(name: str) -> str:
    """decode.go's foldName for matching ASCII field names: ASCII case, plus ſ (s) and K (k)."""
    return "".join({"\u017f": "s", "\u212a": "k"}.get(char, char.lower() if char.isascii() else char) for char in name)

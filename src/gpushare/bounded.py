"""JSON and YAML that someone else may have written (run records, node marks, backups): the size and
the nesting depth are checked before the parser runs, so that no text can exhaust the recursion
limit (json's and PyYAML's constructors recurse per level) or the memory of whoever reads it."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from gpushare import yamltext

MAX_DEPTH = 64  # a ClusterPolicy nests about 10 deep, an intent 5
MAX_BYTES = 256 * 1024
# A JSON string (skipped whole: its brackets are text) or a bracket. Where the text is not JSON the
# count may be off, but json.loads stops at that point before it nests any deeper.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class Unreadable(ValueError):
    """The text is not a document of the kind asked for; the message says why, for the operator."""


def _check_size(text: object) -> str:
    if not isinstance(text, str):
        raise Unreadable(f"it is {type(text).__name__}, not text")
    if len(text) > MAX_BYTES:
        raise Unreadable(f"it is {len(text)} characters long, more than the {MAX_BYTES} allowed")
    return text


def load_json(text: object) -> Any:
    """The JSON document in `text`, or Unreadable (too long, nested deeper than MAX_DEPTH, not JSON)."""
    text = _check_size(text)
    if text.count("[") + text.count("{") > MAX_DEPTH:
        depth = 0
        for token in _JSON_TOKEN.finditer(text):
            bracket = token.group()
            if bracket in ("[", "{"):
                depth += 1
                if depth > MAX_DEPTH:
                    raise Unreadable(f"it nests deeper than {MAX_DEPTH} levels")
            elif bracket in ("]", "}"):
                depth -= 1
    try:
        return json.loads(text)
    except ValueError as err:
        raise Unreadable(f"it is not JSON ({err})") from None


def load_yaml(text: object) -> Any:
    """The YAML document in `text` (safe types only), or Unreadable (too long, nested deeper than
    MAX_DEPTH, with aliases, which no runbook writes and which can multiply a small text, or not YAML)."""
    text = _check_size(text)
    try:
        depth = 0
        for event in yaml.parse(text, Loader=yamltext.LOADER):  # the parser keeps its own stack: it does not recurse
            if isinstance(event, yaml.AliasEvent):
                raise Unreadable("it uses YAML aliases")
            if isinstance(event, _OPEN):
                depth += 1
                if depth > MAX_DEPTH:
                    raise Unreadable(f"it nests deeper than {MAX_DEPTH} levels")
            elif isinstance(event, _CLOSE):
                depth -= 1
        return yamltext.safe_load(text)
    except (yaml.YAMLError, ValueError) as err:  # a timestamp naming no date (2020-13-01) is a ValueError
        if isinstance(err, Unreadable):
            raise
        raise Unreadable(f"it is not YAML ({err})") from None

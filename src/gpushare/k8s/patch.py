"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) applied locally, so a runbook knows what
a patch changes before it sends it (and sends nothing when it changes nothing)."""

from __future__ import annotations

import copy
from typing import Any


class PatchConflict(ValueError):
    """A JSON-patch `test` failed: the value is no longer what the patch expects."""

    def __init__(self, path: str, expected: Any, found: Any) -> None:
        super().__init__(f"{path} is {found!r}, expected {expected!r}")
        self.path, self.expected, self.found = path, expected, found


_MISSING = object()


def merge_patch(document: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(document) if isinstance(document, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"a JSON pointer starts with '/': {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def resolve(document: Any, path: str, default: Any = _MISSING) -> Any:
    """The value at a JSON pointer; `default` (or KeyError) when it is absent."""
    node = document
    for token in pointer(path):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        elif default is not _MISSING:
            return default
        else:
            raise KeyError(path)
    return node


def _index(items: list[Any], token: str, path: str, adding: bool) -> int:
    """The list index a token names; KeyError past the end, as the API server refuses it."""
    if adding and token == "-":  # noqa: S105 - a JSON pointer token
        return len(items)
    if not token.isdigit() or int(token) > len(items) - (0 if adding else 1):
        raise KeyError(path)
    return int(token)


def json_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """Apply add/remove/replace/test operations; PatchConflict when a test fails."""
    result = copy.deepcopy(document)
    for op in operations:
        path = op["path"]
        if op["op"] == "test":
            found = resolve(result, path, None)
            if found != op.get("value"):
                raise PatchConflict(path, op.get("value"), found)
            continue
        tokens = pointer(path)
        if not tokens:
            raise ValueError("a patch of the whole document is not supported")
        parent = resolve(result, "".join(f"/{escape(t)}" for t in tokens[:-1]))
        last = tokens[-1]
        if op["op"] == "remove":
            if isinstance(parent, list):
                parent.pop(_index(parent, last, path, adding=False))
            elif last in parent:
                del parent[last]
            else:
                raise KeyError(path)
        elif op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                index = _index(parent, last, path, adding=op["op"] == "add")
                if op["op"] == "add":
                    parent.insert(index, copy.deepcopy(op["value"]))
                else:
                    parent[index] = copy.deepcopy(op["value"])
            else:
                if op["op"] == "replace" and last not in parent:
                    raise KeyError(path)
                parent[last] = copy.deepcopy(op["value"])
        else:
            raise ValueError(f"unsupported JSON-patch operation {op['op']!r}")
    return result

"""Shared strictness: a frozen pydantic base that rejects unknown keys, error formatting in
DecGuard's ``location: message`` style and duplicate-key-safe JSON (secret redaction lives in
``core.secrets``, which reading a stored report needs without pydantic)."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

MAX_ERROR_LINES = 20


class Strict(BaseModel):
    """Immutable settings model; a misspelt key is an error, never silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _message(error: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown field (check the spelling)"
    if kind == "missing":
        return "required field is missing"
    text: str = error["msg"]
    return text.removeprefix("Value error, ")


def format_errors(exc: ValidationError, *, prefix: str = "", limit: int = MAX_ERROR_LINES) -> str:
    """One indented ``dotted.location: message`` line per problem, at most ``limit``."""
    errors = exc.errors(include_url=False)
    lines = []
    for error in errors[:limit]:
        parts = ([prefix] if prefix else []) + [str(p) for p in error["loc"]]
        lines.append(f"  {'.'.join(parts) or '(root)'}: {_message(error)}")
    if len(errors) > limit:
        lines.append(f"  ... and {len(errors) - limit} more")
    return "\n".join(lines)


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses a key given twice instead of keeping the last."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return result


_strict_decoder = json.JSONDecoder(object_pairs_hook=unique_pairs)


def strict_scanner() -> Any:
    """The duplicate-refusing decoder's ``scan_once(text, index) -> (value, end)``, for
    callers that parse many small documents (it raises StopIteration or ValueError)."""
    return _strict_decoder.scan_once


def loads_strict(text: str) -> Any:
    """Parse JSON, rejecting duplicate keys (raises ``ValueError``)."""
    if text.startswith("\ufeff"):  # what json.loads says (the decoder alone does not check)
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _strict_decoder.decode(text)


# a \uXXXX escape in the surrogate range: the only way JSON text in valid UTF-8 can carry a
# lone surrogate (a pair of them is one character once decoded, and fine)
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: Any) -> str | None:
    """Where in a decoded JSON value a string (or an object key) holds a lone surrogate,
    which no UTF-8 writer can write (``metadata.note``, ``tags[2]``, ``input``; a surrogate in a
    key is shown escaped), or None."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return where or "(root)"
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                name = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _SURROGATE.search(key):
                    return name.encode("utf-8", "backslashreplace").decode("utf-8")
                children.append((name, child))
            stack += reversed(children)  # the first in document order is found first
        elif isinstance(item, list):
            stack += reversed([(f"{where}[{i}]", child) for i, child in enumerate(item)])
    return None

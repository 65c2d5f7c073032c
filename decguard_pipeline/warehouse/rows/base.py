"""What every feature's rows share: the key columns, and values as text the warehouse stores and
DuckDB reads."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import orjson


def to_json(value: Any) -> str:
    """Compact JSON that parses back to an equal value (floats round-trip exactly). NaN and
    ±Infinity (a model may put them in its metadata) are kept as the tokens ``NaN``,
    ``Infinity`` and ``-Infinity``, which Python's json and DuckDB's JSON functions read;
    orjson alone would store them as null."""
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:  # integers beyond 64 bits
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if b"null" in text and _has_non_finite(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.decode("utf-8")


def _has_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def input_text(value: Any) -> str:
    return value if isinstance(value, str) else to_json(value)


def row_keys(contract: str, target: str, run_id: str, at: datetime) -> dict[str, Any]:
    """The key columns every row starts with; also ``Warehouse.write``'s partition arguments."""
    return {"contract": contract, "target": target, "run_id": run_id, "recorded_at": at}

"""Edits of a JSON document's values, for differential tests of two readers of one schema:
a value anywhere replaced by one of every JSON type and many edge values, a key removed, or
an unknown key added; every single edit (:func:`single_edits`), or random ones
(:func:`tampered`)."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

# of every JSON type, at the bounds the schemas set (0, 1, 2, 20, 100, 1000, 2**63), and
# strings a pattern or a trim check could let through
VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 2, 3, 20, 21, 100, 101, 1000, 1001, 2**63 - 1, 2**63, 2**70,
    0.0, -0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 1e-9, 0.1, 0.10000000000000002, -0.5, 1e300, 3.0,
    "", "x", " x", "x ", "x\n", "a.b-c_d", "-x", "0.5", "1", "true", "requirement", "warning",
    "increasing", "decreasing", "upper", "choice", "pass", "fail", "test", "all", "ok",
    [], ["x"], [""], [" x"], [1], [0.5], [0], ["upper", "lower"], [{"find": "a", "replace": "b"}],
    {}, {"x": 1}, {"refund": ["Refund"]}, {"refund": []}, {"refund": ["Refund "]},
    {"provider": "identity"}, {"provider": "x\n"}, {"find": "", "replace": ""},
]  # fmt: skip


def _places(
    value: Any, path: tuple[Any, ...] = (), items_each: int | None = None
) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (the root excluded); ``items_each``: only the
    first items of each list."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value[:items_each])
    else:
        return found
    for key, inner in items:
        found.append((*path, key))
        found.extend(_places(inner, (*path, key), items_each))
    return found


def _parent(document: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


def single_edits(document: Any, items_each: int | None = 2) -> Iterator[Any]:
    """Copies of ``document`` with one edit each: every value (of the first ``items_each``
    items of each list) replaced by each of :data:`VALUES`, every key removed, an unknown
    key added to every object."""
    for *parent_path, key in _places(document, (), items_each):
        for value in [*VALUES, _REMOVED]:
            out = copy.deepcopy(document)
            parent = _parent(out, tuple(parent_path))
            if value is not _REMOVED:
                parent[key] = copy.deepcopy(value)
            elif isinstance(parent, dict):
                del parent[key]
            else:
                continue
            yield out
    for path in [(), *_places(document, (), items_each)]:
        if isinstance(_parent(document, path), dict):
            out = copy.deepcopy(document)
            _parent(out, path)["extra"] = 1
            yield out


_REMOVED = object()


def tampered(document: Any, rng: random.Random, edits: int = 1) -> Any:
    """A copy of ``document`` with ``edits`` random edits."""
    out = copy.deepcopy(document)
    for _ in range(edits):
        places = _places(out)
        if not places:
            return out
        *parent_path, key = rng.choice(places)
        parent = out
        for step in parent_path:
            parent = parent[step]
        kind = rng.random()
        if kind < 0.75:
            parent[key] = copy.deepcopy(rng.choice(VALUES))
        elif kind < 0.88 and isinstance(parent, dict):
            del parent[key]
        elif isinstance(parent, dict):
            parent[rng.choice(["extra", "Enabled", "model_config", "_x"])] = 1
    return out

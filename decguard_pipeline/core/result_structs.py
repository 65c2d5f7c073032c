"""Stored decision results as typed records (msgspec structs), checked many at a time: what the
typed readers of a report (``core.report.typed_records``) and of its properties section
(``core.properties.typed_section``) share.

The free JSON values of a report (inputs, metadata, a transformation's steps) are read as
``Free``: first as ``Shallow`` values, whose type bounds how deeply they nest (so nothing needs
measuring: a report's hundred thousand metadata objects are never walked), and, when a
report holds anything deeper, as any JSON value, which :func:`deepest` measures."""

from __future__ import annotations

from itertools import chain, compress, repeat
from operator import attrgetter, is_
from typing import Any, Generic, Literal, TypeVar, Union

import msgspec
import numpy as np

from decguard_pipeline.core.decision import select_many
from decguard_pipeline.core.exact import rows_sum_within

Free = TypeVar("Free")  # how a free JSON value is read: Shallow or Any

_Scalar = Union[str, int, float, bool, None]  # noqa: UP007 (a type alias, not an annotation)
_Within1 = Union[str, int, float, bool, None, list[_Scalar], dict[str, _Scalar]]  # noqa: UP007
_Within2 = Union[str, int, float, bool, None, list[_Within1], dict[str, _Within1]]  # noqa: UP007
# A JSON value inside at most three arrays and objects of its own (msgspec keeps integers of
# any size exact and reads the rest as it reads ``Any``); an object of them is four deep.
Shallow = Union[str, int, float, bool, None, list[_Within2], dict[str, _Within2]]  # noqa: UP007
SHALLOW_OBJECT_DEPTH = 4


# kw_only: the fields in the schema's order (``ResultModel``, which the normalised dicts keep).
# gc=False, here and in every struct of a decoded report: JSON values never refer back to
# what holds them, so no struct can be in a reference cycle, and the collector need not track
# a few hundred thousand of them (decoding 80 MB: 0.255-0.261 s against 0.273-0.299 s).
class TypedResult(
    msgspec.Struct, Generic[Free], forbid_unknown_fields=True, gc=False, kw_only=True
):
    case_id: str
    decision: str
    decision_type: Literal["choice", "noul", "score"]
    labels: list[str]
    probabilities: dict[str, float]  # integers read as floats, booleans refused
    selected: str
    confidence: float
    backend: str
    provider: str
    model: str | None = None
    model_version: str | None = None
    latency_ms: float
    metadata: dict[str, Free] = {}


_LABELS, _PROBABILITIES, _SELECTED, _CONFIDENCE = map(
    attrgetter, ("labels", "probabilities", "selected", "confidence")
)


def probabilities_hold(
    results: list[TypedResult[Any]], labels: list[str], tolerance: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``check_result_invariants`` for every one of ``results``, all of the label set
    ``labels``, a column at a time: the labels not empty and distinct, the probabilities'
    keys the labels in order, finite, >= 0, summing to 1 within ``tolerance``, ``selected``
    their first maximum and ``confidence`` its probability. The probability matrix, the
    selected indices and the confidences; None when any of it fails (or a result has other
    labels)."""
    n, k = len(results), len(labels)
    if not labels or len(set(labels)) != k:
        return None
    if list(map(_LABELS, results)).count(labels) != n:
        return None
    probabilities = list(map(_PROBABILITIES, results))
    # every result's keys, in order, are the labels: one flat list of them all
    if list(chain.from_iterable(probabilities)) != labels * n:
        return None
    matrix = np.fromiter(
        chain.from_iterable(map(dict.values, probabilities)), dtype=np.float64, count=n * k
    ).reshape(n, k)
    if not (np.isfinite(matrix).all() and (matrix >= 0.0).all()):
        return None
    if not rows_sum_within(matrix, 1.0, tolerance):
        return None
    chosen, top = select_many(matrix)
    if list(map(_SELECTED, results)) != list(map(labels.__getitem__, chosen.tolist())):
        return None
    if list(map(_CONFIDENCE, results)) != top.tolist():
        return None
    return matrix, chosen, top


def deepest(values: list[Any], level: int) -> int:
    """How many arrays and objects the deepest value among ``values`` (each inside ``level``
    of them) and everything within them is inside: one pass over each level's values, in C
    (a report's metadata is a hundred thousand flat objects: the level below them is
    scalars, found so by the set of their types)."""
    while True:
        kinds = list(map(type, values))
        found = set(kinds)
        if dict not in found and list not in found:
            return level
        dicts = compress(values, map(is_, kinds, repeat(dict)))
        lists = compress(values, map(is_, kinds, repeat(list)))
        values = [
            *chain.from_iterable(map(dict.values, dicts)),
            *chain.from_iterable(lists),
        ]
        if not values:  # empty arrays and objects hold nothing deeper
            return level
        level += 1

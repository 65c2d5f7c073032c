"""A stored ``properties`` section decoded straight into typed records (msgspec), as part of
the report's typed decoding (``core.report.typed_records``), and checked a column at a time.

It accepts only what the strict schema (:class:`schema.PropertyRunModel`) accepts and gives
exactly its ``model_dump(mode="json")``: msgspec checks every pair's shape and types while it
parses (in C, no dict per pair), the pairs' own rules (``PairModel._consistent``) and every
result's invariants (``check_result_invariants``) are checked here for all of them at once,
and the small parts (``fuzz``, ``config``, ``summaries``) go through their pydantic models
(``section_structs`` reads them without pydantic, for the ``report`` command).
The pairs stay typed records for the recomputation (``properties.report``); their dicts are
made only for what reads them (:func:`pair_dicts`).
Anything else (a problem, or anything unusual, such as transformed results of several label
sets) gives None, and the section goes the way it always went, which finds and words the
problem exactly.

Numbers: msgspec reads an integer in a float field as that float, as pydantic does; it refuses
a boolean there, and an integer or a float where the schema wants an integer (pydantic takes
``1.0`` for ``1``): those sections take the other path.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import attrgetter, is_, is_not, not_
from typing import Any, Generic, Protocol

import msgspec
import numpy as np

from decguard_pipeline.core.contract.names import PropertyName
from decguard_pipeline.core.result_structs import (
    SHALLOW_OBJECT_DEPTH,
    Free,
    TypedResult,
    deepest,
    probabilities_hold,
)
from decguard_pipeline.core.secrets import redact


class _Error(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    kind: str
    message: str


class _Comparison(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    tv_distance: float
    js_divergence: float
    max_abs_delta: float
    confidence_delta: float
    selected_before: str
    selected_after: str
    flipped: bool
    rank_changed: bool
    level_delta: float | None = None


# kw_only: the fields in the schema's order (which the normalised dicts keep), defaults or not
class _Reduced(msgspec.Struct, Generic[Free], forbid_unknown_fields=True, gc=False, kw_only=True):
    steps: list[dict[str, Free]]
    input: str | dict[str, Free]
    presentation: list[tuple[str, str]] | None = None  # (label, shown): decoded as tuples
    result: TypedResult[Free]
    comparison: _Comparison
    violations: list[str]
    backend_calls: int


class TypedPair(msgspec.Struct, Generic[Free], forbid_unknown_fields=True, gc=False, kw_only=True):
    id: str
    property: PropertyName
    case_id: str
    sample: int
    steps: list[dict[str, Free]]
    provenance: dict[str, Free] = {}
    input: str | dict[str, Free]
    presentation: list[tuple[str, str]] | None = None
    result: TypedResult[Free] | None = None
    error: _Error | None = None
    comparison: _Comparison | None = None
    violations: list[str] = []
    reduced: _Reduced[Free] | None = None


class _Skip(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    property: PropertyName
    case_id: str
    reason: str


class TypedSection(
    msgspec.Struct, Generic[Free], forbid_unknown_fields=True, gc=False, kw_only=True
):
    """The section: pairs and skips typed; ``fuzz``, ``config`` and ``summaries`` as plain
    JSON values, for their pydantic models (or their structs: ``section_structs``)."""

    seed: int
    fuzz: Any
    config: Any
    summaries: list[Any]
    pairs: list[TypedPair[Free]]
    skipped: list[_Skip] = []


_ID, _RESULT, _ERROR, _COMPARISON, _VIOLATIONS, _REDUCED, _STEPS, _PROVENANCE, _INPUT = map(
    attrgetter,
    ("id", "result", "error", "comparison", "violations", "reduced", "steps", "provenance",
     "input"),
)  # fmt: skip
_CASE_ID, _METADATA = map(attrgetter, ("case_id", "metadata"))


def nested_within(section: TypedSection[Any], limit: int, *, shallow: bool) -> bool:
    """Whether no value of the section is inside more than ``limit`` arrays and objects of
    the document (``json_limits.too_deep`` finds none there): the section's own values are
    inside the document and the section, a pair's inside two more (``pairs`` and the pair),
    its result's and reduced example's inside one more again, and the reduced result's
    metadata inside one more still. The typed fields are shallower than those.
    ``shallow``: the pairs' free values were read as ``Shallow`` ones, not measured."""
    if deepest([section.fuzz, section.config, section.summaries], 2) > limit:
        return False
    if shallow:  # the reduced result's metadata, the deepest of them, is at most this deep
        return limit >= 6 + SHALLOW_OBJECT_DEPTH
    pairs = section.pairs
    free = [*map(_STEPS, pairs), *map(_PROVENANCE, pairs), *map(_INPUT, pairs)]
    if deepest(free, 4) > limit:
        return False
    results = [r for r in map(_RESULT, pairs) if r is not None]
    reduced = [r for r in map(_REDUCED, pairs) if r is not None]
    free = [*map(_METADATA, results), *map(_STEPS, reduced), *map(_INPUT, reduced)]
    if deepest(free, 5) > limit:
        return False
    return deepest(list(map(_METADATA, map(_RESULT, reduced))), 6) <= limit


def _pairs_consistent(pairs: list[TypedPair[Any]]) -> bool:
    """``PairModel._consistent`` for every pair, a column at a time."""
    results = list(map(_RESULT, pairs))
    errors = list(map(_ERROR, pairs))
    if errors.count(None) == len(errors):  # no pair errored, as in most reports
        return _answered_consistent(pairs, results)
    answered = list(map(is_not, results, repeat(None)))
    if answered != list(map(is_, errors, repeat(None))):
        return False  # exactly one of result and error
    if answered != list(map(is_not, map(_COMPARISON, pairs), repeat(None))):
        return False  # a comparison exactly with a result
    violated = list(map(bool, map(_VIOLATIONS, pairs)))
    shrunk = list(map(is_not, map(_REDUCED, pairs), repeat(None)))
    errored = list(map(not_, answered))
    if any(compress(violated, errored)) or any(compress(shrunk, errored)):
        return False  # an errored pair has neither violations nor a reduced example
    if any(compress(shrunk, map(not_, violated))):
        return False  # a reduced example only for a pair with violations
    ids = list(compress(map(_ID, pairs), answered))
    return list(map(_CASE_ID, compress(results, answered))) == ids


def _answered_consistent(pairs: list[TypedPair[Any]], results: list[Any]) -> bool:
    """``_pairs_consistent`` of pairs none of which has an error (fewer passes)."""
    if None in results or None in map(_COMPARISON, pairs):
        return False  # a result, and a comparison with it, for each
    reduced = list(map(_REDUCED, pairs))
    if reduced.count(None) != len(reduced):
        shrunk = compress(pairs, map(is_not, reduced, repeat(None)))
        if not all(map(_VIOLATIONS, shrunk)):
            return False  # a reduced example only for a pair with violations
    return list(map(_CASE_ID, results)) == list(map(_ID, pairs))


def _results(pairs: list[TypedPair[Any]]) -> list[TypedResult[Any]]:
    """The pairs' results, then their reduced examples' results."""
    reduced = [r for r in map(_REDUCED, pairs) if r is not None]
    return [*(r for r in map(_RESULT, pairs) if r is not None), *map(_RESULT, reduced)]


def first_labels(pairs: list[TypedPair[Any]]) -> list[str] | None:
    """The labels of the first of the pairs' results (``_results``), or None without any:
    found without making the list."""
    answered = (r for r in map(_RESULT, pairs) if r is not None)
    reduced = (r.result for r in map(_REDUCED, pairs) if r is not None)
    first = next(chain(answered, reduced), None)
    return None if first is None else first.labels


@dataclass(frozen=True)
class Held:
    """What :func:`pairs_hold` found of pairs that hold on their own: the label set of
    every result among them (None when there is none), in which each result's probabilities
    are keyed, and those probabilities, a row per result in ``_results`` order (the pairs'
    results, then their reduced examples'). Their ids are their results' case ids."""

    labels: list[str] | None
    probabilities: np.ndarray


def pairs_hold(
    pairs: list[TypedPair[Any]], labels: list[str] | None, tolerance: float
) -> Held | None:
    """What the pairs are found to be (:class:`Held`) when each holds on its own what the
    strict schema asks of it beyond its shape (msgspec checked that, presentations' pairs
    of two included): its own rules (``PairModel._consistent``) and its results'
    invariants, every result of the label set ``labels`` (taken from the first result when
    None); else None."""
    if not _pairs_consistent(pairs):
        return None
    results = _results(pairs)
    if not results:
        return Held(None, np.empty((0, 0)))
    expected = results[0].labels if labels is None else labels
    found = probabilities_hold(results, expected, tolerance)
    if found is None:
        return None  # or results of several label sets: the other path decides
    return Held(expected, found[0])


def checked(section: TypedSection[Any]) -> dict[str, Any] | None:
    """The section as the strict schema normalises it, its pairs aside (``pairs`` is an
    empty list: :func:`pair_dicts` makes them, for whatever reads them), or None when its
    small parts (``fuzz``, ``config``, ``summaries``) are not plainly well-formed (then only
    the strict schema can say whether, and where, it is wrong). The pairs are the caller's
    to check (:func:`pairs_hold`), when it has all it needs."""
    # imported here: pydantic and the models of the small parts, only for reports with a
    # section (this module is imported where pydantic is not: ``core.report.halves``)
    from pydantic import ValidationError

    from decguard_pipeline.core.contract.properties import Fuzz, Properties
    from decguard_pipeline.core.properties.schema import SummaryModel

    try:
        fuzz = Fuzz.model_validate(section.fuzz).model_dump(mode="json")
        config = Properties.model_validate(section.config).model_dump(mode="json")
        summaries = [
            SummaryModel.model_validate(s).model_dump(mode="json") for s in section.summaries
        ]
    except ValidationError:
        return None
    return normalised(section, fuzz, config, summaries)


def normalised(
    section: TypedSection[Any],
    fuzz: dict[str, Any],
    config: dict[str, Any],
    summaries: list[dict[str, Any]],
) -> dict[str, Any]:
    """The section as the strict schema normalises it, from its small parts normalised (by
    their models, or their structs: ``section_structs``), its pairs aside."""
    return {
        "seed": section.seed,
        "fuzz": fuzz,
        "config": config,
        "summaries": summaries,
        "pairs": [],
        "skipped": msgspec.to_builtins(section.skipped),
    }


def pair_dicts(pairs: list[TypedPair[Any]]) -> list[dict[str, Any]]:
    """``pairs`` (of a section :func:`checked` accepted) as the schema's normalised dicts."""
    plain: list[dict[str, Any]] = msgspec.to_builtins(pairs)
    for pair in plain:
        for holder in (pair, pair["reduced"]):
            if holder is None:
                continue
            shown = holder["presentation"]
            if shown is not None:  # decoded as tuples (to_builtins keeps them): as JSON
                holder["presentation"] = list(map(list, shown))
            # the schema redacts every result's metadata (ResultModel._redact)
            if holder["result"] is not None:
                metadata = holder["result"]["metadata"]
                if metadata:
                    holder["result"]["metadata"] = redact(metadata)
    return plain


class SplitRefused(Exception):
    """A section checked in two processes (``core.report.halves``) does not plainly hold:
    only the whole report, loaded in one process, finds and words the problem."""


def failed_dicts(pairs: list[TypedPair[Any]]) -> list[dict[str, Any]]:
    """The failed ones of ``pairs`` (``summary.is_failed``), in order, as the schema's dicts."""
    # imported here: a report's loading (diff's too) does not need the summaries' module
    from decguard_pipeline.core.properties.summary import is_failed

    # those with violations or any error, then exactly the failed ones among them
    maybe = [p for p in pairs if p.violations or p.error is not None]
    return [p for p in pair_dicts(maybe) if is_failed(p)]


class Later(Protocol):
    """Pairs that follow a section's own, held elsewhere (``core.report.halves``)."""

    def pairs(self) -> list[TypedPair[Any]]: ...

    def failed_dicts(self) -> list[dict[str, Any]]: ...


class TypedPairs:
    """A verified section's pairs (and those ``later``, when another process checked them),
    made into the schema's dicts when something reads them (``golden.Report.document``);
    the text needs only the failed ones."""

    def __init__(self, pairs: list[TypedPair[Any]], later: Later | None = None) -> None:
        self._pairs = pairs
        self._later = later

    def dicts(self) -> list[dict[str, Any]]:
        later = [] if self._later is None else self._later.pairs()
        return pair_dicts(self._pairs) + pair_dicts(later)

    def failed_dicts(self) -> list[dict[str, Any]]:
        """The failed pairs (``summary.is_failed``), in order, as dicts."""
        later = [] if self._later is None else self._later.failed_dicts()
        return failed_dicts(self._pairs) + later

"""A properties section's pairs checked against the report's results a column at a time:
their results in the report's context, their comparisons and violations the recomputed
ones. Free of pydantic, as the forked child that checks a big report's later pairs
(``core.report.halves``: :func:`later_half_holds`) never imports it; the property settings
it reads are :class:`~decguard_pipeline.core.properties.limits.PropertyRules`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import attrgetter, is_not, itemgetter
from typing import Any, Protocol

import numpy as np

from decguard_pipeline.core.properties.compare import (
    COMPARISON_FIELDS,
    Comparisons,
    judge,
    judged_mask,
)
from decguard_pipeline.core.properties.limits import PropertyRules, is_monotonic
from decguard_pipeline.core.properties.pairs import OriginalColumns, compare_with_originals
from decguard_pipeline.core.properties.summary import ORIGINAL_ERROR, Figures, column_figures
from decguard_pipeline.core.properties.typed_section import Held, TypedPair, failed_dicts
from decguard_pipeline.core.results import CaseResults


def judged(config: PropertyRules, computed: Comparisons) -> list[list[str]]:
    """``judge(config, c)`` for every comparison; judged one by one only where it finds
    something (located column-wise)."""
    found: list[list[str]] = [[]] * len(computed)
    flagged = np.flatnonzero(judged_mask(config, computed))
    for row, record in zip(flagged.tolist(), computed.records(flagged), strict=True):
        found[row] = judge(config, record)
    return found


@dataclass(frozen=True)
class Access:
    """How the column-wise checks read a section's pairs, skips and results: the schema's
    normalised dicts, or the typed records they are made from (``typed_section``)."""

    get: Callable[..., Callable[[Any], Any]]  # itemgetter or attrgetter
    # whether stored comparisons are exactly the computed ones, field for field
    comparisons_equal: Callable[[list[Any], Comparisons], bool]


def dict_comparisons_equal(comparisons: list[dict[str, Any]], computed: Comparisons) -> bool:
    values = list(chain.from_iterable(map(dict.values, comparisons)))
    width = len(COMPARISON_FIELDS)
    if len(values) != width * len(comparisons):
        return False  # not exactly the fields of ``COMPARISON_FIELDS``, in that order
    return [values[field::width] for field in range(width)] == computed.columns()


_FLOAT_FIELDS = ("tv_distance", "js_divergence", "max_abs_delta", "confidence_delta")
_LABEL_FIELDS = ("selected_before", "selected_after")
_FLAG_FIELDS = ("flipped", "rank_changed")


def struct_comparisons_equal(comparisons: list[Any], computed: Comparisons) -> bool:
    # a typed comparison has exactly the fields of ``COMPARISON_FIELDS``, each of its type
    # (floats, labels, booleans): the numbers compared as arrays, with the same float ==
    n = len(comparisons)
    for name in _FLOAT_FIELDS:
        stored = np.fromiter(map(attrgetter(name), comparisons), np.float64, count=n)
        if not np.array_equal(stored, getattr(computed, name)):
            return False
    for name in _FLAG_FIELDS:
        flags = np.fromiter(map(attrgetter(name), comparisons), bool, count=n)
        if not np.array_equal(flags, getattr(computed, name)):
            return False
    labels = computed.labels
    for name in _LABEL_FIELDS:
        chosen = map(labels.__getitem__, getattr(computed, name).tolist())
        if list(map(attrgetter(name), comparisons)) != list(chosen):
            return False
    levels = list(map(attrgetter("level_delta"), comparisons))
    if computed.level_delta is None:
        return levels.count(None) == n
    return None not in levels and np.array_equal(levels, computed.level_delta)


DICTS = Access(itemgetter, dict_comparisons_equal)
STRUCTS = Access(attrgetter, struct_comparisons_equal)


def _take(values: list[Any], indices: list[int]) -> list[Any]:
    """``[values[i] for i in indices]`` (increasing indices), a slice when they are a run:
    a section's pairs are stored a property at a time."""
    if indices and indices[-1] - indices[0] == len(indices) - 1:
        return values[indices[0] : indices[-1] + 1]
    return [values[i] for i in indices]


def _group_holds(
    config: PropertyRules,
    holders: list[Any],
    ids: list[str],
    rows: list[int],
    results: CaseResults | OriginalColumns,
    access: Access,
    held: np.ndarray | None = None,
    *,
    own_ids: bool = False,
) -> Comparisons | None:
    """For ``holders`` (pairs or reduced examples of one property, with results, of the pairs
    ``ids`` of the decided cases ``rows``): their comparisons recomputed, when their results
    are in the report's context and their stored comparisons and violations are the
    recomputed ones; else None. ``held``: their results' probabilities when
    ``typed_section.pairs_hold`` found them (their labels then are the report's: checked by
    the caller); ``own_ids``: the holders are those pairs, whose ids it found their
    results' case ids."""
    get, spec = access.get, results.spec
    stored = list(map(get("result"), holders))
    labels = list(spec.labels)
    if not own_ids and list(map(get("case_id"), stored)) != ids:
        return None
    context = {
        "decision": spec.name, "decision_type": spec.type, "backend": results.backend,
        "provider": results.provider,
    }  # fmt: skip
    for field, value in context.items():
        if set(map(get(field), stored)) != {value}:
            return None
    if held is None and list(map(get("labels"), stored)).count(labels) != len(stored):
        return None
    if is_monotonic(config) and spec.type != "score":
        return None  # no levels to judge: the one-by-one checks say what happens
    after = held
    if after is None:  # every result has exactly the report's labels, in that order
        values = chain.from_iterable(map(dict.values, map(get("probabilities"), stored)))
        after = np.fromiter(values, dtype=np.float64, count=len(stored) * len(labels))
        after = after.reshape(len(stored), len(labels))
    computed = compare_with_originals(config, results, rows, after)
    if not access.comparisons_equal(list(map(get("comparison"), holders)), computed):
        return None
    if list(map(get("violations"), holders)) != judged(config, computed):
        return None
    return computed


@dataclass(frozen=True)
class Matched:
    """Pairs that :func:`matched` found to hold: each one's property (its position in
    ``order``, the enabled properties), which have an error or a reduced example, and the
    comparisons of each property's pairs that hold one (recomputed; the stored ones equal
    them), from which their summaries' figures follow."""

    order: list[str]
    codes: np.ndarray
    errored: list[int]
    reduced: np.ndarray  # of bools
    compared: dict[str, Comparisons]

    def figures(
        self, names: list[str], enabled: dict[str, PropertyRules], pairs: list[Any], access: Access
    ) -> dict[str, Figures]:
        """``summary.figures_by_property(names, enabled, pairs)``, from the columns."""
        size = len(self.order)
        counts = np.bincount(self.codes, minlength=size).tolist()
        reduced = np.bincount(self.codes[self.reduced], minlength=size).tolist()
        kinds: list[list[str]] = [[] for _ in self.order]
        error, kind = access.get("error"), access.get("kind")
        for index in self.errored:
            kinds[self.codes[index]].append(kind(error(pairs[index])))
        figures = {}
        for name in names:
            code = self.order.index(name)
            counted = (counts[code], kinds[code], reduced[code])
            figures[name] = column_figures(enabled[name], counted, self.compared.get(name))
        return figures


def matched(
    pairs: list[Any],
    skipped: list[Any],
    enabled: dict[str, PropertyRules],
    results: CaseResults | OriginalColumns,
    row_of: dict[str, int],
    access: Access,
    held: Held | None = None,
) -> Matched | None:
    """What the pairs are found to be when the one-by-one checks of the pairs and their
    context (``report._check_pairs`` and ``report._check_context``) find nothing, with the
    per-pair work done once per column instead of once per pair; None when they would.
    ``held``: what ``typed_section.pairs_hold`` found of these very pairs (typed)."""
    get = access.get
    ids, names = list(map(get("id"), pairs)), list(map(get("property"), pairs))
    cases = list(map(get("case_id"), pairs))
    if len(set(ids)) != len(ids):
        return None
    keys = zip(names, cases, map(get("sample"), pairs), strict=True)
    if ids != [f"{name}/{case}/{sample}" for name, case, sample in keys]:
        return None
    rows = list(map(row_of.get, cases))
    if not set(names) <= enabled.keys() or None in rows:
        return None
    if held is not None and held.labels not in (None, list(results.spec.labels)):
        return None  # the results' labels are not the report's
    decided = results.selected[np.asarray(rows, dtype=np.intp)] >= 0
    errors = list(map(get("error"), pairs))
    kind = get("kind")
    for index in np.flatnonzero(~decided).tolist():  # the original errored: so must the pair
        stored_error = errors[index]
        if stored_error is None or kind(stored_error) != ORIGINAL_ERROR:
            return None
    n = len(pairs)
    has_result = np.fromiter(map(is_not, map(get("result"), pairs), repeat(None)), bool, n)
    answered = decided & has_result
    shrunk = np.fromiter(map(is_not, map(get("reduced"), pairs), repeat(None)), bool, n)
    # each result's row of the held probabilities: the pairs' results, then the reduced ones'
    result_row = np.cumsum(has_result) - 1
    reduced_row = np.count_nonzero(has_result) + np.cumsum(shrunk) - 1
    order = list(enabled)
    codes = np.fromiter(map(order.index, names), np.intp, count=n)
    compared: dict[str, Comparisons] = {}
    reduced = get("reduced")
    for code, name in enumerate(order):
        ofit = codes == code
        found = np.flatnonzero(answered & ofit)
        if not len(found):
            continue
        indices = found.tolist()
        computed = _group_holds(
            enabled[name], _take(pairs, indices), _take(ids, indices), _take(rows, indices),
            results, access, None if held is None else held.probabilities[result_row[found]],
            own_ids=held is not None,
        )  # fmt: skip
        if computed is None:
            return None
        compared[name] = computed
        found = np.flatnonzero(answered & ofit & shrunk)
        small = found.tolist()
        if small and _group_holds(
            enabled[name],
            [reduced(pairs[i]) for i in small],
            [ids[i] for i in small],
            [rows[i] for i in small],
            results,
            access,
            None if held is None else held.probabilities[reduced_row[found]],
        ) is None:  # fmt: skip
            return None
    skip_keys = zip(map(get("property"), skipped), map(get("case_id"), skipped), strict=True)
    if not all(name in enabled and case in row_of for name, case in skip_keys):
        return None
    errored = list(compress(range(n), map(is_not, errors, repeat(None))))
    return Matched(order, codes, errored, shrunk, compared)


@dataclass(frozen=True)
class HalfVerdict:
    """What the process that checked a section's later pairs (``core.report.halves``) found
    them to be, when they hold: what the checks of the whole section need of them."""

    # the hashes of their ids (``hash``: a forked child's are this process's), for the ids
    # to be unique across both processes: ids of equal hashes are taken for the same
    hashes: np.ndarray
    figures: dict[str, Figures]  # of each enabled property
    failed: list[dict[str, Any]]  # the failed pairs, as the schema's dicts


def id_hashes(ids: Iterable[str], n: int) -> np.ndarray:
    """The hashes of ``n`` ids (:class:`HalfVerdict`)."""
    return np.fromiter(map(hash, ids), dtype=np.int64, count=n)


class LaterHalf(Protocol):
    """A section's later pairs, checked by another process: its verdict (waited for)."""

    def verdict(self) -> HalfVerdict | None: ...


def later_half_holds(
    pairs: list[TypedPair[Any]],
    enabled: dict[str, PropertyRules],
    results: OriginalColumns,
    held: Held | None = None,
) -> HalfVerdict | None:
    """The verdict on a section's later ``pairs`` (the other process's part), each of which
    holds on its own (``typed_section.pairs_hold``, which found ``held`` of them), or None
    when they do not plainly hold as :func:`matched` checks them. ``enabled``: the section's
    enabled properties."""
    try:
        row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
        found = matched(pairs, [], enabled, results, row_of, STRUCTS, held)
        if found is None:
            return None
        return HalfVerdict(
            hashes=id_hashes(map(attrgetter("id"), pairs), len(pairs)),
            figures=found.figures(list(enabled), enabled, pairs, STRUCTS),
            failed=failed_dicts(pairs),
        )
    except (ArithmeticError, LookupError, TypeError, ValueError):
        return None

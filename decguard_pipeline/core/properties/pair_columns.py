"""A properties section's pairs checked against the report's results a column at a time:
their results in the report's context, their comparisons and violations the recomputed
ones. Free of pydantic, as the forked child that checks a big report's later pairs
(``core.report.halves``: :func:`later_half_holds`) never imports it; the property settings
it reads are :class:`~decguard_pipeline.core.properties.limits.PropertyRules`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter, eq, is_not, itemgetter
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
from decguard_pipeline.core.properties.summary import ORIGINAL_ERROR, Figures, figures_by_property
from decguard_pipeline.core.properties.typed_section import TypedPair, failed_dicts
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
    # stored comparisons as one column per field of ``COMPARISON_FIELDS``, or None when
    # they do not hold exactly those fields, in that order
    comparison_columns: Callable[[list[Any]], list[list[Any]] | None]


def dict_columns(comparisons: list[dict[str, Any]]) -> list[list[Any]] | None:
    values = list(chain.from_iterable(map(dict.values, comparisons)))
    width = len(COMPARISON_FIELDS)
    if len(values) != width * len(comparisons):
        return None
    return [values[field::width] for field in range(width)]


def struct_columns(comparisons: list[Any]) -> list[list[Any]]:
    # a typed comparison has exactly the fields of a normalised one, in the same order
    return [list(map(attrgetter(name), comparisons)) for name in COMPARISON_FIELDS]


DICTS = Access(itemgetter, dict_columns)
STRUCTS = Access(attrgetter, struct_columns)


def _group_holds(
    config: PropertyRules,
    holders: list[Any],
    ids: list[str],
    rows: list[int],
    results: CaseResults | OriginalColumns,
    access: Access,
) -> bool:
    """For ``holders`` (pairs or reduced examples of one property, with results, of the pairs
    ``ids`` of the decided cases ``rows``): their results are in the report's context, and
    their comparisons and violations are the recomputed ones."""
    get, spec = access.get, results.spec
    stored = list(map(get("result"), holders))
    labels = list(spec.labels)
    if list(map(get("case_id"), stored)) != ids:
        return False
    context = get("decision", "decision_type", "backend", "provider")
    if set(map(context, stored)) != {(spec.name, spec.type, results.backend, results.provider)}:
        return False
    if not all(map(eq, repeat(labels), map(get("labels"), stored))):
        return False
    if is_monotonic(config) and spec.type != "score":
        return False  # no levels to judge: the one-by-one checks say what happens
    # every result has exactly the report's labels (checked above), in that order
    values = chain.from_iterable(map(dict.values, map(get("probabilities"), stored)))
    after = np.fromiter(values, dtype=np.float64, count=len(stored) * len(labels))
    after = after.reshape(len(stored), len(labels))
    computed = compare_with_originals(config, results, rows, after)
    # stored comparisons hold exactly their fields, in order: compared column by column
    stored_columns = access.comparison_columns(list(map(get("comparison"), holders)))
    if stored_columns is None or stored_columns != computed.columns():
        return False
    return list(map(get("violations"), holders)) == judged(config, computed)


def pairs_match(
    pairs: list[Any],
    skipped: list[Any],
    enabled: dict[str, PropertyRules],
    results: CaseResults | OriginalColumns,
    row_of: dict[str, int],
    access: Access,
) -> bool:
    """Whether the one-by-one checks of the pairs and their context (``report._check_pairs``
    and ``report._check_context``) find nothing, with the per-pair work done once per column
    instead of once per pair."""
    get = access.get
    ids, names = list(map(get("id"), pairs)), list(map(get("property"), pairs))
    cases = list(map(get("case_id"), pairs))
    if len(set(ids)) != len(ids):
        return False
    keys = zip(names, cases, map(get("sample"), pairs), strict=True)
    if ids != [f"{name}/{case}/{sample}" for name, case, sample in keys]:
        return False
    rows = list(map(row_of.get, cases))
    if not set(names) <= enabled.keys() or None in rows:
        return False
    decided = results.selected[np.asarray(rows, dtype=np.intp)] >= 0
    error, kind, reduced = get("error"), get("kind"), get("reduced")
    for index in np.flatnonzero(~decided).tolist():  # the original errored: so must the pair
        stored_error = error(pairs[index])
        if stored_error is None or kind(stored_error) != ORIGINAL_ERROR:
            return False
    answered = decided & np.fromiter(map(is_not, map(get("result"), pairs), repeat(None)), bool)
    order = list(enabled)
    codes = np.fromiter(map(order.index, names), np.intp, count=len(names))
    groups = {
        name: np.flatnonzero(answered & (codes == code)).tolist() for code, name in enumerate(order)
    }
    for name, indices in groups.items():
        if not indices:
            continue
        holders = [pairs[i] for i in indices]
        if not _group_holds(
            enabled[name],
            holders,
            [ids[i] for i in indices],
            [rows[i] for i in indices],
            results,
            access,
        ):
            return False
        shrunk = [i for i in indices if reduced(pairs[i]) is not None]
        if shrunk and not _group_holds(
            enabled[name],
            [reduced(pairs[i]) for i in shrunk],
            [ids[i] for i in shrunk],
            [rows[i] for i in shrunk],
            results,
            access,
        ):
            return False
    skip_keys = zip(map(get("property"), skipped), map(get("case_id"), skipped), strict=True)
    return all(name in enabled and case in row_of for name, case in skip_keys)


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
    pairs: list[TypedPair[Any]], enabled: dict[str, PropertyRules], results: OriginalColumns
) -> HalfVerdict | None:
    """The verdict on a section's later ``pairs`` (the other process's part), each of which
    holds on its own (``typed_section.pairs_hold``), or None when they do not plainly hold
    as ``pairs_match`` checks them. ``enabled``: the section's enabled properties."""
    try:
        row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
        if not pairs_match(pairs, [], enabled, results, row_of, STRUCTS):
            return None
        return HalfVerdict(
            hashes=id_hashes(map(attrgetter("id"), pairs), len(pairs)),
            figures=figures_by_property(list(enabled), enabled, pairs, get=attrgetter),
            failed=failed_dicts(pairs),
        )
    except (ArithmeticError, LookupError, TypeError, ValueError):
        return None

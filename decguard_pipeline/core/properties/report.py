"""The ``properties`` section of a stored report: verification on load, and re-judging with
a (possibly edited) contract for ``report --contract`` (DecGuard §7.2, §7.3, §9.6).

Both re-compute every pair's comparison from the stored transformed result and the stored
original result; transformations are never regenerated here.

Verification has a fast path: the section is loaded with plain-dict checks (:mod:`fast`) and
checked with whole-column comparisons (:func:`_holds`); only when one of them finds something
off do the strict schema and the one-pair-at-a-time checks run, and they report the problem
exactly as DecGuard does (the first one, at its location).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, repeat
from operator import eq, is_not, itemgetter
from typing import Any

import numpy as np
from pydantic import ValidationError

from decguard_pipeline.core.contract.properties import AnyProperty, Monotonic, Properties
from decguard_pipeline.core.properties.compare import (
    COMPARISON_FIELDS,
    Comparisons,
    judge,
    judged_mask,
)
from decguard_pipeline.core.properties.fast import load_plain
from decguard_pipeline.core.properties.pairs import compare_with_originals, result_probabilities
from decguard_pipeline.core.properties.schema import PropertyRunModel
from decguard_pipeline.core.properties.summary import (
    ORIGINAL_ERROR,
    property_checks,
    summarize_all,
)
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.core.validation import format_errors


class SectionError(ValueError):
    """A structurally invalid section; ``lines`` are DecGuard's ``location: message`` lines."""

    def __init__(self, lines: str) -> None:
        super().__init__(lines)
        self.lines = lines


def load_section(section: Any, tolerance: float, *, plain_json: bool = False) -> dict[str, Any]:
    """The section validated and normalised (numbers as floats, tuples as lists).

    ``plain_json``: the section is straight from a JSON parser that refuses NaN and Infinity
    (orjson), so the plain-dict fast path may load it; the strict schema runs when it is off,
    or when the fast path finds anything not plainly well-formed."""
    if plain_json:
        loaded = load_plain(section, tolerance)
        if loaded is not None:
            return loaded
    try:
        model = PropertyRunModel.model_validate(
            section, context={"probability_tolerance": tolerance}
        )
    except ValidationError as exc:
        raise SectionError(format_errors(exc, prefix="properties")) from exc
    return model.model_dump(mode="json")


def _recompare(
    pairs: Sequence[dict[str, Any]],
    which: str,
    configs: dict[str, AnyProperty],
    results: CaseResults,
    row_of: dict[str, int],
) -> dict[int, dict[str, Any]]:
    """Recomputed comparisons by pair index, for pairs whose ``which`` ("pair" or "reduced")
    holds a result and whose property and decided original are known."""
    groups: dict[str, list[int]] = {}
    for index, pair in enumerate(pairs):
        holder = pair if which == "pair" else pair["reduced"]
        if holder is None or holder["result"] is None or pair["property"] not in configs:
            continue
        row = row_of.get(pair["case_id"])
        if row is None or results.selected[row] < 0:
            continue
        groups.setdefault(pair["property"], []).append(index)
    out: dict[int, dict[str, Any]] = {}
    k = len(results.labels)
    for name, indices in groups.items():
        holders = [pairs[i] if which == "pair" else pairs[i]["reduced"] for i in indices]
        after = result_probabilities([h["result"] for h in holders], k)
        rows = [row_of[pairs[i]["case_id"]] for i in indices]
        records = compare_with_originals(configs[name], results, rows, after).records()
        out.update(zip(indices, records, strict=True))
    return out


def _check_pairs(section: dict[str, Any], results: CaseResults, row_of: dict[str, int]) -> None:
    config = Properties.model_validate(section["config"])
    enabled = config.enabled()
    pairs = section["pairs"]
    compared = _recompare(pairs, "pair", enabled, results, row_of)
    reduced_compared = _recompare(pairs, "reduced", enabled, results, row_of)
    seen: set[str] = set()
    for index, pair in enumerate(pairs):
        where = f"properties.pairs.{index} ({pair['id']})"
        expected_id = f"{pair['property']}/{pair['case_id']}/{pair['sample']}"
        if pair["id"] != expected_id:
            raise ValueError(f"{where}: id must be {expected_id!r}")
        if pair["id"] in seen:
            raise ValueError(f"{where}: duplicate transformed case id {pair['id']!r}")
        seen.add(pair["id"])
        prop = enabled.get(pair["property"])
        if prop is None:
            raise ValueError(f"{where}: property {pair['property']!r} is not in properties.config")
        row = row_of.get(pair["case_id"])
        if row is None:
            raise ValueError(f"{where}: case {pair['case_id']!r} is not in results")
        if results.selected[row] < 0:
            if pair["error"] is None or pair["error"]["kind"] != ORIGINAL_ERROR:
                raise ValueError(f"{where}: the original case errored, so this one must too")
            continue
        if pair["result"] is None:
            continue
        comparison = compared[index]
        if pair["comparison"] != comparison:
            raise ValueError(f"{where}: comparison does not match the stored results")
        if pair["violations"] != judge(prop, comparison):
            raise ValueError(f"{where}: violations do not match the property settings")
        reduced = pair["reduced"]
        if reduced is not None:
            again = reduced_compared[index]
            if reduced["comparison"] != again or reduced["violations"] != judge(prop, again):
                raise ValueError(f"{where}: reduced example does not match its result")
            if reduced["result"]["case_id"] != pair["id"]:
                raise ValueError(f"{where}: reduced result.case_id does not match id")
    for index, skip in enumerate(section["skipped"]):
        where = f"properties.skipped.{index}"
        if skip["property"] not in enabled:
            raise ValueError(f"{where}: property {skip['property']!r} is not in properties.config")
        if skip["case_id"] not in row_of:
            raise ValueError(f"{where}: case {skip['case_id']!r} is not in results")


def _check_context(section: dict[str, Any], results: CaseResults) -> None:
    spec = results.spec
    context = (spec.name, spec.type, list(spec.labels), results.backend, results.provider)
    for pair in section["pairs"]:
        stored = [pair["result"]]
        if pair["reduced"] is not None:
            stored.append(pair["reduced"]["result"])
        for result in stored:
            if result is None:
                continue
            actual = (
                result["case_id"],
                result["decision"],
                result["decision_type"],
                list(result["labels"]),
                result["backend"],
                result["provider"],
            )
            if actual != (pair["id"], *context):
                raise ValueError(
                    f"result {result['case_id']!r} does not match the report decision/backend "
                    "context"
                )


def _check_summaries(section: dict[str, Any], n_cases: int) -> None:
    names = [s["property"] for s in section["summaries"]]
    if len(names) != len(set(names)):
        raise ValueError("property summaries contain duplicate properties")
    enabled = Properties.model_validate(section["config"]).enabled()
    if any(name not in enabled for name in names):
        raise ValueError("property summaries contain a property not in configuration")
    again = summarize_all(names, enabled, section["pairs"], section["skipped"], n_cases)
    if again != section["summaries"]:
        raise ValueError("property summaries do not match stored transformed cases")


_CONTEXT = itemgetter("decision", "decision_type", "backend", "provider")
_LABELS = itemgetter("labels")
_COMPARISON = itemgetter("comparison")
_ID = itemgetter("id")
_SAMPLE = itemgetter("sample")
_PROPERTY = itemgetter("property")
_CASE = itemgetter("case_id")
_RESULT = itemgetter("result")
_PROBABILITIES = itemgetter("probabilities")


def _judged(config: AnyProperty, computed: Comparisons) -> list[list[str]]:
    """``judge(config, c)`` for every comparison; judged one by one only where it finds
    something (located column-wise)."""
    found: list[list[str]] = [[]] * len(computed)
    flagged = np.flatnonzero(judged_mask(config, computed))
    for row, record in zip(flagged.tolist(), computed.records(flagged), strict=True):
        found[row] = judge(config, record)
    return found


def _group_holds(
    config: AnyProperty,
    holders: list[dict[str, Any]],
    ids: list[str],
    rows: list[int],
    results: CaseResults,
) -> bool:
    """For ``holders`` (pairs or reduced examples of one property, with results, of the pairs
    ``ids`` of the decided cases ``rows``): their results are in the report's context, and
    their comparisons and violations are the recomputed ones."""
    spec = results.spec
    stored = list(map(_RESULT, holders))
    labels = list(spec.labels)
    if list(map(_CASE, stored)) != ids:
        return False
    if set(map(_CONTEXT, stored)) != {(spec.name, spec.type, results.backend, results.provider)}:
        return False
    if not all(map(eq, repeat(labels), map(_LABELS, stored))):
        return False
    if isinstance(config, Monotonic) and spec.type != "score":
        return False  # no levels to judge: the one-by-one checks say what happens
    # every result has exactly the report's labels (checked above), in that order
    values = chain.from_iterable(map(dict.values, map(_PROBABILITIES, stored)))
    after = np.fromiter(values, dtype=np.float64, count=len(stored) * len(labels))
    after = after.reshape(len(stored), len(labels))
    computed = compare_with_originals(config, results, rows, after)
    # stored comparisons hold exactly their fields, in order: compared column by column
    stored_values = list(chain.from_iterable(map(dict.values, map(_COMPARISON, holders))))
    width = len(COMPARISON_FIELDS)
    if len(stored_values) != width * len(holders):
        return False
    for field, column in enumerate(computed.columns()):
        if stored_values[field::width] != column:
            return False
    return [h["violations"] for h in holders] == _judged(config, computed)


def _pairs_hold(
    section: dict[str, Any],
    enabled: dict[str, AnyProperty],
    results: CaseResults,
    row_of: dict[str, int],
) -> bool:
    """Whether ``_check_pairs`` and ``_check_context`` find nothing, with the per-pair work
    done once per column instead of once per pair."""
    pairs = section["pairs"]
    ids, names, cases = list(map(_ID, pairs)), list(map(_PROPERTY, pairs)), list(map(_CASE, pairs))
    if len(set(ids)) != len(ids):
        return False
    keys = zip(names, cases, map(_SAMPLE, pairs), strict=True)
    if ids != [f"{name}/{case}/{sample}" for name, case, sample in keys]:
        return False
    rows = list(map(row_of.get, cases))
    if not set(names) <= enabled.keys() or None in rows:
        return False
    decided = results.selected[np.asarray(rows, dtype=np.intp)] >= 0
    for index in np.flatnonzero(~decided).tolist():  # the original errored: so must the pair
        error = pairs[index]["error"]
        if error is None or error["kind"] != ORIGINAL_ERROR:
            return False
    answered = decided & np.fromiter(map(is_not, map(_RESULT, pairs), repeat(None)), bool)
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
            enabled[name], holders, [ids[i] for i in indices], [rows[i] for i in indices], results
        ):
            return False
        shrunk = [i for i in indices if pairs[i]["reduced"] is not None]
        if shrunk and not _group_holds(
            enabled[name],
            [pairs[i]["reduced"] for i in shrunk],
            [ids[i] for i in shrunk],
            [rows[i] for i in shrunk],
            results,
        ):
            return False
    return all(
        skip["property"] in enabled and skip["case_id"] in row_of for skip in section["skipped"]
    )


def _summaries_hold(section: dict[str, Any], enabled: dict[str, AnyProperty], n: int) -> bool:
    names = [s["property"] for s in section["summaries"]]
    if len(names) != len(set(names)) or any(name not in enabled for name in names):
        return False
    again = summarize_all(names, enabled, section["pairs"], section["skipped"], n)
    return again == section["summaries"]


def _holds(
    section: dict[str, Any],
    enabled: dict[str, AnyProperty],
    results: CaseResults,
    row_of: dict[str, int],
) -> bool:
    """True only when the one-by-one checks (``_check_pairs``, ``_check_context``,
    ``_check_summaries``) would find nothing; False sends them to find the first problem."""
    try:
        return _pairs_hold(section, enabled, results, row_of) and _summaries_hold(
            section, enabled, len(results)
        )
    except (ArithmeticError, LookupError, TypeError, ValueError):
        return False  # whatever it is, the one-by-one checks meet it the way they always did


def verify_section(
    section: dict[str, Any],
    results: CaseResults,
    mode: str,
    *,
    tolerance: float = 1e-3,
    plain_json: bool = False,
    loaded: bool = False,
) -> list[dict[str, Any]]:
    """Recompute and check a stored properties section; returns the property checks.

    ``section`` is replaced in place by its normalised form. Raises ``SectionError`` (a
    ValueError with DecGuard's location lines) for a malformed section and ValueError with
    DecGuard's message when a pair, skip or summary does not match the stored results.
    ``plain_json``: see :func:`load_section`. ``loaded``: the section is its normalised
    form already (``typed_section.normalised`` made it)."""
    normalised = section if loaded else load_section(section, tolerance, plain_json=plain_json)
    config = Properties.model_validate(normalised["config"])
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    if not _holds(normalised, config.enabled(), results, row_of):
        _check_pairs(normalised, results, row_of)
        _check_context(normalised, results)
        _check_summaries(normalised, len(results))
    if normalised is not section:
        section.clear()
        section.update(normalised)
    return property_checks(normalised["summaries"], config)


def rejudge(
    section: dict[str, Any], config: Properties, results: CaseResults
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Apply ``config`` (a contract's properties) to stored pairs: pairs and skips of
    properties no longer enabled are dropped; a reduced example is kept (re-judged) only
    while its pair still violates; summaries only for properties enabled now and summarised
    before; newly enabled properties fail their checks (not run)."""
    enabled = config.enabled()
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    kept = [dict(p) for p in section["pairs"] if p["property"] in enabled]
    compared = _recompare(kept, "pair", enabled, results, row_of)
    reduced_compared = _recompare(kept, "reduced", enabled, results, row_of)
    for index, pair in enumerate(kept):
        comparison = compared.get(index)
        if comparison is None:  # errored pair or errored original: unchanged
            continue
        prop = enabled[pair["property"]]
        pair["comparison"] = comparison
        pair["violations"] = judge(prop, comparison)
        reduced = pair["reduced"]
        if reduced is not None and pair["violations"]:
            again = reduced_compared[index]
            pair["reduced"] = {**reduced, "comparison": again, "violations": judge(prop, again)}
        else:
            pair["reduced"] = None
    skipped = [s for s in section["skipped"] if s["property"] in enabled]
    stored_names = {s["property"] for s in section["summaries"]}
    names = [name for name in enabled if name in stored_names]
    n_cases = section["summaries"][0]["n_cases"] if section["summaries"] else 0
    summaries = summarize_all(names, enabled, kept, skipped, n_cases)
    rejudged = {
        "seed": section["seed"],
        "fuzz": section["fuzz"],
        "config": config.model_dump(mode="json"),
        "summaries": summaries,
        "pairs": kept,
        "skipped": skipped,
    }
    return rejudged, property_checks(summaries, config)

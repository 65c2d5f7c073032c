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
from typing import Any

from pydantic import ValidationError

from decguard_pipeline.core.contract.properties import AnyProperty, Properties
from decguard_pipeline.core.properties.compare import (
    judge,
)
from decguard_pipeline.core.properties.fast import load_plain
from decguard_pipeline.core.properties.pair_columns import (
    DICTS,
    LaterHalf,
)
from decguard_pipeline.core.properties.pairs import (
    compare_with_originals,
    result_probabilities,
)
from decguard_pipeline.core.properties.schema import PropertyRunModel
from decguard_pipeline.core.properties.section_holds import holds, typed_checks
from decguard_pipeline.core.properties.summary import (
    ORIGINAL_ERROR,
    property_checks,
    summarize_all,
)
from decguard_pipeline.core.properties.typed_section import (
    Held,
    SplitRefused,
    TypedSection,
    pair_dicts,
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


def verify_section(
    section: dict[str, Any],
    results: CaseResults,
    mode: str,
    *,
    tolerance: float = 1e-3,
    plain_json: bool = False,
    typed: TypedSection[Any] | None = None,
    held: Held | None = None,
    later: LaterHalf | None = None,
) -> list[dict[str, Any]]:
    """Recompute and check a stored properties section; returns the property checks.

    ``section`` is replaced in place by its normalised form. Raises ``SectionError`` (a
    ValueError with DecGuard's location lines) for a malformed section and ValueError with
    DecGuard's message when a pair, skip or summary does not match the stored results.
    ``plain_json``: see :func:`load_section`. ``typed``: the section's pairs and skips as
    typed records (then ``section`` is its normalised form already, made by
    ``typed_section.checked``), checked as they are; the section's ``pairs`` are left empty
    when they hold (``typed_section.pair_dicts`` makes them), made here when they do not.
    ``held``: what ``typed_section.pairs_hold`` found of ``typed``'s pairs. ``later``: the
    typed pairs after ``typed``'s, checked by another process; SplitRefused when anything
    does not plainly hold."""
    if typed is not None:
        normalised = section
    else:
        normalised = load_section(section, tolerance, plain_json=plain_json)
    config = Properties.model_validate(normalised["config"])
    enabled = config.enabled()
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    summaries = normalised["summaries"]
    if typed is not None:
        checks = typed_checks(summaries, typed, config, results, later, held)
        if checks is not None:
            return checks
        if later is not None:
            raise SplitRefused
        normalised["pairs"] = pair_dicts(typed.pairs)  # for the checks below to word it
    pairs, skipped = normalised["pairs"], normalised["skipped"]
    if not holds(summaries, pairs, skipped, enabled, results, row_of, DICTS):
        _check_pairs(normalised, results, row_of)
        _check_context(normalised, results)
        _check_summaries(normalised, len(results))
    if normalised is not section:
        section.clear()
        section.update(normalised)
    return property_checks(summaries, config)


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

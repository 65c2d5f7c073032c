"""Run a plan's properties against a backend (DecGuard §9.2–§9.7).

original decision -> controlled transformation -> new decision -> comparison -> verdict.
The originals are the golden results of the same run (no second call for them). Every
transformed case goes through the concurrent runner in one batch; minimisation then advances
all failing pairs together, one call per pair per round, so each pair makes exactly the
calls DecGuard makes, in the same order, while different pairs run concurrently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.properties.compare import Comparisons, judge_many
from decguard_pipeline.core.properties.minimize import GreedySearch
from decguard_pipeline.core.properties.pairs import (
    compare_with_originals,
    error_doc,
    presentation_doc,
    reduced_doc,
    section_doc,
)
from decguard_pipeline.core.properties.summary import (
    ORIGINAL_ERROR,
    property_checks,
    summarize_columns,
)
from decguard_pipeline.core.properties.transform import Transform
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.runs.properties.execute import Decided, decide_columns
from decguard_pipeline.runs.properties.extension import properties_extension
from decguard_pipeline.runs.properties.paraphrase import create_paraphraser
from decguard_pipeline.runs.properties.plan import (
    PlannedPairs,
    PropertyPlan,
    build_transforms,
    generate_pairs,
)


class PropertyOutcome(tuple):  # type: ignore[type-arg]
    """``(section, checks)`` as DecGuard reports them; unpacks like a pair.

    ``pipeline`` is this project's extension (sidecar section ``properties``): Wilson
    intervals of the violation and flip rates and the backend calls made per property."""

    pipeline: dict[str, Any]

    def __new__(
        cls, section: dict[str, Any], checks: list[dict[str, Any]], pipeline: dict[str, Any]
    ) -> PropertyOutcome:
        outcome = super().__new__(cls, (section, checks))
        outcome.pipeline = pipeline
        return outcome

    def __getnewargs__(self) -> tuple[Any, ...]:  # pickling (e.g. a Dagster IO manager)
        return (self[0], self[1], self.pipeline)

    @property
    def section(self) -> dict[str, Any]:
        return self[0]  # type: ignore[no-any-return]

    @property
    def checks(self) -> list[dict[str, Any]]:
        return self[1]  # type: ignore[no-any-return]


def _judged(
    plan: PropertyPlan,
    names: Sequence[str],
    rows: Sequence[int],
    decided: Decided,
    originals: CaseResults,
    compared: dict[str, Comparisons] | None = None,
) -> list[tuple[dict[str, Any], list[str]] | None]:
    """(comparison, violations) per decided example, None where the call errored; example
    ``i`` transformed dataset row ``rows[i]`` for property ``names[i]``. Compared and judged
    column-wise, one property at a time (each property's comparisons kept in ``compared``
    when given)."""
    enabled = plan.enabled
    out: list[tuple[dict[str, Any], list[str]] | None] = [None] * len(names)
    ok = decided.selected >= 0
    codes = {name: code for code, name in enumerate(enabled)}
    of_property = np.fromiter(map(codes.__getitem__, names), dtype=np.intp, count=len(names))
    for code, (name, config) in enumerate(enabled.items()):
        indices = np.flatnonzero(ok & (of_property == code))
        if not len(indices):
            continue
        where = indices.tolist()
        comparisons = compare_with_originals(
            config, originals, [rows[i] for i in where], decided.probs[indices]
        )
        if compared is not None:
            compared[name] = comparisons
        verdicts = zip(comparisons.records(), judge_many(config, comparisons), strict=True)
        for i, verdict in zip(where, verdicts, strict=True):
            out[i] = verdict
    return out


def _pair_docs(
    planned: PlannedPairs,
    originals: CaseResults,
    decided: Decided,
    judged: list[tuple[dict[str, Any], list[str]] | None],
    sent: list[int],
) -> list[dict[str, Any]]:
    """The ``pairs`` of the section, in plan order; pair ``sent[i]`` was decided as
    example ``i``. Built column by column: results for all answered examples at once, the
    error of each pair that has one, and each distinct presentation's document once (pairs
    showing the same order share it)."""
    n = len(planned)
    answered = [i for i, verdict in enumerate(judged) if verdict is not None]
    results: list[dict[str, Any] | None] = [None] * len(sent)
    for i, result in zip(answered, decided.results(answered), strict=True):
        results[i] = result
    if len(sent) == n:  # every pair was sent, in plan order
        verdicts = judged
    else:
        verdicts, sent_results = [None] * n, results
        results = [None] * n
        for i, index in enumerate(sent):
            verdicts[index], results[index] = judged[i], sent_results[i]
    errors: list[dict[str, str] | None] = [None] * n
    if len(answered) < n:
        example_of = dict(zip(sent, range(len(sent)), strict=True))
        original_error = originals.error_kind
        for index, (error, row) in enumerate(zip(planned.error, planned.row, strict=True)):
            if error is not None:
                errors[index] = error_doc(*error)
            elif index not in example_of:  # the original errored: nothing was sent
                errors[index] = error_doc(
                    ORIGINAL_ERROR,
                    f"the original case errored ({original_error[row]}), nothing to compare",
                )
            elif verdicts[index] is None:
                errors[index] = decided.error(example_of[index])
    shown_docs: dict[int, Any] = {}
    for shown in planned.presentation:
        if id(shown) not in shown_docs:
            shown_docs[id(shown)] = presentation_doc(shown)
    return [
        {
            "id": pair,
            "property": name,
            "case_id": case_id,
            "sample": sample,
            "steps": list(steps),
            "provenance": provenance,
            "input": value,
            "presentation": shown_docs[id(shown)],
            "result": result,
            "error": error,
            "comparison": None if verdict is None else verdict[0],
            "violations": [] if verdict is None else verdict[1],
            "reduced": None,
        }
        for pair, name, case_id, sample, steps, provenance, value, shown, result, error, verdict
        in zip(
            planned.id, planned.property, planned.case_id, planned.sample, planned.steps,
            planned.provenance, planned.input, planned.presentation, results, errors, verdicts,
            strict=True,
        )
    ]  # fmt: skip


def _minimize(
    plan: PropertyPlan,
    planned: PlannedPairs,
    pairs: list[dict[str, Any]],
    transforms: dict[str, Transform],
    originals: CaseResults,
    backend: Backend,
    *,
    tolerance: float,
    max_concurrency: int,
) -> Counter[str]:
    """Shrink every failing pair of a reducible property; returns calls made per property."""
    searches: dict[int, GreedySearch] = {}
    reducible = {name for name, config in plan.enabled.items() if config.reducible}
    for index, (pair, name) in enumerate(zip(pairs, planned.property, strict=True)):
        if pair["violations"] and name in reducible:
            searches[index] = GreedySearch(
                transforms[name],
                originals.inputs[planned.row[index]],
                planned.steps[index],
                plan.fuzz.max_minimize_calls,
            )
    found: dict[int, tuple[dict[str, Any], dict[str, Any], list[str]]] = {}
    while True:
        pending = [(index, search.next()) for index, search in searches.items()]
        active = [(index, mutation) for index, mutation in pending if mutation is not None]
        if not active:
            break
        decided = decide_columns(
            backend,
            originals.spec,
            [planned.id[index] for index, _ in active],
            [mutation.input for _, mutation in active],  # type: ignore[union-attr]
            [mutation.presentation for _, mutation in active],  # type: ignore[union-attr]
            tolerance=tolerance,
            max_concurrency=max_concurrency,
        )
        judged = _judged(
            plan,
            [planned.property[index] for index, _ in active],
            [planned.row[index] for index, _ in active],
            decided,
            originals,
        )
        violating = [i for i, verdict in enumerate(judged) if verdict is not None and verdict[1]]
        for i, result in zip(violating, decided.results(violating), strict=True):
            found[active[i][0]] = (result, *judged[i])  # type: ignore[misc]
        still = set(violating)
        for i, (index, _) in enumerate(active):
            searches[index].feed(i in still)
    calls: Counter[str] = Counter()
    for index, search in searches.items():
        calls[planned.property[index]] += search.calls
        best = search.best
        if best is not None:
            result, comparison, violations = found[index]
            pairs[index]["reduced"] = reduced_doc(
                best.steps, best.input, best.presentation, result, comparison, violations,
                search.calls,
            )  # fmt: skip
    return calls


def _summaries(
    plan: PropertyPlan,
    planned: PlannedPairs,
    pairs: list[dict[str, Any]],
    skipped: list[dict[str, str]],
    compared: dict[str, Comparisons],
    n_cases: int,
) -> list[dict[str, Any]]:
    """``summarize_all`` from the run's columns: a property's pairs are contiguous in plan
    order, and its comparisons are those ``_judged`` computed."""
    skips = Counter(skip["property"] for skip in skipped)
    counts = Counter(planned.property)
    summaries = []
    start = 0
    for name, config in plan.enabled.items():  # the plan's property order
        count = counts[name]
        summaries.append(
            summarize_columns(
                name, config, compared.get(name), pairs[start : start + count], skips[name],
                n_cases,
            )
        )  # fmt: skip
        start += count
    return summaries


def run_properties(
    plan: PropertyPlan,
    loaded: LoadedContract,
    backend: Backend,
    results: CaseResults,
    *,
    max_concurrency: int | None = None,
) -> PropertyOutcome:
    """The ``properties`` section and property checks of a fuzz run whose golden results
    (the originals) are ``results``; ``max_concurrency`` parallel backend calls, by default
    the contract's ``evaluation.max_concurrency`` (as for the golden cases)."""
    concurrency = max_concurrency or loaded.contract.evaluation.max_concurrency
    # with the collector paused: a run builds hundreds of thousands of acyclic objects, and
    # every collection would walk all of them; the section they form is kept afterwards
    with gc_paused(settle=True):
        return _run_properties(plan, loaded, backend, results, concurrency)


def _run_properties(
    plan: PropertyPlan,
    loaded: LoadedContract,
    backend: Backend,
    results: CaseResults,
    max_concurrency: int,
) -> PropertyOutcome:
    contract = loaded.contract
    spec = contract.spec()
    tolerance = contract.evaluation.probability_tolerance
    paraphraser = None
    paraphrase = plan.enabled.get("paraphrase")
    if paraphrase is not None:
        paraphraser = create_paraphraser(paraphrase.source, base_dir=loaded.path.parent)  # type: ignore[union-attr]
    try:
        transforms = build_transforms(plan, spec, paraphraser)
        planned, skipped = generate_pairs(plan, transforms, results.case_ids, results.inputs)
    finally:
        if paraphraser is not None:
            paraphraser.close()
    decided_original = (results.selected >= 0).tolist()
    sent = [
        index
        for index, (error, row) in enumerate(zip(planned.error, planned.row, strict=True))
        if error is None and decided_original[row]
    ]
    if len(sent) == len(planned):  # the usual case: every pair is sent, in plan order
        ids, inputs, shown, sent_names, sent_rows = (
            planned.id, planned.input, planned.presentation, planned.property, planned.row
        )  # fmt: skip
    else:
        ids, inputs, shown, sent_names, sent_rows = (
            [column[i] for i in sent]
            for column in (planned.id, planned.input, planned.presentation, planned.property,
                           planned.row)
        )  # fmt: skip
    decided = decide_columns(
        backend, spec, ids, inputs, shown, tolerance=tolerance, max_concurrency=max_concurrency
    )
    compared: dict[str, Comparisons] = {}
    judged = _judged(plan, sent_names, sent_rows, decided, results, compared)
    pairs = _pair_docs(planned, results, decided, judged, sent)
    minimize_calls: Counter[str] = Counter()
    if plan.minimizes:
        minimize_calls = _minimize(
            plan, planned, pairs, transforms, results, backend,
            tolerance=tolerance, max_concurrency=max_concurrency,
        )  # fmt: skip
    names = list(plan.enabled)
    summaries = _summaries(plan, planned, pairs, skipped, compared, len(results))
    section = section_doc(plan.seed, plan.fuzz, plan.config, summaries, pairs, skipped)
    checks = property_checks(summaries, plan.config)
    sent_calls = Counter(sent_names)
    calls = {name: (sent_calls[name], minimize_calls[name]) for name in names}
    return PropertyOutcome(section, checks, properties_extension(summaries, calls))

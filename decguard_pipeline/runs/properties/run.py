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

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.properties.compare import judge
from decguard_pipeline.core.properties.minimize import GreedySearch
from decguard_pipeline.core.properties.pairs import (
    compare_with_originals,
    error_doc,
    pair_doc,
    reduced_doc,
    section_doc,
)
from decguard_pipeline.core.properties.summary import (
    ORIGINAL_ERROR,
    property_checks,
    summarize_all,
)
from decguard_pipeline.core.properties.transforms import Transform
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.runs.properties.execute import Decided, Example, decide_examples
from decguard_pipeline.runs.properties.extension import properties_extension
from decguard_pipeline.runs.properties.paraphrase import create_paraphraser
from decguard_pipeline.runs.properties.plan import (
    Planned,
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
    items: Sequence[tuple[str, int]],
    decided: Decided,
    originals: CaseResults,
) -> list[tuple[dict[str, Any], list[str]] | None]:
    """(comparison, violations) per decided example, None where the call errored.
    ``items`` are (property, dataset row) per example."""
    enabled = plan.enabled
    out: list[tuple[dict[str, Any], list[str]] | None] = [None] * len(items)
    groups: dict[str, list[int]] = {}
    for i, (name, _) in enumerate(items):
        if decided.ok(i):
            groups.setdefault(name, []).append(i)
    for name, indices in groups.items():
        rows = [items[i][1] for i in indices]
        records = compare_with_originals(
            enabled[name], originals, rows, decided.probs[indices]
        ).records()
        for i, comparison in zip(indices, records, strict=True):
            out[i] = (comparison, judge(enabled[name], comparison))
    return out


def _pair_docs(
    planned: Sequence[Planned],
    originals: CaseResults,
    decided: Decided,
    judged: list[tuple[dict[str, Any], list[str]] | None],
    sent_index: dict[int, int],
) -> list[dict[str, Any]]:
    pairs = []
    for index, item in enumerate(planned):
        mutation = item.mutation
        base: dict[str, Any] = {
            "property_name": item.property,
            "case_id": item.case_id,
            "sample": item.sample,
            "steps": mutation.steps if mutation else (),
            "provenance": mutation.provenance if mutation else {},
            "value": mutation.input if mutation else originals.inputs[item.row],
            "presentation": mutation.presentation if mutation else None,
        }
        if item.error is not None:
            pairs.append(pair_doc(**base, error=error_doc(*item.error)))
            continue
        if originals.selected[item.row] < 0:
            message = (
                f"the original case errored ({originals.error_kind[item.row]}), nothing to compare"
            )
            pairs.append(pair_doc(**base, error=error_doc(ORIGINAL_ERROR, message)))
            continue
        i = sent_index[index]
        verdict = judged[i]
        if verdict is None:
            pairs.append(pair_doc(**base, error=decided.error(i)))
            continue
        comparison, violations = verdict
        pairs.append(
            pair_doc(**base, result=decided.result(i), comparison=comparison, violations=violations)
        )
    return pairs


def _minimize(
    plan: PropertyPlan,
    planned: Sequence[Planned],
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
    for index, (item, pair) in enumerate(zip(planned, pairs, strict=True)):
        if pair["violations"] and plan.enabled[item.property].reducible:
            assert item.mutation is not None
            searches[index] = GreedySearch(
                transforms[item.property],
                originals.inputs[item.row],
                item.mutation.steps,
                plan.fuzz.max_minimize_calls,
            )
    found: dict[int, tuple[dict[str, Any], dict[str, Any], list[str]]] = {}
    while True:
        active = [(index, s.next()) for index, s in searches.items() if s.next() is not None]
        if not active:
            break
        examples = [
            Example(pairs[index]["id"], mutation.input, mutation.presentation)
            for index, mutation in active
            if mutation is not None
        ]
        decided = decide_examples(
            backend, originals.spec, examples, tolerance=tolerance, max_concurrency=max_concurrency
        )
        items = [(planned[index].property, planned[index].row) for index, _ in active]
        judged = _judged(plan, items, decided, originals)
        for i, (index, _) in enumerate(active):
            verdict = judged[i]
            violates = verdict is not None and bool(verdict[1])
            if violates:
                assert verdict is not None
                found[index] = (decided.result(i), *verdict)  # type: ignore[assignment]
            searches[index].feed(violates)
    calls: Counter[str] = Counter()
    for index, search in searches.items():
        calls[planned[index].property] += search.calls
        best = search.best
        if best is not None:
            result, comparison, violations = found[index]
            pairs[index]["reduced"] = reduced_doc(
                best.steps, best.input, best.presentation, result, comparison, violations,
                search.calls,
            )  # fmt: skip
    return calls


def run_properties(
    plan: PropertyPlan,
    loaded: LoadedContract,
    backend: Backend,
    results: CaseResults,
    *,
    max_concurrency: int,
) -> PropertyOutcome:
    """The ``properties`` section and property checks of a fuzz run whose golden results
    (the originals) are ``results``."""
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
    sent = [
        index
        for index, item in enumerate(planned)
        if item.error is None and results.selected[item.row] >= 0
    ]
    examples = [
        Example(planned[i].id, planned[i].mutation.input, planned[i].mutation.presentation)  # type: ignore[union-attr]
        for i in sent
    ]
    decided = decide_examples(
        backend, spec, examples, tolerance=tolerance, max_concurrency=max_concurrency
    )
    items = [(planned[i].property, planned[i].row) for i in sent]
    judged = _judged(plan, items, decided, results)
    pairs = _pair_docs(
        planned, results, decided, judged, {index: i for i, index in enumerate(sent)}
    )
    minimize_calls: Counter[str] = Counter()
    if plan.minimizes:
        minimize_calls = _minimize(
            plan, planned, pairs, transforms, results, backend,
            tolerance=tolerance, max_concurrency=max_concurrency,
        )  # fmt: skip
    names = list(plan.enabled)
    summaries = summarize_all(names, plan.enabled, pairs, skipped, len(results))
    section = section_doc(plan.seed, plan.fuzz, plan.config, summaries, pairs, skipped)
    checks = property_checks(summaries, plan.config)
    sent_calls = Counter(planned[i].property for i in sent)
    calls = {name: (sent_calls[name], minimize_calls[name]) for name in names}
    return PropertyOutcome(section, checks, properties_extension(summaries, calls))

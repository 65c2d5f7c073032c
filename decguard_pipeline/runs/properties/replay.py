"""Replay stored property failures against a backend (DecGuard §9.9, ``replay_version`` 0.1).

Each selected pair is re-sent exactly as stored (input and option presentation, request id =
pair id) together with its original case, and judged again. Independently, the
transformation is regenerated from the stored seed to show whether the failure can be
reproduced from the contract alone (not for paraphrases, whose providers need not be
deterministic: their stored text is what is replayed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from decguard_pipeline.backends import Backend, create_backend
from decguard_pipeline.core.contract import LoadedContract, load_contract
from decguard_pipeline.core.contract.properties import AnyProperty, Fuzz, Properties
from decguard_pipeline.core.errors import ContractError, ReportError
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.properties.compare import compare, direction_of, judge
from decguard_pipeline.core.properties.pairs import presentation_doc
from decguard_pipeline.core.properties.rng import case_stream
from decguard_pipeline.core.properties.summary import is_failed
from decguard_pipeline.core.properties.transforms import NotApplicable, make_transform
from decguard_pipeline.core.report.golden import now_iso
from decguard_pipeline.core.report.reevaluate import ensure_same_decision
from decguard_pipeline.core.report.verify import load_report
from decguard_pipeline.runs.properties.execute import Decided, Example, decide_examples

REPLAY_VERSION = "0.1"


def select_pairs(pairs: list[dict[str, Any]], ids: Sequence[str] | None) -> list[dict[str, Any]]:
    """The pairs named by ``ids`` (in that order), else every failed pair."""
    if not ids:
        return [pair for pair in pairs if is_failed(pair)]
    by_id = {pair["id"]: pair for pair in pairs}
    missing = [i for i in ids if i not in by_id]
    if missing:
        if pairs:
            raise ReportError(
                f"no transformed case {missing[0]!r} in the report; ids look like "
                f"'<property>/<case id>/<sample>', e.g. {pairs[0]['id']!r}"
            )
        raise ReportError(f"no transformed case {missing[0]!r}: the report has none")
    return [by_id[i] for i in ids]


def _as_presentation(stored: list[list[str]] | None) -> tuple[tuple[str, str], ...] | None:
    return None if stored is None else tuple((shown, label) for shown, label in stored)


def regenerated(
    pair: dict[str, Any],
    prop: AnyProperty,
    section: dict[str, Any],
    loaded: LoadedContract,
    original: Any,
) -> bool | None:
    """Does the stored seed regenerate exactly this pair's steps, input and presentation?"""
    if pair["property"] == "paraphrase":
        return None
    fuzz = Fuzz.model_validate(section["fuzz"])
    transform = make_transform(pair["property"], prop, loaded.contract.spec(), fuzz)
    stream = case_stream(section["seed"], pair["property"], pair["case_id"])
    try:
        mutations = transform.generate(pair["case_id"], original, stream)
    except NotApplicable:
        return False
    if pair["sample"] >= len(mutations):
        return False
    mutation = mutations[pair["sample"]]
    return (list(mutation.steps), mutation.input, presentation_doc(mutation.presentation)) == (
        pair["steps"],
        pair["input"],
        pair["presentation"],
    )


def _example_doc(
    kind: str,
    stored: dict[str, Any],
    stored_error: dict[str, str] | None,
    decided: Decided,
    i: int,
    original: int,
    prop: AnyProperty,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "kind": kind,
        "input": stored["input"],
        "presentation": stored["presentation"],
        "stored_violations": list(stored["violations"]),
        "stored_error": stored_error,
        "result": decided.result(i),
        "error": decided.error(i),
        "comparison": None,
        "violations": [],
        "reproduced": False,
    }
    if doc["error"] is not None:
        # an error reproduces a stored error of the same kind, nothing else
        doc["reproduced"] = (
            stored_error is not None and doc["error"]["kind"] == stored_error["kind"]
        )
        return doc
    if stored_error is None and decided.ok(original):
        spec = decided.spec
        comparison = compare(
            decided.probs[[original]],
            decided.probs[[i]],
            decided.selected[[original]],
            spec.labels,
            relation=prop.relation,
            direction=direction_of(prop),
            score=spec.type == "score",
        ).records()[0]
        doc["comparison"] = comparison
        doc["violations"] = judge(prop, comparison)
        doc["reproduced"] = bool(doc["violations"])
    return doc


def replay(
    report: str | Path,
    *,
    ids: Sequence[str] | None = None,
    contract: str | Path | None = None,
    backend: str | Backend | None = None,
) -> dict[str, Any]:
    """The replay document for the failed pairs of a stored ``fuzz``/``all`` report (or the
    pairs named by ``ids``). The contract and backend default to those the report records."""
    stored = load_report(report)
    doc = stored.document
    section = doc["properties"]
    if section is None:
        raise ReportError(f"{report}: a '{doc['mode']}' report has no property results to replay")
    loaded = load_contract(contract if contract is not None else doc["contract"]["path"])
    ensure_same_decision(doc, loaded)
    spec = loaded.contract.spec()
    evaluation = loaded.contract.evaluation
    selected = select_pairs(section["pairs"], ids)

    if isinstance(backend, Backend):
        instance, owned = backend, False
    else:
        name = backend or doc["backend"]["name"]
        try:
            config = loaded.contract.backend_config(name)
        except ContractError as exc:
            raise ContractError(f"{exc}; pass --backend to choose one") from exc
        instance, owned = create_backend(config, decision=spec, name=name), True

    results = stored.results
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    stored_config = Properties.model_validate(section["config"])
    enabled = loaded.contract.properties.enabled()
    examples: list[Example] = []
    for pair in selected:
        row = row_of[pair["case_id"]]
        examples.append(Example(pair["case_id"], results.inputs[row]))
        examples.append(Example(pair["id"], pair["input"], _as_presentation(pair["presentation"])))
        reduced = pair["reduced"]
        if reduced is not None:
            examples.append(
                Example(pair["id"], reduced["input"], _as_presentation(reduced["presentation"]))
            )
    try:
        decided = decide_examples(
            instance,
            spec,
            examples,
            tolerance=evaluation.probability_tolerance,
            max_concurrency=evaluation.max_concurrency,
        )
        metadata = instance.metadata()
    finally:
        if owned:
            instance.close()

    outcomes = []
    i = 0
    for pair in selected:
        prop = enabled.get(pair["property"]) or getattr(stored_config, pair["property"])
        original = i
        replayed = [
            _example_doc("transformed", pair, pair["error"], decided, original + 1, original, prop)
        ]
        i += 2
        if pair["reduced"] is not None:
            replayed.append(
                _example_doc("reduced", pair["reduced"], None, decided, i, original, prop)
            )
            i += 1
        row = row_of[pair["case_id"]]
        outcomes.append(
            {
                "id": pair["id"],
                "property": pair["property"],
                "case_id": pair["case_id"],
                "regenerated": regenerated(pair, prop, section, loaded, results.inputs[row]),
                "original": decided.result(original),
                "original_error": decided.error(original),
                "examples": replayed,
                "reproduced": any(example["reproduced"] for example in replayed),
            }
        )
    failed = any(outcome["reproduced"] for outcome in outcomes)
    return {
        "replay_version": REPLAY_VERSION,
        "decguard_version": PRODUCER_VERSION,
        "created_at": now_iso(),
        "source": str(report),
        "contract_path": str(loaded.path),
        "contract_hash": loaded.hash,
        "contract_changed": loaded.hash != doc["contract"]["hash"],
        "backend": metadata,
        "status": "fail" if failed else "pass",
        "exit_code": 1 if failed else 0,
        "outcomes": outcomes,
    }

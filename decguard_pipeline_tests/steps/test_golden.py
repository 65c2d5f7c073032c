"""The golden steps against a temporary warehouse and a real decguard.http/0.1 model on
loopback: how many cases are decided at once, which evaluation a report is built from, and
what score_target stores besides DecGuard's metrics (pipeline.statistics)."""

from __future__ import annotations

import json
from pathlib import Path

from decguard_pipeline.backends.mock import MockBackend
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.runs.golden import run_test
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.golden import (
    evaluate_target,
    golden_report,
    record_contract,
    record_dataset,
    score_target,
)
from decguard_pipeline.steps.verdict import decide_target
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.evaluations import evaluate

LABELS = ("spam", "ham")
TARGET = "default@loop"


def _contract(folder: Path, url: str, health: str, extra: str = "") -> Path:
    """A spam contract on 12 cases, half of them 'winner' mail, served by ``url``."""
    folder.mkdir(parents=True)
    cases = [
        {"id": f"c{i}", "input": f"winner {i}" if i % 2 else f"lunch {i}",
         "expected": "spam" if i % 2 else "ham"}
        for i in range(12)
    ]  # fmt: skip
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    path = folder / "decguard.yaml"
    path.write_text(
        'schema_version: "0.1"\n'
        "decision: {name: is_spam, type: noul, labels: [spam, ham]}\n"
        f"backend: {{provider: http, url: '{url}', health_url: '{health}'}}\n"
        "dataset: cases.jsonl\n"
        "evaluation: {max_concurrency: 3}\n" + extra
    )
    return path


HAM = {"spam": 0.1, "ham": 0.9}
NO_CACHE = "pipeline: {cache: {enabled: false}}\n"
WINNER_IS_SPAM = {
    "rules": [{"contains": "winner", "probabilities": {"spam": 0.95, "ham": 0.05}}],
    "default": HAM,
}


def _all_ham() -> MockBackend:
    config = BackendConfig.model_validate({"provider": "mock", "default": HAM})
    return MockBackend.from_config(config, name="loop", decision=DecisionSpec("x", "noul", LABELS))


def test_cases_are_decided_as_many_at_once_as_the_contract_says(tmp_path, loopback):
    server = loopback(WINNER_IS_SPAM, labels=LABELS, delay_ms=100)
    (entry,) = discover_contracts(str(_contract(tmp_path / "c", server.url, server.health_url)))
    evaluated = evaluate_target(entry, TARGET, Step(Warehouse(tmp_path / "wh"), "r1"))
    assert evaluated.run["n_cases"] == 12 and evaluated.run["n_errored"] == 0
    assert server.behaviour.max_in_flight == 3  # evaluation.max_concurrency


def test_the_report_is_built_from_the_named_run(tmp_path, loopback):
    """A step reads what its own run evaluated, else the newest evaluation that reached its
    verdict. (The model changes behind one version here, which the response cache rules out:
    it is off.)"""
    server = loopback(WINNER_IS_SPAM, labels=LABELS)
    path = _contract(tmp_path / "c", server.url, server.health_url, NO_CACHE)
    (entry,) = discover_contracts(str(path))
    wh = Warehouse(tmp_path / "wh")
    evaluate(entry, TARGET, wh, "r1")  # to its verdict
    server.behaviour.backend = _all_ham()  # the model changed: everything is ham now
    r2 = Step(wh, "r2")
    evaluate_target(entry, TARGET, r2)  # its runs row, then no verdict (yet)

    def accuracy(run_id: str | None, newest: str) -> float:
        golden = golden_report(entry, TARGET, wh, run_id=run_id)
        assert golden.evaluated.run["run_id"] == (run_id or newest)
        return golden.metrics["classification"]["accuracy"]

    assert (accuracy("r1", "r1"), accuracy("r2", "r1"), accuracy(None, "r1")) == (1.0, 0.5, 1.0)
    score_target(entry, TARGET, r2)
    decide_target(entry, TARGET, r2)
    assert accuracy(None, "r2") == 0.5  # r2 reached its verdict: now the newest
    stored = score_target(entry, TARGET, Step(wh, "r1"))  # a scoring run of its own: r1's
    assert stored.metrics["classification"]["accuracy"] == 1.0


def test_score_target_stores_the_intervals_the_cli_writes(tmp_path, loopback):
    """With pipeline.statistics: the intervals score_target returns and stores are the
    sidecar section `decguard-pipeline test` writes for the same answers."""
    server = loopback(WINNER_IS_SPAM, labels=LABELS)
    statistics = "pipeline:\n  statistics: {confidence: 0.9, bootstrap_resamples: 500, seed: 7}\n"
    path = _contract(tmp_path / "c", server.url, server.health_url, statistics)
    (entry,) = discover_contracts(str(path))
    wh = Warehouse(tmp_path / "wh")
    step = Step(wh, "r1")
    record_contract(entry, step)
    record_dataset(entry, step)
    evaluate_target(entry, TARGET, step)
    golden = score_target(entry, TARGET, step)

    cli = run_test(entry.require()).extensions["statistics"]
    assert golden.intervals == cli
    rows = wh.read_run("metric_intervals", entry.key, TARGET, "r1").to_pylist()
    assert {r["metric"]: (r["value"], r["low"], r["high"]) for r in rows} == {
        name: (i["value"], i["low"], i["high"]) for name, i in cli["intervals"].items()
    }
    assert {(r["confidence"], r["bootstrap_resamples"], r["seed"]) for r in rows} == {(0.9, 500, 7)}

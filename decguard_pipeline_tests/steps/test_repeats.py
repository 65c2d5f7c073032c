"""``pipeline.repeats`` in the pipeline's golden steps: the evaluation asks every case N times
(through the warehouse's response cache, on by default), stores the consistency section with
the run, and the scoring step writes its measures to ``metrics``; the report file's sidecar
has the section; a second evaluation of the same target asks nothing and measures the same."""

from __future__ import annotations

import json

from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.golden import (
    evaluate_target,
    record_contract,
    record_dataset,
    score_target,
    write_report,
)
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.canned_server import canned
from decguard_pipeline_tests.support.wavering import (
    Wavering,
    assert_matches,
    contract,
    expected_consistency,
)

TARGET = "default@w-1"


def test_the_golden_steps_ask_repeats_and_store_consistency(tmp_path):
    model = Wavering(seed=12)
    wh = Warehouse(tmp_path / "wh")
    with canned(model) as server:
        (entry,) = discover_contracts(str(contract(tmp_path / "c", server.url, n=16, count=3)))
        step = Step(wh, "r1")
        record_contract(entry, step)
        record_dataset(entry, step)
        evaluated = evaluate_target(entry, TARGET, step)
        assert sum(len(v) for v in model.sent.values()) == 3 * 16
        golden = score_target(entry, TARGET, step)
        path, _ = write_report(entry, TARGET, step)
        again = evaluate_target(entry, TARGET, Step(wh, "r2"))  # warm: asks nothing
        assert sum(len(v) for v in model.sent.values()) == 3 * 16

    section = json.loads(evaluated.run["consistency_json"])
    assert_matches(section, expected_consistency(model.sent))
    assert golden.consistency == section
    assert json.loads(again.run["consistency_json"]) == section
    stored = wh.read_run("metrics", entry.key, TARGET, "r1").to_pylist()
    rows = {r["metric"]: r["value"] for r in stored}
    assert rows["consistency_repeats"] == 3.0 and rows["consistency_cases_measured"] == 16.0
    for name in ("unanimous_share", "pairwise_agreement", "agreement_with_report",
                 "mean_tv_distance"):  # fmt: skip
        assert rows[f"consistency_{name}"] == section[name]
    assert rows["accuracy"] is not None  # DecGuard's metrics beside them
    sidecar = json.loads(path.with_name(path.stem + ".pipeline.json").read_text())
    assert sidecar["consistency"] == section
    # the report is the first ask's
    assert (
        json.loads(path.read_text())["results"][0]["result"]["probabilities"]
        == (model.sent["t000"][0])
    )

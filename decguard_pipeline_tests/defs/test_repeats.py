"""Repeats through Dagster: a target's job asks every golden case N times, and golden_metrics
shows the consistency measures as numbers and the text block, equal to what the loopback model
sent; ``evaluate``'s summary has the unanimous share."""

from __future__ import annotations

import warnings

import dagster as dg
import pytest

from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.partitions import targets_name
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline_tests.support.canned_server import canned
from decguard_pipeline_tests.support.evaluate_places import (
    MOCK,
    Place,
    summary_line,
    write_contract,
)
from decguard_pipeline_tests.support.wavering import Wavering, contract, expected_consistency

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
TARGET = "default@w-1"


def test_a_targets_job_measures_consistency(tmp_path):
    model = Wavering(seed=31)
    with canned(model) as server:
        contract(tmp_path / "contracts" / "wavering", server.url, n=12, count=3)
        (entry,) = discover_contracts(str(tmp_path / "contracts"))
        defs = build_definitions([entry], warehouse_root=str(tmp_path / "wh"))
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions(targets_name(entry.key), [TARGET])
        result = defs.resolve_job_def(job_name(entry)).execute_in_process(
            instance=instance, partition_key=TARGET, raise_on_error=False, run_config=QUIET
        )
    assert sum(len(v) for v in model.sent.values()) == 3 * 12
    done = {
        e.asset_key.path[-1]: e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    }
    meta = done["golden_metrics"].metadata
    expected = expected_consistency(model.sent)
    for name in ("unanimous_share", "pairwise_agreement", "agreement_with_report",
                 "mean_tv_distance"):  # fmt: skip
        assert meta[f"consistency/{name}"].value == pytest.approx(expected[name], abs=1e-12)
    assert "Consistency  3 asks per case · 12 of 12 cases measured" in meta["consistency"].value


def test_evaluate_summary_shows_the_unanimous_share(tmp_path, monkeypatch, ours):
    place = Place(tmp_path).use(monkeypatch)
    path = write_contract(place.contracts / "tiny", MOCK)
    path.write_text(path.read_text() + "pipeline:\n  repeats: {count: 3}\n")
    ran = ours("evaluate", "--contracts", place.contracts)
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    header = ran.stdout.splitlines()[0].split()
    assert header[:7] == ["verdict", "contract", "target", "accuracy", "ECE", "coverage",
                          "unanimous"]  # fmt: skip
    assert summary_line(ran.stdout, "default@tiny-v1").split()[6] == "1.000"  # the mock

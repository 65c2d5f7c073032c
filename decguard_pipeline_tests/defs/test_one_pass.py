"""An evaluation is computed once per target run (issue 29, item 1): the parts of a target's
run hand each other the evaluation, its DecGuard report and the backend in memory
(``steps/base.TargetRun``). A real run of an example (mock backends, an embedded warehouse)
through Dagster, with the real functions wrapped at the test level to count: backends built,
health checks, report builds (``steps.golden.build_report``: the target's DecGuard report)
and reads of ``case_results`` from the warehouse. A part materialised alone in a later run
reads the evaluation back once."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

import decguard_pipeline.runs.golden as runs_golden
import decguard_pipeline.steps.golden as steps_golden
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.evaluations import execute_target


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts of the real calls: ``backend`` (constructions), ``health`` (health checks of
    those backends), ``report`` (target report builds), ``case_results`` (warehouse reads)."""
    counts: Counter[str] = Counter()
    create, build = runs_golden.create_backend, steps_golden.build_report

    def create_backend(*args: Any, **kwargs: Any) -> Any:
        counts["backend"] += 1
        backend = create(*args, **kwargs)
        healthcheck = backend.healthcheck

        def counted_healthcheck() -> dict[str, str]:
            counts["health"] += 1
            return healthcheck()

        backend.healthcheck = counted_healthcheck  # this instance only
        return backend

    def build_report(*args: Any, **kwargs: Any) -> Any:
        counts["report"] += 1
        return build(*args, **kwargs)

    for name in ("read_run", "read_latest"):
        read = getattr(Warehouse, name)

        def reading(self: Warehouse, table: str, *args: Any, _read: Any = read, **kw: Any) -> Any:
            counts[table] += 1
            return _read(self, table, *args, **kw)

        monkeypatch.setattr(Warehouse, name, reading)
    monkeypatch.setattr(runs_golden, "create_backend", create_backend)
    monkeypatch.setattr(steps_golden, "build_report", build_report)
    return counts


def _contracts(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "contracts" / name
    shutil.copytree(EXAMPLES / name, folder)
    return folder


def _once(counted: Counter[str], **expected: int) -> None:
    assert {k: counted[k] for k in expected} == expected
    counted.clear()


@pytest.mark.parametrize(
    ("name", "target", "parts"),
    [
        # golden, properties (the same backend asks the transformed cases), diff, verdict
        ("refund", "default@refund-mock-v1", "property_results"),
        # golden, the guard's other suites through the same backend, diff, verdict
        ("injection", "default@injection-guard-mock-v1", "guard_metrics"),
    ],
)
def test_a_target_run_computes_its_evaluation_once(tmp_path, counted, name, target, parts):
    folder = _contracts(tmp_path, name)
    instance = dg.DagsterInstance.ephemeral()
    result = execute_target(folder, target, tmp_path / "wh", instance=instance)
    assert result.success
    done = {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}
    assert {"case_results", "golden_metrics", "report", "regression_diff", parts} <= done
    _once(counted, backend=1, health=1, report=1, case_results=0)

    # one asset again, alone, in a later run: it reads the evaluation back, once, and asks
    # no model
    for alone in ("golden_metrics", "report", "verdict"):
        key = dg.AssetKey([name, alone])
        again = execute_target(folder, target, tmp_path / "wh", instance=instance,
                               selection=[key])  # fmt: skip
        assert again.success
        assert [e.asset_key for e in again.get_asset_materialization_events()] == [key]
        _once(counted, backend=0, health=0, case_results=1, report=0 if alone == "verdict" else 1)


def test_golden_metrics_and_report_alone_share_one_read_and_one_build(tmp_path, counted):
    folder = _contracts(tmp_path, "refund")
    target, instance = "default@refund-mock-v1", dg.DagsterInstance.ephemeral()
    assert execute_target(folder, target, tmp_path / "wh", instance=instance).success
    counted.clear()
    subset = [dg.AssetKey(["refund", part]) for part in ("golden_metrics", "report", "verdict")]
    again = execute_target(folder, target, tmp_path / "wh", instance=instance, selection=subset)
    assert again.success
    _once(counted, backend=0, health=0, report=1, case_results=1)

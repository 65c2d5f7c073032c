"""Stored reports with a properties section, shared by the tests of its fast and typed
loading."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline_tests.conftest import EXAMPLES, _invoke
from decguard_pipeline_tests.support.fuzz_scenarios import write_scenario


def _run(*args: Any) -> None:
    from decguard_pipeline.cli import cli

    ran = _invoke(cli, [str(a) for a in args], "decguard-pipeline")
    assert ran.exit_code in (0, 1), ran.stderr


@pytest.fixture(scope="session")
def reports(tmp_path_factory) -> dict[str, Path]:
    """Stored fuzz/all reports (ours) covering every property, decision type, reduced
    examples, violations, flips and skips."""
    root = tmp_path_factory.mktemp("fast")
    paths = {}
    refund = EXAMPLES / "refund" / "decguard.yaml"
    paths["refund"] = root / "refund.json"
    _run("fuzz", refund, "-b", "order_sensitive", "-o", paths["refund"])
    for name in ("choice", "noul", "score", "wide"):
        contract = write_scenario(root, name)
        paths[name] = root / f"{name}.json"
        _run("test", contract, "--all", "-o", paths[name])
    return paths

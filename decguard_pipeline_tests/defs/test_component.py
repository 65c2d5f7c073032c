"""``decguard_pipeline.DecisionContract``, the Dagster component type: registered for ``dg``,
building what this project's own code location builds for a contract, and, in a fresh Dagster
project of someone else (slow), scaffolded with ``dg``, checked with ``dg check defs`` and
materialised with ``dg launch``."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import dagster as dg
import pytest
import yaml

import decguard_pipeline
from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.component import DecisionContract
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline_tests.conftest import EXAMPLES

warnings.filterwarnings("ignore", category=dg.PreviewWarning)


def _keys(defs: dg.Definitions, group: str) -> set[str]:
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    return {k for k in keys if k.startswith(f"{group}/")}


def test_the_component_type_is_registered_for_dg():
    (point,) = [
        p
        for p in importlib.metadata.entry_points(group="dagster_dg_cli.registry_modules")
        if p.name == "decguard_pipeline"
    ]
    module = point.load()
    assert module is decguard_pipeline
    assert "DecisionContract" in dir(module)  # how Dagster's registry lists a module's types
    assert module.DecisionContract is DecisionContract


def test_a_component_builds_what_the_code_location_builds_for_its_contract(tmp_path):
    path = EXAMPLES / "refund" / "decguard.yaml"
    alone = dg.component_defs(component=DecisionContract(contract=str(path)))
    dg.Definitions.validate_loadable(alone)
    location = build_definitions(discover_contracts(str(EXAMPLES)), warehouse_root="")
    assert _keys(alone, "refund") == _keys(location, "refund")
    assert "report" in {k.split("/")[1] for k in _keys(alone, "refund")}
    assert alone.resolve_job_def("evaluate_refund") is not None
    # its own sensor; the code location has one over every contract instead
    assert alone.resolve_sensor_def("model_versions_refund") is not None
    assert {s.name for s in location.sensors} == {"model_versions", "dead_runs"}


def test_a_contract_path_is_relative_to_the_defs_yaml_folder(tmp_path):
    shutil.copytree(EXAMPLES / "spam", tmp_path / "spam")
    component = DecisionContract.resolve_from_yaml("contract: decguard.yaml\n")
    assert component.contract_path(tmp_path / "spam") == tmp_path / "spam" / "decguard.yaml"
    assert DecisionContract(contract="/abs/decguard.yaml").contract_path(tmp_path) == Path(
        "/abs/decguard.yaml"
    )


# -- a fresh Dagster project that adds the refund contract ------------------------------------

PYPROJECT = """\
[project]
name = "refund-team"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["decguard-pipeline"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "refund_team"
"""
# the definitions module of a project made by `create-dagster project`
DEFINITIONS = """\
from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
"""
# what the project's sensor does on its first tick: record the contract's targets, add them as
# partitions (the daemon applies these requests; here the script does)
TICK = """\
import warnings

import dagster as dg

from refund_team.definitions import defs as lazy

warnings.filterwarnings("ignore")
defs = lazy() if callable(lazy) else lazy
sensor = defs.resolve_sensor_def("model_versions_refund")
with dg.DagsterInstance.get() as instance:
    context = dg.build_sensor_context(
        instance=instance, definitions=defs, resources=dict(defs.resources)
    )
    result = sensor(context)
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
    print("targets:", " ".join(sorted(r.partition_key for r in result.run_requests)))
"""


def fresh_project(root: Path) -> None:
    """The layout ``create-dagster project refund-team`` writes (that tool is a package of its
    own, not installed here: the test makes nothing new to install)."""
    package = root / "src" / "refund_team"
    (package / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text("")
    (package / "definitions.py").write_text(DEFINITIONS)
    (package / "defs" / "__init__.py").write_text("")


@pytest.mark.slow
def test_a_fresh_dagster_project_adds_the_refund_contract(tmp_path: Path):
    project = tmp_path / "refund-team"
    fresh_project(project)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    venv = Path(sys.executable).parent
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER", "DECGUARD"))},
        # this interpreter's environment is the project's (nothing installed from a network)
        "VIRTUAL_ENV": str(venv.parent),
        "PATH": f"{venv}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(project / "src"),
        "DAGSTER_HOME": str(home),
        "DECGUARD_WAREHOUSE": str(tmp_path / "warehouse"),
    }

    def run(*args: str) -> str:
        done = subprocess.run(
            args, cwd=project, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout + done.stderr

    run("dg", "scaffold", "defs", "decguard_pipeline.DecisionContract", "refund")
    folder = project / "src" / "refund_team" / "defs" / "refund"
    scaffolded = yaml.safe_load((folder / "defs.yaml").read_text())
    assert scaffolded["type"] == "decguard_pipeline.DecisionContract"
    for name in ("decguard.yaml", "cases.jsonl"):
        shutil.copy(EXAMPLES / "refund" / name, folder / name)
    (folder / "defs.yaml").write_text(
        textwrap.dedent(
            """\
            type: decguard_pipeline.DecisionContract

            attributes:
              contract: decguard.yaml
            """
        )
    )
    assert "All definitions loaded successfully" in run("dg", "check", "defs")

    (project / "tick.py").write_text(TICK)
    said = run(sys.executable, "tick.py").splitlines()
    targets = next(line for line in said if line.startswith("targets:")).split()[1:]
    assert targets == [
        "default@refund-mock-v1", "order_sensitive@refund-mock-v2", "strong_model@refund-strong-v1"
    ]  # fmt: skip
    run("dg", "launch", "--job", "evaluate_refund", "--partition", "default@refund-mock-v1")

    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run_,) = instance.get_runs(filters=dg.RunsFilter(job_name="evaluate_refund"))
        assert run_.status == dg.DagsterRunStatus.SUCCESS
        assert run_.tags["decguard/verdict"] == "PASS"
        for asset in ("case_results", "golden_metrics", "report", "verdict"):
            done = instance.get_materialized_partitions(dg.AssetKey(["refund", asset]))
            assert done == {"default@refund-mock-v1"}, asset

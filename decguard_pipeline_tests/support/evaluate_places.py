"""A throwaway project for `decguard-pipeline evaluate` in a child process: its own contracts
folder, DAGSTER_HOME and warehouse (the main job's reliability, parallel-run and PostgreSQL
tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES, ROOT

DAYS = ("2026-11-08", "2026-11-09")  # the healthy day passes, the drifting day fails its gates
CASES = EXAMPLES / "refund" / "cases.jsonl"
MOCK = """\
  provider: mock
  model: tiny-v1
  rules:
    - contains: damaged
      probabilities: {refund: 0.96, reject: 0.01, review: 0.03}
    - contains: never arrived
      probabilities: {refund: 0.90, reject: 0.02, review: 0.08}
  default: {refund: 0.20, reject: 0.15, review: 0.65}
"""
# the same model behind a loopback decguard.http/0.1 server
SERVED = {
    "rules": [
        {"contains": "damaged", "probabilities": {"refund": 0.96, "reject": 0.01, "review": 0.03}},
        {"contains": "never arrived",
         "probabilities": {"refund": 0.90, "reject": 0.02, "review": 0.08}},
    ],
    "default": {"refund": 0.20, "reject": 0.15, "review": 0.65},
}  # fmt: skip
LABELS = ("refund", "reject", "review")
VIEWS = "SELECT view_name FROM duckdb_views() WHERE NOT internal"


def http(url: str) -> str:
    return f"  provider: http\n  model: tiny-v1\n  url: {url}\n  timeout_s: 20\n"


def write_contract(folder: Path, backend: str, *, ids: Callable[[int], str] | None = None) -> Path:
    """A refund contract on the first four golden cases (case ids renamed by ``ids``)."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    lines = CASES.read_text().splitlines()[:4]
    cases = []
    for i, line in enumerate(lines):
        case = json.loads(line)
        if ids is not None:
            case["id"] = ids(i)
        cases.append(json.dumps(case))
    (folder / "cases.jsonl").write_text("\n".join(cases) + "\n")
    path = folder / "decguard.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            schema_version: "0.1"
            decision:
              name: refund_request
              type: choice
              options: [refund, reject, review]
            dataset: cases.jsonl
            requirements:
              min_accuracy: 0.5
            production:
              requirements:
                min_accuracy: 0.9
            backend:
            """
        )
        + backend
    )
    return path


class Place:
    """A temporary instance, warehouse, contracts folder and production folder."""

    def __init__(self, tmp: Path, *, days: bool = False) -> None:
        self.home = tmp / "home"
        self.wh = Warehouse(tmp / "wh")
        self.contracts = tmp / "contracts"
        self.production = tmp / "production"
        (self.production / "tiny").mkdir(parents=True)
        if days:
            for day in DAYS:
                source = ROOT / "data" / "production" / "refund" / f"{day}.jsonl"
                shutil.copy(source, self.production / "tiny" / f"{day}.jsonl")

    def env(self) -> dict[str, str]:
        return {
            "DAGSTER_HOME": str(self.home),
            "DECGUARD_WAREHOUSE": str(self.wh.root),
            "DECGUARD_PRODUCTION": str(self.production),
            "DECGUARD_CONTRACTS": str(self.contracts),
        }

    def use(self, monkeypatch: pytest.MonkeyPatch) -> Place:
        for name, value in self.env().items():
            monkeypatch.setenv(name, value)
        return self

    def spawn(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """``evaluate`` in a child process (``env``: more variables for it)."""
        return subprocess.Popen(
            [sys.executable, "-m", "decguard_pipeline", "evaluate", *args],
            env={**os.environ, **self.env(), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def runs(self) -> list[dg.DagsterRun]:
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            return list(instance.get_runs())

    def query_every_view(self) -> dict[str, int]:
        """``count(*)`` of every view of the catalog, opened read-only as an analyst would."""
        with self.wh.read_only() as con:
            views = [
                r[0]
                for r in con.execute(
                    "SELECT view_name FROM duckdb_views() WHERE NOT internal "
                    "AND database_name = 'lake'"
                ).fetchall()
            ]
            return {v: con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] for v in views}


def finish(process: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def unfinished(runs: list[dg.DagsterRun]) -> list[str]:
    stuck = {dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING}
    return [f"{r.run_id} {r.status}" for r in runs if r.status in stuck]


def summary_line(stdout: str, key: str) -> str:
    return next(line for line in stdout.splitlines() if key in line)


# -- item 12: no contracts ---------------------------------------------------------------------

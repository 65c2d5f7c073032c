"""The response cache in the pipeline (issue 13): on by default in the warehouse, so an
``evaluate`` on an unchanged model version asks nothing, a new version asks everything, and a
contract can turn it off (``pipeline.cache.enabled: false``)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.counting_server import counting_server
from decguard_pipeline_tests.support.fuzz_scenarios import normalised

N = 40


def write_contract(folder: Path, server, *, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "cases.jsonl").open("w") as handle:
        for i in range(N):
            label = "urgent" if i % 3 else "routine"
            handle.write(json.dumps({"id": f"c{i}", "input": f"ticket {i}", "expected": label}))
            handle.write("\n")
    path = folder / "decguard.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            schema_version: "0.1"
            decision: {{name: is_urgent, type: choice, options: [urgent, routine]}}
            backend:
              provider: http
              model: urgent-model
              url: {server.url}
              health_url: {server.health_url}
            dataset: cases.jsonl
            properties:
              option_order: {{samples: 1, max_tv_distance: 0.5}}
            """
        )
        + extra
    )
    return path


def reports(wh: Warehouse, target: str) -> list[Path]:
    folder = wh.files_dir("tiny", target)
    return sorted(p for p in folder.glob("*.json") if p.name.count(".") == 1)


@pytest.mark.slow
def test_evaluate_asks_only_what_an_unchanged_model_was_not_asked(tmp_path, monkeypatch, ours):
    wh = Warehouse(tmp_path / "wh")
    for name, value in {
        "DAGSTER_HOME": tmp_path / "home",
        "DECGUARD_WAREHOUSE": wh.root,
        "DECGUARD_CONTRACTS": tmp_path / "contracts",
        "DECGUARD_PRODUCTION": tmp_path / "production",
    }.items():
        monkeypatch.setenv(name, str(value))
    with counting_server() as server:
        contract = write_contract(tmp_path / "contracts" / "tiny", server)
        first = ours("evaluate")
        assert first.exit_code == 0, first.stdout + first.stderr
        assert server.state.total == 2 * N  # the golden cases and one option_order pair each

        server.state.reset()
        second = ours("evaluate")
        assert second.exit_code == 0, second.stderr
        assert server.state.total == 0
        one, two = reports(wh, "default@model-v1")[-2:]
        assert normalised(json.loads(two.read_text())) == normalised(json.loads(one.read_text()))

        server.state.version = "model-v2"
        server.state.reset()
        assert ours("evaluate").exit_code == 0
        assert server.state.total == 2 * N  # a new version: its own target, asked anew
        assert len(reports(wh, "default@model-v2")) == 1

        write_contract(contract.parent, server, extra="pipeline:\n  cache: {enabled: false}\n")
        server.state.reset()
        assert ours("evaluate").exit_code == 0
        assert server.state.total == 2 * N  # the contract turned the cache off
    counts = wh.query(
        "SELECT target, count(*) AS n, count(DISTINCT key) AS keys FROM responses "
        "WHERE contract = 'tiny' GROUP BY target ORDER BY target"
    ).to_pylist()
    assert counts == [
        {"target": "default@model-v1", "n": 2 * N, "keys": 2 * N},
        {"target": "default@model-v2", "n": 2 * N, "keys": 2 * N},
    ]


@pytest.mark.slow
def test_evaluate_says_what_was_asked_and_whether_the_backend_answered(tmp_path, monkeypatch, ours):
    """A backend now failing every case: the evaluation replays its stored answers and
    passes, and its summary row says that nothing was asked (issue 26)."""
    wh = Warehouse(tmp_path / "wh")
    for name, value in {
        "DAGSTER_HOME": tmp_path / "home",
        "DECGUARD_WAREHOUSE": wh.root,
        "DECGUARD_CONTRACTS": tmp_path / "contracts",
        "DECGUARD_PRODUCTION": tmp_path / "production",
    }.items():
        monkeypatch.setenv(name, str(value))
    with counting_server() as server:
        write_contract(tmp_path / "contracts" / "tiny", server)
        first = ours("evaluate")
        assert first.exit_code == 0, first.stdout + first.stderr
        header = first.stdout.splitlines()[0].split()
        assert "answers" in header  # the column that says what was asked
        row = next(x for x in first.stdout.splitlines() if "default@model-v1" in x)
        assert f"0 cached · {N} asked, all answered" in row

        server.state.fail = {f"c{i}" for i in range(N)}  # every golden case: HTTP 503
        server.state.reset()
        second = ours("evaluate")
        assert second.exit_code == 0, second.stdout + second.stderr
        assert server.state.total == 0
        row = next(x for x in second.stdout.splitlines() if "default@model-v1" in x)
        assert f"{N} cached · backend not asked" in row
    (run,) = wh.query("SELECT cache_json FROM latest_runs WHERE contract = 'tiny'").to_pylist()
    section = json.loads(run["cache_json"])
    assert (section["answers_from_cache"], section["asked"], section["backend"]) == (
        N, 0, "not asked",
    )  # fmt: skip

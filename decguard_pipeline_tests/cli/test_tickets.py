"""The tickets example (data/contracts/tickets): four language-model deciders on the bundled
demo server, which the commands start and stop themselves; the calibrated one is the best
calibrated, and its dataset is what make_cases.py writes."""

from __future__ import annotations

import json
import os
import runpy
import shutil
from typing import Any

import httpx
import pytest

from decguard_pipeline.demo.autostart import DEMO_URL_VARIABLE
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.evaluate_places import Place, summary_line

TICKETS = EXAMPLES / "tickets"
BACKENDS = ("default", "structured", "sampled", "jev")


@pytest.fixture(autouse=True)
def _no_demo_given(monkeypatch):
    monkeypatch.delenv(DEMO_URL_VARIABLE, raising=False)


def test_the_dataset_is_what_the_generator_writes():
    made = runpy.run_path(str(TICKETS / "make_cases.py"))["make_cases"]()
    committed = [json.loads(line) for line in (TICKETS / "cases.jsonl").read_text().splitlines()]
    assert made == committed
    assert len(committed) == 300
    assert {c["metadata"]["difficulty"] for c in committed} == {"clear", "ambiguous"}
    assert {c["expected"] for c in committed} == {"billing", "technical", "sales"}


@pytest.fixture
def started(monkeypatch) -> list[str]:
    """The addresses of the demo servers the commands start (reports and the warehouse show
    them redacted: they are the value of a declared ``url_env`` variable)."""
    from contextlib import contextmanager

    from decguard_pipeline.demo import autostart

    urls: list[str] = []
    serving = autostart._serving

    @contextmanager
    def watched(own_process: bool) -> Any:
        with serving(own_process) as url:
            urls.append(url)
            yield url

    monkeypatch.setattr(autostart, "_serving", watched)
    return urls


def test_test_starts_the_demo_server_and_writes_the_usage(tmp_path, ours, started):
    out = tmp_path / "calibrated.json"
    ran = ours("test", TICKETS / "decguard.yaml", "-o", out)
    assert ran.exit_code == 0, ran.stderr
    report = json.loads(out.read_text())
    assert report["backend"]["model_version"] == "tickets-calibrated-2026-01-15"
    assert report["metrics"]["counts"]["errored"] == 0
    assert report["metrics"]["calibration"]["ece"] < 0.05  # calibrated by construction
    usage = json.loads((tmp_path / "calibrated.pipeline.json").read_text())["usage"]
    assert usage["cases_with_usage"] == 300 and usage["completion_tokens"] == 300
    # its address is the value of a declared url_env variable: redacted like a key
    assert report["backend"]["details"]["url"] == "[REDACTED]/v1"
    # the server was this command's: gone with it
    (url,) = started
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/v1/models")


@pytest.mark.slow
def test_evaluate_shows_four_calibrations_and_their_costs(tmp_path, monkeypatch, ours, started):
    place = Place(tmp_path).use(monkeypatch)
    shutil.copytree(TICKETS, place.contracts / "tickets")
    ran = ours("evaluate")
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    header = ran.stdout.splitlines()[0].split()
    assert header[:7] == ["verdict", "contract", "target", "accuracy", "ECE", "coverage",
                          "cost/1k"]  # fmt: skip
    rows = {}
    for backend in BACKENDS:
        cells = summary_line(ran.stdout, f"tickets   {backend}@").split()
        rows[backend] = {"ece": float(cells[4]), "coverage": float(cells[5]), "cost": cells[6]}
    assert [summary_line(ran.stdout, f"{b}@").split()[2] for b in BACKENDS] == [
        "default@tickets-calibrated-2026-01-15",
        "structured@tickets-onehot-2026-01-15",
        "sampled@tickets-overconfident-2026-01-15",
        "jev@tickets-underconfident-2026-01-15",
    ]
    calibrated = rows["default"]["ece"]
    assert calibrated < 0.05
    assert all(rows[b]["ece"] > calibrated + 0.1 for b in BACKENDS[1:])
    # at the 0.8 threshold the one-hot decider acts on every ticket, the hedging one on none
    assert (rows["structured"]["coverage"], rows["jev"]["coverage"]) == (1.0, 0.0)
    assert rows["jev"]["cost"] == "-"  # open-jev reports no tokens and has no pricing
    sampled, default = float(rows["sampled"]["cost"]), float(rows["default"]["cost"])
    assert sampled > default  # ten sampled answers a case cost ten completion tokens

    # the warehouse has them too, the server's address redacted (the value of a declared
    # url_env variable); the demo server is gone and the variable unset
    costs = place.wh.query(
        "SELECT target, cost_per_1000, backend_details_json FROM latest_runs "
        "WHERE contract = 'tickets' ORDER BY target"
    ).to_pylist()
    assert [r["cost_per_1000"] is None for r in costs] == [False, True, False, False]
    assert json.loads(costs[0]["backend_details_json"])["url"] == "[REDACTED]/v1"
    (url,) = started
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/v1/models")
    assert DEMO_URL_VARIABLE not in os.environ


def test_the_cache_finds_the_demo_servers_answers_on_its_next_port(
    tmp_path, ours, monkeypatch, started
):
    """Each command starts the demo server on another free port; the response cache keys it by
    what it is, so the next command replays its answers. A server the variable names is
    keyed by its address: another server, other answers."""
    from decguard_pipeline.demo.llm_server import serve_demo

    folder = tmp_path / "tickets"
    folder.mkdir()
    shutil.copy(TICKETS / "decguard.yaml", folder / "decguard.yaml")
    lines = (TICKETS / "cases.jsonl").read_text().splitlines()[:30]
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n")
    cache = tmp_path / "cache"
    stats = []
    for name in ("a", "b"):  # two commands, each with its own demo server on a free port
        report = tmp_path / f"{name}.json"
        ran = ours("test", folder / "decguard.yaml", "--cache", cache, "-o", report)
        assert ran.exit_code == 0, ran.stderr
        # the address comes from a declared url_env variable: reports name it redacted
        assert json.loads(report.read_text())["backend"]["details"]["url"] == "[REDACTED]/v1"
        stats.append(json.loads((tmp_path / f"{name}.pipeline.json").read_text())["cache"])
    assert started[0] != started[1]  # two ports
    # three asks of each case (pipeline.repeats), then the version probe only
    assert (stats[0]["asked"], stats[1]["asked"]) == (90, 1)
    assert stats[1]["answers_from_cache"] == 89
    with serve_demo() as other:
        monkeypatch.setenv(DEMO_URL_VARIABLE, other.url)
        ran = ours("test", folder / "decguard.yaml", "--cache", cache, "-o", tmp_path / "c.json")
        assert ran.exit_code == 0, ran.stderr
    assert json.loads((tmp_path / "c.pipeline.json").read_text())["cache"]["asked"] == 90

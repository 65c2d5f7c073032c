"""The response cache for every kind of backend (issue 13): a report made from cached answers
has the backend section a clean run has (served models, upstream providers), a synchronous
plugin runs through it like a built-in, a backend the cache cannot identify is refused, and
``cache stats`` / ``cache prune`` show and drop what is kept."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.decision import DecisionRequest, Prediction
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.runs.cache import CacheOptions, attach_cache
from decguard_pipeline.runs.golden import run_test
from decguard_pipeline_tests.support.canned_server import canned
from decguard_pipeline_tests.support.fuzz_scenarios import normalised


def write_cases(folder: Path, n: int) -> None:
    with (folder / "cases.jsonl").open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"c{i}", "input": f"parcel {i}"}) + "\n")


def test_systemone_provenance_of_replayed_answers_is_a_clean_runs(tmp_path):
    """The backend section names the served models and upstream providers of every answer,
    replayed ones included."""

    def reply(body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        n = int(body["state"].split()[-1])
        return 200, {
            "model": f"typesafe/jev-{n % 2}",
            "provider": f"upstream-{n % 3}",
            "answers": {"team": {"type": "choice", "choice": "billing",
                                 "probabilities": {"billing": 0.8, "shipping": 0.2}}},
        }, {}  # fmt: skip

    with canned(reply, "/v1/systemone") as server:
        (tmp_path / "c.yaml").write_text(
            'schema_version: "0.1"\ndecision: {name: team, type: choice, options: '
            "[billing, shipping], description: Route the ticket}\nbackend:\n  provider: systemone\n"
            "  model: typesafe/jev\n"
            f"  url: {server.url}\ndataset: cases.jsonl\n"
        )
        write_cases(tmp_path, 12)
        cache = tmp_path / "cache"
        clean = run_test(tmp_path / "c.yaml", check_health_first=False)
        asked = len(server.bodies)
        cached = run_test(tmp_path / "c.yaml", check_health_first=False,
                          cache=CacheOptions(cache, "c"))  # fmt: skip
        replayed = run_test(tmp_path / "c.yaml", check_health_first=False,
                            cache=CacheOptions(cache, "c"))  # fmt: skip
        assert len(server.bodies) == 2 * asked + 1  # clean, cold, then the probe only
    details = clean.document["backend"]["details"]
    assert details["served_models"] == ["typesafe/jev-0", "typesafe/jev-1"]
    assert details["upstream_providers"] == ["upstream-0", "upstream-1", "upstream-2"]
    for report in (cached, replayed):
        assert report.document["backend"] == clean.document["backend"]
        assert normalised(report.full()) == normalised(clean.full())


class Counting(Backend):
    """A synchronous plugin (threads, no ``apredict``) without settings of its own."""

    provider = "counting"

    def __init__(self, name: str = "default") -> None:
        super().__init__(name=name, model="count-1")
        self.calls = 0
        self.lock = threading.Lock()

    def predict(self, request: DecisionRequest) -> Prediction:
        with self.lock:
            self.calls += 1
        p = (len(str(request.input)) % 7) / 10 + 0.2
        return Prediction(dict(zip(request.decision.labels, (p, 1 - p), strict=True)),
                          None, "count-1-2026")  # fmt: skip


def test_a_plugin_is_cached_with_the_contracts_settings_for_it(tmp_path):
    (tmp_path / "c.yaml").write_text(
        'schema_version: "0.1"\ndecision: {name: team, type: choice, options: [a, b]}\n'
        "backend: {provider: mock}\ndataset: cases.jsonl\n"
    )
    write_cases(tmp_path, 20)
    loaded = load_contract(tmp_path / "c.yaml")
    runs = []
    for _ in range(2):
        backend = Counting()
        options = CacheOptions(tmp_path / "cache", "c")
        attach_cache(backend, loaded, options)
        report = run_test(loaded, backend=backend, check_health_first=False)
        runs.append((backend.calls, options.stats.section(), report))
    (first_calls, first, clean), (calls, second, again) = runs
    assert first_calls == 20 and first["stored"] == 20
    assert calls == 1 and second["answers_from_cache"] == 19  # the probe, then the cache
    assert second["model_version"] == "count-1-2026"
    assert normalised(again.full()) == normalised(clean.full())
    # a backend that is none of the contract's and has no settings cannot be identified
    with pytest.raises(ContractError, match="cannot identify backend 'stranger'"):
        attach_cache(Counting("stranger"), loaded, CacheOptions(tmp_path / "cache", "c"))


def test_cache_stats_and_prune_on_the_command_line(tmp_path, ours, monkeypatch):
    monkeypatch.delenv("DECGUARD_CACHE", raising=False)
    (tmp_path / "refund").mkdir()
    contract = tmp_path / "refund" / "decguard.yaml"
    contract.write_text(
        'schema_version: "0.1"\ndecision: {name: r, type: choice, options: [yes_, no_]}\n'
        "backend: {provider: mock, model_version: mock-7}\ndataset: cases.jsonl\n"
    )
    write_cases(tmp_path / "refund", 8)
    cache = tmp_path / "cache"
    assert ours("test", contract, "--cache", cache).exit_code == 0
    ran = ours("cache", "stats", "--cache", cache)
    assert ran.exit_code == 0
    assert "refund / default@mock-7: 8 answers (8 rows) · " in ran.stdout
    stats = json.loads(ours("cache", "stats", "--cache", cache, "-f", "json").stdout)
    (row,) = stats["partitions"]
    assert (row["contract"], row["target"], row["distinct_keys"]) == ("refund", "default@mock-7", 8)
    kept = ours("cache", "prune", "--cache", cache, "--older-than", "30")
    assert kept.exit_code == 0 and "0 rows dropped, 8 kept" in kept.stdout
    dropped = ours("cache", "prune", "--cache", cache, "--older-than", "0")
    assert "8 rows dropped, 0 kept" in dropped.stdout
    after = json.loads(ours("cache", "stats", "--cache", cache, "-f", "json").stdout)
    assert after["partitions"] == []  # no answer and no journal left
    assert ours("cache", "prune", "--cache", cache).exit_code == 2  # --older-than is required


def test_answers_are_stored_on_time_while_the_server_stalls(tmp_path):
    """Answers received are published every ``publish_every_s`` even when no more arrive (a
    stalled server): a run killed then keeps them on an object store, which has no journal
    (here a local folder with a short interval; only committed answers are counted)."""
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline_tests.cli.test_cache import http_contract
    from decguard_pipeline_tests.support.counting_server import counting_server

    n, held = 60, 25
    with counting_server() as server:
        contract = http_contract(tmp_path / "urgent", server, n, concurrency=4)
        server.state.hold_after = held
        options = CacheOptions(tmp_path / "cache", "urgent", publish_every_s=0.2)
        cache = Warehouse(tmp_path / "cache")
        done: dict[str, Any] = {}

        def run() -> None:
            done["report"] = run_test(contract, cache=options)

        worker = threading.Thread(target=run)
        worker.start()
        try:
            deadline = time.monotonic() + 60
            stored = 0
            while stored < held:
                assert time.monotonic() < deadline, f"{stored} of {held} answers stored"
                time.sleep(0.05)
                found = cache.query("SELECT count(*) AS n FROM responses")  # committed
                stored = found["n"][0].as_py()
            assert stored == held and worker.is_alive()  # stored while the run waits
        finally:
            server.state.hold_after = None
            worker.join(60)
    assert done["report"].results.ok.all()
    assert options.stats.stored == n

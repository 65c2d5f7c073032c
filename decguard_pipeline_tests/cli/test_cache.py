"""The response cache on the command line (issue 13): ``--cache DIR``, ``--no-cache`` and
``--retry-errors REPORT`` on ``test``, ``fuzz`` and ``test --all``, against loopback models
that count what they are asked. A report made from cached answers equals a clean run's but for
latencies and ``created_at``, and the reference ``decguard report`` verifies it."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline.core.secrets import forget_secrets
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.counting_server import counting_server
from decguard_pipeline_tests.support.fuzz_scenarios import normalised
from decguard_pipeline_tests.support.llm_servers import chat_answer, llm_server

REFUND = EXAMPLES / "refund" / "decguard.yaml"


def http_contract(
    folder: Path, server: Any, n: int, *, retries: int = 0, extra: str = "", concurrency: int = 8
) -> Path:
    """An urgent/routine contract of ``n`` cases on the counting server."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    with (folder / "cases.jsonl").open("w") as handle:
        for i in range(n):
            case = {"id": f"case-{i:05d}", "input": f"ticket {i}: {rng.random():.6f}",
                    "expected": rng.choice(["urgent", "routine"])}  # fmt: skip
            handle.write(json.dumps(case) + "\n")
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
              max_retries: {retries}
              timeout_s: 30
            {extra}
            dataset: cases.jsonl
            evaluation: {{max_concurrency: {concurrency}}}
            """
        )
    )
    return path


def document(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def sidecar(report: Path) -> dict[str, Any]:
    return json.loads(report.with_name(report.stem + ".pipeline.json").read_text())


def errored(doc: dict[str, Any]) -> set[str]:
    return {r["case_id"] for r in doc["results"] if r["error"] is not None}


# -- off by default -------------------------------------------------------------------------------


def test_without_flags_nothing_is_cached_and_nothing_is_added(tmp_path, ours, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DECGUARD_CACHE", raising=False)
    ran = ours("test", REFUND, "-o", tmp_path / "r.json")
    assert ran.exit_code == 0
    assert "Cache" not in ran.stdout
    assert not (tmp_path / "r.pipeline.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    # $DECGUARD_CACHE turns it on; --no-cache off again
    monkeypatch.setenv("DECGUARD_CACHE", str(tmp_path / "env-cache"))
    assert ours("test", REFUND, "--no-cache", "-o", tmp_path / "n.json").exit_code == 0
    assert not (tmp_path / "env-cache").exists()
    ran = ours("test", REFUND, "-o", tmp_path / "e.json")
    assert "Cache        0 from cache · 11 asked · 11 stored" in ran.stdout
    assert sidecar(tmp_path / "e.json")["cache"]["stored"] == 11


# -- a report from cached answers is a clean run's report -----------------------------------------


def test_all_checks_from_the_cache_equal_a_clean_run_and_verify(tmp_path, ours, ref):
    """Golden cases, property pairs and minimisation searches all come back from the cache."""
    cache = tmp_path / "cache"
    args = ["test", REFUND, "--all", "-b", "order_sensitive", "--cache", cache]
    first = ours(*args, "-o", tmp_path / "first.json")
    second = ours(*args, "-o", tmp_path / "second.json")
    clean = ours("test", REFUND, "--all", "-b", "order_sensitive", "-o", tmp_path / "clean.json")
    assert first.exit_code == second.exit_code == clean.exit_code == 1  # option order fails
    one, two = document(tmp_path / "first.json"), document(tmp_path / "second.json")
    assert any(p["reduced"] for p in two["properties"]["pairs"])  # minimisation ran
    assert normalised(two) == normalised(one) == normalised(document(tmp_path / "clean.json"))
    stats = sidecar(tmp_path / "second.json")["cache"]
    # the mock reports no version: one case is asked to learn it, every other answer is reused
    assert stats["asked"] == 1 and stats["answers_from_cache"] > 100
    assert stats["model_version"] == "" and stats["version_source"] == "probe"
    assert sidecar(tmp_path / "first.json")["cache"]["answers_from_cache"] == 0
    assert ref("report", tmp_path / "second.json").exit_code == 1  # verifies; status fail


# -- (a) retry only what failed -------------------------------------------------------------------


def test_retry_errors_asks_exactly_the_errored_cases(tmp_path, ours, ref):
    with counting_server() as server:
        contract = http_contract(tmp_path / "urgent", server, 2000, concurrency=16)
        rng = random.Random(11)
        failing = {f"case-{i:05d}" for i in rng.sample(range(2000), 200)}
        server.state.fail = set(failing)
        first = ours("test", contract, "-o", tmp_path / "first.json")
        assert first.exit_code in (0, 1), first.stderr
        assert errored(document(tmp_path / "first.json")) == failing
        assert "unavailable 200" in first.stdout

        server.state.fail.clear()
        server.state.reset()
        retried = ours(
            "test", contract, "--retry-errors", tmp_path / "first.json", "-o", tmp_path / "r.json"
        )
        assert retried.exit_code in (0, 1), retried.stderr
        assert set(server.state.received) == failing  # exactly the errored cases...
        assert set(server.state.received.values()) == {1}  # ... once each
        again = document(tmp_path / "r.json")
        assert errored(again) == set()

        server.state.reset()
        clean = ours("test", contract, "-o", tmp_path / "clean.json")
        assert server.state.total == 2000
    assert normalised(again) == normalised(document(tmp_path / "clean.json"))
    stats = sidecar(tmp_path / "r.json")["cache"]
    assert (stats["answers_from_report"], stats["asked"], stats["answers_from_cache"]) == (
        1800,
        200,
        0,
    )
    assert f"1,800 from {tmp_path / 'first.json'} · 200 asked" in retried.stdout
    assert retried.exit_code == clean.exit_code
    assert ref("report", tmp_path / "r.json").exit_code in (0, 1)


def test_retry_errors_refuses_a_report_of_other_cases_or_another_backend(tmp_path, ours):
    ours("test", REFUND, "-o", tmp_path / "r.json")
    other = tmp_path / "other.jsonl"
    lines = (REFUND.parent / "cases.jsonl").read_text().splitlines()
    other.write_text("\n".join(lines[:-1]) + "\n")
    ran = ours("test", REFUND, "-d", other, "--retry-errors", tmp_path / "r.json")
    assert ran.exit_code == 2 and ran.stdout == ""
    assert ran.stderr.startswith(
        f"error: --retry-errors {tmp_path / 'r.json'}: the report's dataset"
    )
    assert "is not this run's dataset" in ran.stderr and "Traceback" not in ran.stderr
    ran = ours("test", REFUND, "-b", "strong_model", "--retry-errors", tmp_path / "r.json")
    assert ran.exit_code == 2
    assert "the report's backend is 'default' (mock)" in ran.stderr
    (tmp_path / "broken.json").write_text("{}")
    ran = ours("test", REFUND, "--retry-errors", tmp_path / "broken.json")
    assert ran.exit_code == 2 and "not a DecGuard 0.1 report" in ran.stderr


# -- model versions -------------------------------------------------------------------------------


def test_a_new_model_version_never_reuses_another_versions_answers(tmp_path, ours):
    with counting_server() as server:
        contract = http_contract(tmp_path / "urgent", server, 30)
        cache = tmp_path / "cache"
        ours("test", contract, "--cache", cache, "-o", tmp_path / "v1.json")
        assert server.state.total == 30
        server.state.reset()
        ours("test", contract, "--cache", cache)
        assert server.state.total == 0  # health says the version: nothing to ask
        server.state.version = "model-v2"
        server.state.reset()
        ours("test", contract, "--cache", cache, "-o", tmp_path / "v2.json")
        assert server.state.total == 30
    v1, v2 = document(tmp_path / "v1.json"), document(tmp_path / "v2.json")
    assert {r["result"]["model_version"] for r in v2["results"]} == {"model-v2"}
    assert (
        v1["results"][0]["result"]["probabilities"] != v2["results"][0]["result"]["probabilities"]
    )
    found = Warehouse(cache).query(
        "SELECT DISTINCT target FROM responses WHERE contract = 'urgent'"
    )
    targets = sorted(f"target={t}" for t in found.column("target").to_pylist())
    assert targets == ["target=default@model-v1", "target=default@model-v2"]


def test_the_command_line_keeps_answers_under_the_pipelines_target_key(tmp_path, ours):
    """One rule names a target (core/target_key.py): a version with characters unsafe in a
    key (``/``, ``:``) gets the same partition from ``test --cache`` as from the pipeline's
    evaluation, and two such versions stay apart."""
    from decguard_pipeline.steps.targets import target_key

    with counting_server() as server:
        contract = http_contract(tmp_path / "urgent", server, 5)
        cache = tmp_path / "cache"
        for version in ("org/model:v1", "org-model-v1"):
            server.state.version = version
            assert ours("test", contract, "--cache", cache).exit_code in (0, 1)
    stored = Warehouse(cache).query(
        "SELECT DISTINCT target FROM responses WHERE contract = 'urgent' ORDER BY target"
    )
    targets = stored.column("target").to_pylist()
    expected = [target_key("default", v) for v in ("org-model-v1", "org/model:v1")]
    assert targets == sorted(expected)
    assert len(set(targets)) == 2


def logprob_handler(model: dict[str, str]):
    """Chat answers whose letter log-probabilities depend on the prompt, with usage."""

    def handle(seen):
        text = seen.body["messages"][-1]["content"]
        a = -0.1 - (sum(map(ord, text)) % 17) / 10
        return 200, chat_answer("A", model=model["name"], top_logprobs=[("A", a), ("B", -1.5)],
                                usage=(40, 1)), {}  # fmt: skip

    return handle


def openai_contract(folder: Path, url: str, n: int, **settings: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "cases.jsonl").open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"t{i}", "input": f"ticket number {i}"}) + "\n")
    backend = {"provider": "openai", "model": "gpt-test", "base_url": url, **settings}
    (folder / "decguard.yaml").write_text(
        json.dumps(
            {
                "schema_version": "0.1",
                "decision": {"name": "route", "type": "choice", "options": ["billing", "tech"]},
                "backend": backend,
                "dataset": "cases.jsonl",
            }
        )
    )
    return folder / "decguard.yaml"


def test_without_a_version_hint_the_first_answer_names_the_version(tmp_path, ours):
    """An OpenAI-compatible server says its snapshot only in answers: the first case is asked
    alone, its ``model`` is the version; a new snapshot behind the alias asks everything."""
    model = {"name": "gpt-test-2026-01-01"}
    with llm_server(logprob_handler(model)) as server:
        contract = openai_contract(
            tmp_path / "route", server.url, 20,
            pricing={"input_per_million": 2.0, "output_per_million": 8.0},
        )  # fmt: skip
        cache = tmp_path / "cache"
        ours("test", contract, "--cache", cache, "-o", tmp_path / "a.json")
        assert len(server.posts()) == 20
        ran = ours("test", contract, "--cache", cache, "-o", tmp_path / "b.json")
        assert len(server.posts()) == 21  # the probe only
        stats = sidecar(tmp_path / "b.json")["cache"]
        assert (stats["asked"], stats["answers_from_cache"]) == (1, 19)
        assert stats["model_version"] == "gpt-test-2026-01-01"
        saved = stats["saved"]
        assert (saved["prompt_tokens"], saved["completion_tokens"]) == (19 * 40, 19)
        assert saved["cost"] == pytest.approx((19 * 40 * 2.0 + 19 * 8.0) / 1e6)
        assert "saved 19 requests · 779 tokens · cost 0.0017" in ran.stdout
        assert normalised(document(tmp_path / "b.json")) == normalised(
            document(tmp_path / "a.json")
        )
        model["name"] = "gpt-test-2026-02-01"
        ours("test", contract, "--cache", cache, "-o", tmp_path / "c.json")
        assert len(server.posts()) == 41
        assert sidecar(tmp_path / "c.json")["cache"]["answers_from_cache"] == 0
        assert document(tmp_path / "c.json")["backend"]["model_version"] == "gpt-test-2026-02-01"


def test_sample_scoring_is_cached_per_sample_index(tmp_path):
    from decguard_pipeline.runs.cache import CacheOptions
    from decguard_pipeline.runs.golden import run_test

    rng = random.Random(3)

    def sampled(seen):
        n = seen.body.get("n", 1)
        return 200, chat_answer(*(rng.choice("AB") for _ in range(n)), usage=(30, n)), {}

    with llm_server(sampled) as server:
        contract = openai_contract(
            tmp_path / "route", server.url, 10, scoring="sample", samples=5, n_supported=True
        )

        def run(sample: int) -> dict[str, Any]:
            options = CacheOptions(tmp_path / "cache", "route", sample=sample)
            report = run_test(contract, cache=options, check_health_first=False)
            return options.stats.section() | {"probs": report.results.probs.tolist()}

        first = run(0)
        assert first["asked"] == 10 and len(server.posts()) == 10
        again = run(0)  # draw 0 again: the same answers
        assert again["asked"] == 1 and len(server.posts()) == 11  # the version probe
        assert again["probs"][1:] == first["probs"][1:]
        other = run(1)  # another draw: asked anew
        assert other["asked"] == 10 and other["answers_from_cache"] == 0
        assert run(1)["answers_from_cache"] == 9


# -- nothing secret is stored ---------------------------------------------------------------------


def test_no_secret_reaches_the_cache(tmp_path, ours, monkeypatch):
    token = "tok-9f8e7d6c5b4a-secret"
    monkeypatch.setenv("CACHE_TEST_TOKEN", token)

    def echoing(seen):
        auth = seen.headers.get("Authorization", "")
        answer = chat_answer("A", model=f"gpt-{auth}", top_logprobs=[("A", -0.2), ("B", -1.9)])
        return 200, answer, {}

    try:
        with llm_server(echoing) as server:
            contract = openai_contract(
                tmp_path / "route", server.url, 5, api_key_env="CACHE_TEST_TOKEN",
                headers={"X-Trace": "on"},
            )  # fmt: skip
            cache = tmp_path / "cache"
            ran = ours("test", contract, "--cache", cache, "-o", tmp_path / "r.json")
            assert ran.exit_code in (0, 1), ran.stderr
            assert all(s.headers["Authorization"] == f"Bearer {token}" for s in server.posts())
        files = [p for p in cache.rglob("*") if p.is_file()]
        assert files
        for path in files:  # the catalog, its data files, journals
            assert token.encode() not in path.read_bytes(), path
        rows = (
            Warehouse(cache).query("SELECT * FROM responses WHERE contract = 'route'").to_pylist()
        )
        assert len(rows) == 5
        assert token not in json.dumps(rows, default=str)
        assert {row["model_version"] for row in rows} == {"gpt-Bearer [REDACTED]"}
        assert "CACHE_TEST_TOKEN" not in json.dumps(rows, default=str)  # keys are digests
    finally:
        forget_secrets()


# -- (b) kill -9 and resume -----------------------------------------------------------------------


@pytest.mark.slow
def test_a_killed_cached_run_resumes_asking_only_what_it_was_not_told(tmp_path, ref):
    n, concurrency = 20_000, 16
    with counting_server(delay_ms=2) as server:
        contract = http_contract(tmp_path / "urgent", server, n, concurrency=concurrency)
        cache = tmp_path / "cache"
        command = [sys.executable, "-m", "decguard_pipeline", "test", str(contract),
                   "--cache", str(cache), "-o", str(tmp_path / "resumed.json")]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "DECGUARD_CACHE"}
        first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 300
        while server.state.answered < n // 2 and first.poll() is None:
            assert time.monotonic() < deadline, "the first run made no progress"
            time.sleep(0.005)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
        time.sleep(0.2)  # answers the server was still sending
        answered = server.state.answered
        assert n // 4 < answered < n  # killed mid-run
        server.state.reset()
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert second.returncode in (0, 1), second.stderr
        asked = server.state.total
        assert asked <= n - answered + concurrency
        assert asked >= n - answered  # nothing not answered was taken from anywhere
        server.state.reset()
        clean = subprocess.run(
            [sys.executable, "-m", "decguard_pipeline", "test", str(contract),
             "-o", str(tmp_path / "clean.json")],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert clean.returncode == second.returncode
    resumed = document(tmp_path / "resumed.json")
    assert errored(resumed) == set()
    assert normalised(resumed) == normalised(document(tmp_path / "clean.json"))
    assert ref("report", tmp_path / "resumed.json").exit_code in (0, 1)
    stats = sidecar(tmp_path / "resumed.json")["cache"]
    assert stats["answers_from_cache"] + stats["asked"] == n
    assert stats["answers_from_cache"] >= answered - concurrency


# -- --retry-errors checks every setting that keys the cache (issue 26) ---------------------------


def test_retry_errors_refuses_a_report_answered_with_other_settings(tmp_path, ours):
    """Model, base_url, prompt, temperature: each is part of the key, so a report answered
    with another value is refused before anything is asked, naming the setting (never its
    value); a change that keys nothing (a gate, a timeout) is not."""
    down = {"on": True}

    def handle(seen):
        if down["on"] and "ticket number 3" in seen.body["messages"][-1]["content"]:
            return 503, {"error": "busy"}, {}
        return 200, chat_answer("A", model="gpt-test", top_logprobs=[("A", -0.2), ("B", -1.9)]), {}

    with llm_server(handle) as server, llm_server(handle) as other:
        folder = tmp_path / "route"
        contract = openai_contract(folder, server.url, 6, max_retries=0)
        original = json.loads(contract.read_text())
        first = ours("test", contract, "-o", tmp_path / "first.json")
        assert first.exit_code in (0, 1), first.stderr
        assert errored(document(tmp_path / "first.json")) == {"t3"}
        down["on"] = False

        def retry(**changes: Any):
            doc = json.loads(json.dumps(original))
            for name, value in changes.items():
                if name == "requirements":
                    doc[name] = value
                else:
                    doc["backend"][name] = value
            contract.write_text(json.dumps(doc))
            before = len(server.posts()) + len(other.posts())
            ran = ours("test", contract, "--retry-errors", tmp_path / "first.json")
            return ran, len(server.posts()) + len(other.posts()) - before

        variants = {
            "model": {"model": "gpt-other"},
            "settings.base_url": {"base_url": other.url},
            "settings.prompt": {"prompt": "Route this: {input}\n{options}\nAnswer with a letter."},
            "settings.temperature": {"temperature": 0.7},
            "model, settings.temperature": {"model": "gpt-other", "temperature": 0.2},
        }
        for differ, changes in variants.items():
            ran, asked = retry(**changes)
            assert ran.exit_code == 2 and ran.stdout == "" and asked == 0, (differ, ran.stderr)
            assert ran.stderr == (
                f"error: --retry-errors {tmp_path / 'first.json'}: the report was answered "
                f"with another {differ} than this run's backend; retrying errors needs the "
                "answers of the same backend settings: run without --retry-errors\n"
            )
            assert other.url not in ran.stderr and "gpt-other" not in ran.stderr
        # what keys no answer may change: a gate, a timeout
        ran, asked = retry(requirements={"min_accuracy": 0.1}, timeout_s=5)
        assert ran.exit_code in (0, 1), ran.stderr
        assert asked == 1  # the errored case, and only it

        # a report without the record (written by DecGuard, or before it was kept): the
        # contract must be the very one it names
        (tmp_path / "first.pipeline.json").unlink()
        ran, asked = retry(model="gpt-other")
        assert ran.exit_code == 2 and asked == 0
        assert "the report does not record the settings it was answered with" in ran.stderr
        assert "its contract (sha256:" in ran.stderr
        ran, asked = retry()
        assert ran.exit_code in (0, 1) and asked == 1, ran.stderr


# -- the summary says what was asked (issue 26) ---------------------------------------------------


def test_a_run_of_stored_answers_says_the_backend_was_not_asked(tmp_path, ours):
    """A backend now failing every case: its stored answers still make a report, and the
    summary says that nothing was asked; with some cases new, that none of them was
    answered."""
    with counting_server() as server:
        contract = http_contract(tmp_path / "urgent", server, 30)
        lines = (contract.parent / "cases.jsonl").read_text().splitlines()
        (tmp_path / "first20.jsonl").write_text("\n".join(lines[:20]) + "\n")
        cache = tmp_path / "cache"
        ran = ours("test", contract, "--cache", cache, "-d", tmp_path / "first20.jsonl")
        assert "backend reached: 20 of 20 requests answered" in ran.stdout
        server.state.fail = {f"case-{i:05d}" for i in range(30)}
        server.state.reset()
        ran = ours("test", contract, "--cache", cache, "-d", tmp_path / "first20.jsonl",
                   "-o", tmp_path / "r.json")  # fmt: skip
        assert ran.exit_code in (0, 1), ran.stderr
        assert server.state.total == 0
        assert (
            "  Cache        20 from cache · 0 asked · 0 stored\n"
            "               backend not asked: every answer is a stored one (its state now is "
            "unknown)\n"
        ) in ran.stdout
        stats = sidecar(tmp_path / "r.json")["cache"]
        assert (stats["asked"], stats["answered"], stats["backend"]) == (0, 0, "not asked")
        ran = ours("test", contract, "--cache", cache, "-o", tmp_path / "all.json")
        assert ran.exit_code in (0, 1), ran.stderr  # 20 decided, 10 errored
        assert server.state.total == 10
        assert "20 from cache · 10 asked · 0 stored" in ran.stdout
        assert "backend failed: none of 10 requests answered" in ran.stdout
        stats = sidecar(tmp_path / "all.json")["cache"]
        assert (stats["asked"], stats["answered"], stats["backend"]) == (10, 0, "failed")


# -- a cache that cannot be written, or is damaged (issue 26) -------------------------------------


def _limit_file_size(limit: int):
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
def test_a_cache_write_failure_is_said_once_and_the_run_goes_on(tmp_path):
    """A file system that refuses the cache's writes (here: a file size limit, the way a
    full disk refuses them, with the operating system's own error): one warning naming the
    file and the error, every case still asked once, and the report made."""
    n = 300
    with counting_server() as server:
        contract = http_contract(tmp_path / "urgent", server, n)
        cache = tmp_path / "cache"
        cache.mkdir()
        command = [sys.executable, "-m", "decguard_pipeline", "test", str(contract),
                   "--cache", str(cache)]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "DECGUARD_CACHE"}
        ran = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300,
                             preexec_fn=_limit_file_size(16_000))  # fmt: skip
        assert ran.returncode in (0, 1), ran.stderr
        assert server.state.total == n and set(server.state.received.values()) == {1}
        warnings = [line for line in ran.stderr.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1, ran.stderr
        found = re.fullmatch(
            r"warning: the response cache cannot write (\S+): File too large; this run goes "
            r"on without storing its answers",
            warnings[0],
        )
        assert found, warnings
        assert Path(found.group(1)).is_relative_to(cache)
        assert "Traceback" not in ran.stderr
        assert f"Cases        {n} total · {n} decided · 0 errored" in ran.stdout
        assert f"               {warnings[0]}" in ran.stdout  # in the cache block too

        # what was written before the failure is whole, and the next run uses it
        server.state.reset()
        again = subprocess.run([*command, "-o", str(tmp_path / "again.json")], env=env,
                               capture_output=True, text=True, timeout=300)  # fmt: skip
        assert again.returncode in (0, 1), again.stderr
        assert "warning" not in again.stderr
        stats = sidecar(tmp_path / "again.json")["cache"]
        assert stats["answers_from_cache"] > 0
        assert stats["asked"] == server.state.total == n - stats["answers_from_cache"]


JOURNAL_WRITER = """
import json, os, signal, sys
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.responses import ResponseTable
root, target, rows = sys.argv[1], sys.argv[2], json.load(sys.stdin)
table = ResponseTable(Warehouse(root), contract="urgent", target=target, run_id="killed",
                      backend="default", provider="http", version="model-v1",
                      publish_every_s=3600)
for row in rows:
    table.journal(row)
os.kill(os.getpid(), signal.SIGKILL)  # a writer killed before it published anything
"""


def test_a_garbage_journal_line_is_named_and_heals(tmp_path, ours):
    """A journal line that is no answer: named (the journal and its line), left out, its
    answer asked again, and the next run finds nothing wrong."""
    with counting_server() as server:
        contract = http_contract(tmp_path / "urgent", server, 40)
        cache = tmp_path / "cache"
        args = ["test", contract, "--cache", cache]
        half = tmp_path / "half.jsonl"
        lines = (contract.parent / "cases.jsonl").read_text().splitlines()
        half.write_text("\n".join(lines[:20]) + "\n")
        assert ours(*args, "-d", half).exit_code in (0, 1)
        folder = cache / "journals" / "responses" / "contract=urgent" / "target=default@model-v1"
        wh = Warehouse(cache)

        # a dead run's journal of the 20 other cases, one of its lines garbage
        published = wh.query("SELECT * FROM responses ORDER BY case_id").to_pylist()
        assert {r["case_id"] for r in published} == {f"case-{i:05d}" for i in range(20)}
        rows = [
            {"key": row["key"].hex(), "case_id": row["case_id"], "labels": row["labels"],
             "probabilities": row["probabilities"], "model": row["model"],
             "model_version": row["model_version"], "latency_ms": row["latency_ms"],
             "prompt_tokens": None, "completion_tokens": None, "metadata": {},
             "answered_at": time.time()}
            for row in published
        ]  # fmt: skip
        with wh.direct() as con:  # their answers only in the journal now
            con.execute("DELETE FROM responses")
        child = subprocess.run([sys.executable, "-c", JOURNAL_WRITER, str(cache),
                                "default@model-v1"], input=json.dumps(rows), text=True,
                               capture_output=True, timeout=60)  # fmt: skip
        assert child.returncode == -signal.SIGKILL, child.stderr
        (journal,) = folder.glob(".journal-*.jsonl")
        text = journal.read_bytes().split(b"\n")
        assert len(text) == 22 and text[-1] == b""  # header, 20 answers
        text[5] = b'{"key": "\x00\xff garbage'  # line 6: the 5th answer's
        journal.write_bytes(b"\n".join(text))

        server.state.reset()
        ran = ours(*args, "-d", half)
        assert ran.exit_code in (0, 1), ran.stderr
        assert ran.stderr.count("warning:") == 1
        assert (
            f"warning: the response cache's journal {journal} line 6 is not an answer (not "
            "JSON): skipped; its answer is asked again"
        ) in ran.stderr
        assert dict(server.state.received) == {rows[4]["case_id"]: 1}
        assert not journal.exists()  # published without the line, then deleted

        server.state.reset()
        ran = ours(*args)  # healed: every earlier answer found, only the 20 new cases asked
        assert ran.exit_code in (0, 1) and "warning" not in ran.stderr, ran.stderr
        assert server.state.total == 20
        assert sorted(server.state.received) == [f"case-{i:05d}" for i in range(20, 40)]

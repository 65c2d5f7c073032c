"""Fault injection, answers that lie: a language-model server on loopback reporting token
usage that cannot be real (2^63, 10^12, negative, fractional, text), and what it does to
pacing, the report, the warehouse and the response cache, old caches that hold such values
included. Every run must end, with the impossible counts unknown (null) everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from decguard_pipeline.backends import create_backend
from decguard_pipeline.backends.ratelimit import Pacer
from decguard_pipeline.backends.runner import Cases, run_cases
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.usage import MAX_TOKENS, run_cost
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.llm_servers import Seen, chat_answer, llm_server

SPEC = DecisionSpec("q", "choice", ("yes", "no"))
LETTERS = [("A", -0.2), ("B", -1.8)]
GUARD_S = 180  # reached only by a run that never ends
BIN = Path(sys.executable).parent
INT64_MIN = -(2**63)
# what a server may say as usage -> what the case's tokens must be (None: unknown)
USAGES: dict[str, tuple[Any, Any]] = {
    "fine": (12, 3),
    "int64-overflow": (2**63, 1),
    "int64-max": (2**63 - 1, 1),
    "trillion": (10**12, 1),
    "just-too-many": (MAX_TOKENS + 1, 1),
    "most": (MAX_TOKENS, 0),
    "negative": (-5, 1),
    "fraction": (1.5, 1),
    "whole-float": (12.0, 1),  # JSON 12.0 is not an integer count
    "text": ("12", 1),
    "bool": (True, 1),
    "completion-overflow": (3, 2**63),
}
KNOWN = {"fine": (12, 3), "most": (MAX_TOKENS, 0)}


def usage_answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
    """A chat answer whose usage is the case's (the case name is the prompt's input)."""
    case = seen.body["messages"][0]["content"].split("<")[1].split(">")[0]
    prompt, completion = USAGES.get(case, (12, 3))
    answer = chat_answer("A", top_logprobs=LETTERS, usage=None)
    answer["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion}
    return 200, answer, {}


def openai(url: str, **settings: Any) -> Any:
    config = BackendConfig.model_validate(
        {
            "provider": "openai",
            "model": "m",
            "base_url": f"{url}/v1",
            "retry_backoff_s": 0,
            "prompt": "<{input}> {options}",
            **settings,
        }
    )
    return create_backend(config, decision=SPEC)


def run(backend: Any, inputs: list[str], concurrency: int = 4) -> Any:
    cases = Cases(list(inputs), inputs, [None] * len(inputs), [{} for _ in inputs])
    return run_cases(backend, SPEC, cases, max_concurrency=concurrency, tolerance=1e-3)


def guarded(call: Callable[[], Any]) -> Any:
    """``call()`` in a thread; fails the test (instead of hanging it) if it never ends."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    thread.start()
    thread.join(GUARD_S)
    assert outcome, f"still running after {GUARD_S} s"
    return outcome[0]


def write_contract(folder: Path, url: str, **settings: Any) -> Path:
    backend = {
        "provider": "openai",
        "model": "m",
        "base_url": f"{url}/v1",
        "max_retries": 0,
        "prompt": "<{input}> {options}",
        **settings,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cases.jsonl").write_text(
        "".join(json.dumps({"id": c, "input": c, "expected": "yes"}) + "\n" for c in USAGES)
    )
    path = folder / "decguard.yaml"
    path.write_text(
        'schema_version: "0.1"\n'
        'decision: {name: q, type: choice, options: ["yes", "no"]}\n'
        f"backend: {json.dumps(backend)}\n"
        "dataset: cases.jsonl\n"
    )
    return path


def tokens_of(results: Any) -> dict[str, tuple[int, int] | None]:
    out: dict[str, tuple[int, int] | None] = {}
    for case, prompt, completion in zip(
        results.case_ids, results.prompt_tokens, results.completion_tokens, strict=True
    ):
        out[case] = None if np.isnan(prompt) else (int(prompt), int(completion))
    return out


# -- usage that cannot be real ---------------------------------------------------------------------


def test_usage_that_cannot_be_real_is_unknown_in_results_costs_and_warehouse_rows():
    from decguard_pipeline.warehouse.rows.golden import case_results_table

    with llm_server(usage_answer) as server:
        backend = openai(server.url, pricing={"input_per_million": 1, "output_per_million": 1})
        results = run(backend, list(USAGES))
    assert results.error_kind == [None] * len(USAGES)
    assert tokens_of(results) == {case: KNOWN.get(case) for case in USAGES}
    cost = run_cost(
        results.prompt_tokens,
        results.completion_tokens,
        backend.settings.pricing,
        decided=results.ok,
    )
    assert (cost.cases_with_usage, cost.prompt_tokens, cost.completion_tokens) == (
        2,
        12 + MAX_TOKENS,
        3,
    )
    assert backend.run_stats()["prompt_tokens"] == 12 + MAX_TOKENS  # what pacing counted
    table = case_results_table(
        results,
        contract="c",
        target="t",
        run_id="r",
        recorded_at=datetime.now(UTC),
        model_version=None,
    )
    stored = dict(
        zip(
            table.column("case_id").to_pylist(),
            table.column("prompt_tokens").to_pylist(),
            strict=True,
        )
    )
    assert stored == {case: (KNOWN[case][0] if case in KNOWN else None) for case in USAGES}


def test_the_cli_report_and_cache_keep_impossible_usage_unknown(tmp_path, ours):
    with llm_server(usage_answer) as server:
        contract = write_contract(tmp_path / "big", server.url)
        ran = ours("test", contract, "--cache", tmp_path / "cache", "-o", tmp_path / "r.json")
    assert ran.exit_code == 0, ran.stderr
    usage = json.loads((tmp_path / "r.pipeline.json").read_text())["usage"]
    assert (usage["cases_with_usage"], usage["prompt_tokens"]) == (2, 12 + MAX_TOKENS)
    cached = Warehouse(tmp_path / "cache").query("SELECT case_id, prompt_tokens FROM responses")
    cached = cached.to_pylist()
    assert {r["case_id"]: r["prompt_tokens"] for r in cached} == {
        case: (KNOWN[case][0] if case in KNOWN else None) for case in USAGES
    }


def plant(folder: Path, prompt_tokens: int | None) -> int:
    """Overwrite the prompt tokens of every stored answer of the cache at ``folder`` with
    ``prompt_tokens``, as a cache written before counts were checked may hold them (the
    int64 that 2^63 overflowed to). Returns the answers changed."""
    with Warehouse(folder).connect() as con:
        con.execute("UPDATE responses SET prompt_tokens = ?", [prompt_tokens])
        return int(con.execute("SELECT count(*) FROM responses").fetchone()[0])


def test_a_cache_that_holds_impossible_counts_still_replays_with_usage_unknown(tmp_path, ours):
    def fine(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        return 200, chat_answer("A", top_logprobs=LETTERS, usage=(12, 3)), {}

    cache = tmp_path / "cache"
    with llm_server(fine) as server:
        contract = write_contract(tmp_path / "c", server.url)
        assert ours("test", contract, "--cache", cache).exit_code == 0
        assert plant(cache, INT64_MIN) == len(USAGES)
        ran = ours("test", contract, "--cache", cache, "-o", tmp_path / "r.json")
    assert ran.exit_code == 0, ran.stderr
    sidecar = json.loads((tmp_path / "r.pipeline.json").read_text())
    asked = sidecar["cache"]["asked"]  # the probe that finds the model version
    assert sidecar["cache"]["answers_from_cache"] == len(USAGES) - asked
    assert sidecar["cache"]["saved"]["prompt_tokens"] == 0  # nothing negative counted
    assert sidecar["cache"]["saved"]["answers_with_usage"] == 0
    usage = sidecar["usage"]
    assert (usage["cases_with_usage"], usage["prompt_tokens"]) == (asked, 12 * asked)


# -- pacing ---------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_pacing_wait_is_longer_than_the_cap_whatever_the_usage_said():
    clock = FakeClock()
    pacer = Pacer(tokens_per_minute=6000, clock=clock, max_wait_s=30.0)  # 100 tokens/s
    assert pacer.reserve(100) == 0.0
    pacer.settle(estimated=100, actual=10**9)  # believed: 10^7 s of debt
    assert pacer.reserve(100) == pytest.approx(30.0)
    assert pacer.reserve(100) == pytest.approx(30.0)  # still owed, still capped
    clock.now += 32.0  # the debt beyond the cap was forgiven: pacing is back to its rate
    assert pacer.reserve(100) == 0.0
    assert pacer.reserve(100) == pytest.approx(1.0)
    # requests_per_minute too (a backlog can only come from many requests at once)
    requests = Pacer(requests_per_minute=1, clock=clock, max_wait_s=90.0)
    assert [requests.reserve(0) for _ in range(3)] == pytest.approx([0.0, 60.0, 90.0])


def test_pacing_survives_a_server_reporting_a_trillion_tokens():
    """tokens_per_minute with a server saying prompt_tokens = 10^12: the count is unknown, so
    pacing goes on from its estimates (before: the second request waited 6 x 10^8 s)."""

    def trillion(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        return 200, chat_answer("A", top_logprobs=LETTERS, usage=(10**12, 1)), {}

    with llm_server(trillion) as server:
        backend = openai(server.url, tokens_per_minute=600_000)
        results = guarded(lambda: run(backend, ["a", "b", "c"], concurrency=1))
    assert results.error_kind == [None] * 3
    assert results.prompt_tokens is None  # no case has a count
    assert backend.run_stats()["paced_wait_s"] < 1.0  # ~10 tokens each at 10,000 a second


def test_pacing_waits_are_capped_by_max_pacing_wait_s():
    """A count that could be real but is not (10^9 tokens for a one-token answer) is kept,
    and no request waits longer than max_pacing_wait_s for it."""

    def billion(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        return 200, chat_answer("A", top_logprobs=LETTERS, usage=(10**9, 1)), {}

    with llm_server(billion) as server:
        backend = openai(server.url, tokens_per_minute=60_000, max_pacing_wait_s=0.05)
        results = guarded(lambda: run(backend, ["a", "b", "c"], concurrency=1))
    assert results.error_kind == [None] * 3
    assert results.prompt_tokens.tolist() == [10**9] * 3
    stats = backend.run_stats()
    assert stats["paced"] == 2
    assert stats["paced_wait_s"] <= 2 * 0.05 + 1e-9


# -- evaluate --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_evaluate_stores_impossible_usage_as_null_and_survives_a_cache_holding_it(tmp_path):
    """`evaluate` against a server reporting 2^63 tokens ended with exit 2 ("Python int too
    large to convert to C long") after storing -2^63 in its cache, and every later run that
    replayed that answer failed the same way. Now: an old cache's numbers are unknown, and a
    server's impossible counts are stored as null."""
    from decguard_pipeline.warehouse import Warehouse

    contracts, warehouse = tmp_path / "contracts", tmp_path / "warehouse"
    cases = contracts / "big" / "cases.jsonl"
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home")}
    serving: dict[str, Any] = {"usage": (12, 3)}

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        if serving["usage"] is None:  # a new model (a new target: nothing cached) that lies
            status, body, headers = usage_answer(seen)
            return status, {**body, "model": "liar-1"}, headers
        return 200, chat_answer("A", top_logprobs=LETTERS, usage=serving["usage"]), {}

    def evaluate(new_case: str) -> subprocess.CompletedProcess[str]:
        """Evaluate again, with one case more (a new dataset: a new run, replaying the rest)."""
        cases.write_text(cases.read_text() + json.dumps({"id": new_case, "input": new_case}) + "\n")
        return subprocess.run(
            [str(BIN / "decguard-pipeline"), "evaluate", "--contracts", str(contracts),
             "--warehouse", str(warehouse)],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip

    def latest_run() -> tuple[Any, dict[str, Any]]:
        with Warehouse(warehouse).connect() as con:
            ((run_id, tokens),) = con.sql(
                "SELECT run_id, prompt_tokens FROM runs ORDER BY recorded_at DESC LIMIT 1"
            ).fetchall()
            rows = con.sql(
                f"SELECT case_id, prompt_tokens FROM case_results WHERE run_id = '{run_id}'"
            ).fetchall()
        return tokens, dict(rows)

    with llm_server(answer) as server:
        write_contract(contracts / "big", server.url)
        first = evaluate("new-1")
        assert first.returncode == 0, first.stdout + first.stderr
        assert "default@test-model-2026-01-01  " in first.stdout, first.stdout
        # the cache as code that did not check counts left it, replayed by the next run
        assert plant(warehouse, INT64_MIN) == len(USAGES) + 1
        replayed = evaluate("new-2")
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        tokens, rows = latest_run()
        asked = [case for case, count in rows.items() if count is not None]
        assert "new-2" in asked and set(rows.values()) == {None, 12}
        assert tokens == 12 * len(asked)
        # now the server says what cannot be
        serving["usage"] = None
        lying = evaluate("new-3")
    assert lying.returncode == 0, lying.stdout + lying.stderr
    tokens, rows = latest_run()
    assert rows == {
        **{case: (KNOWN[case][0] if case in KNOWN else None) for case in USAGES},
        **{f"new-{i}": 12 for i in (1, 2, 3)},
    }
    assert tokens == 12 + MAX_TOKENS + 3 * 12


# -- log-probabilities above 0 ------------------------------------------------------------------


def test_a_positive_logprob_is_an_invalid_response_naming_the_field():
    """A log-probability is at most 0; a server saying 0.5 (probability 1.65) answered
    nothing readable. Float noise of a few ulps above 0 is not an error."""
    spec3 = DecisionSpec("q", "choice", ("a", "b", "c"))
    chat = {
        "positive": [("A", -0.2), ("B", 0.5)],
        "positive-other-token": [("A", -0.2), ("x", 3.0)],
        "float-noise": [("A", 2e-7), ("B", -1.8)],
        "zero": [("A", 0.0), ("B", -1.8)],
    }

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        if seen.path.endswith("/completions") and "messages" not in seen.body:
            prompts = seen.body["prompt"]
            case = prompts[0].split("<")[1].split(">")[0]
            lift = 0.5 if case == "positive" else 5e-6  # option 1's token: above 0, or noise
            choices = []
            for i, prompt in enumerate(prompts):
                context = prompt.rsplit(" ", 1)[0]
                choices.append(
                    {
                        "index": i,
                        "text": prompt,
                        "logprobs": {
                            "tokens": [context, prompt[len(context) :]],
                            "token_logprobs": [None, lift if i == 1 else -1.0],
                            "text_offset": [0, len(context)],
                        },
                    }
                )
            return 200, {"model": "m", "choices": choices}, {}
        case = seen.body["messages"][0]["content"].split("<")[1].split(">")[0]
        return 200, chat_answer("A", top_logprobs=chat[case]), {}

    def run3(backend: Any, inputs: list[str]) -> Any:
        cases = Cases(list(inputs), inputs, [None] * len(inputs), [{} for _ in inputs])
        return run_cases(backend, spec3, cases, max_concurrency=2, tolerance=1e-3)

    with llm_server(answer) as server:
        config = {"provider": "openai", "model": "m", "base_url": f"{server.url}/v1"}
        settings = {**config, "prompt": "<{input}> {options}", "retry_backoff_s": 0}
        chatting = create_backend(BackendConfig.model_validate(settings), decision=spec3)
        scored = create_backend(
            BackendConfig.model_validate({**settings, "scoring": "completion_logprobs"}),
            decision=spec3,
        )
        by_chat = run3(chatting, list(chat))
        by_completion = run3(scored, ["positive", "float-noise"])
    above = "above 0: not a log-probability"
    assert list(zip(by_chat.error_kind, by_chat.error_message, strict=True)) == [
        (
            "invalid_response",
            f"choices[0].logprobs.content[0].top_logprobs[1].logprob is 0.5, {above}",
        ),
        (
            "invalid_response",
            f"choices[0].logprobs.content[0].top_logprobs[1].logprob is 3.0, {above}",
        ),
        (None, None),
        (None, None),
    ]
    assert list(zip(by_completion.error_kind, by_completion.error_message, strict=True)) == [
        ("invalid_response", f"logprobs.token_logprobs[1] of choice 1 is 0.5, {above}"),
        (None, None),
    ]


# -- control sequences in what a server calls its model -----------------------------------------

EVIL = "evil\x1b[2J\x1b]0;pwned\x07\x9b31m\u202e-v1"  # clear screen, window title, CSI, RTL
SHOWN = "evil\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m\\u202e-v1"
CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


def evil_server() -> Any:
    """Every provider's answer and the health answer name the model ``EVIL``."""

    def post(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        probabilities = {"yes": 0.75, "no": 0.25}
        if seen.path == "/decide":
            return 200, {"probabilities": probabilities, "model": EVIL, "model_version": EVIL}, {}
        if seen.path == "/systemone":
            answer = {"type": "choice", "choice": "yes", "probabilities": probabilities}
            return 200, {"model": EVIL, "answers": {"q": answer}}, {}
        return 200, chat_answer("A", model=EVIL, top_logprobs=LETTERS), {}

    return llm_server(post, get=lambda seen: (200, {"model_version": EVIL}, {}))


def evil_contract(folder: Path, provider: str, url: str) -> Path:
    backend: dict[str, Any] = {"provider": provider, "model": "m"}
    if provider == "http":
        backend.update(url=f"{url}/decide", health_url=f"{url}/health")
    elif provider == "systemone":
        backend.update(url=f"{url}/systemone", instructions="Is it?")
    else:
        backend["base_url"] = f"{url}/v1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cases.jsonl").write_text('{"id": "a", "input": "x", "expected": "yes"}\n')
    path = folder / "decguard.yaml"
    path.write_text(
        'schema_version: "0.1"\n'
        'decision: {name: q, type: choice, options: ["yes", "no"]}\n'
        f"backend: {json.dumps(backend)}\n"
        "dataset: cases.jsonl\n"
        "policy: {routes: [{action: accept}]}\n"
    )
    return path


@pytest.mark.parametrize("provider", ["http", "openai", "systemone"])
def test_a_served_model_name_reaches_the_terminal_only_escaped(tmp_path, ours, provider):
    """What a server calls its model is printed (the backend line, the cache's model version)
    with its control characters written as escapes; the report keeps it as sent (data)."""
    with evil_server() as server:
        contract = evil_contract(tmp_path / provider, provider, server.url)
        report = tmp_path / "r.json"
        runs = [
            ours("test", contract, "--cache", tmp_path / "cache", "-o", report),
            ours("test", contract, "--cache", tmp_path / "cache"),  # the version from the cache
            ours("report", report),
            ours("run", contract, "x"),
        ]
    printed = "".join(r.stdout + r.stderr for r in runs)
    assert [r.exit_code for r in runs] == [0, 0, 0, 0], printed
    assert [c for c in CONTROLS if c in printed] == []
    assert f"model version {SHOWN}" in runs[1].stdout
    if provider != "http":  # the served model is the backend's version
        assert f"default: {provider} · m / {SHOWN}\n" in runs[0].stdout
    document = json.loads(report.read_text())
    assert document["results"][0]["result"]["model_version"] == EVIL  # data: as sent


def test_printable_escapes_every_control_character_and_nothing_else():
    from decguard_pipeline.core.formatting import printable

    assert printable(EVIL) == SHOWN
    assert printable("a\tb\nc\x00\x7f") == "a\\x09b\\x0ac\\x00\\x7f"
    assert printable("line one\nline\x1b two", lines=True) == "line one\nline\\x1b two"
    plain = "gpt-4o-mini-2024-07-18 · café ✓ 模型"
    assert printable(plain) is plain


@pytest.mark.slow
def test_evaluate_prints_a_served_model_name_escaped_and_stores_it_as_sent(tmp_path):
    from decguard_pipeline.warehouse import Warehouse

    contracts, warehouse = tmp_path / "contracts", tmp_path / "warehouse"
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home")}
    with evil_server() as server:
        for provider in ("http", "openai"):
            evil_contract(contracts / provider, provider, server.url)
        ran = subprocess.run(
            [str(BIN / "decguard-pipeline"), "evaluate", "--contracts", str(contracts),
             "--warehouse", str(warehouse)],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "skipped" not in ran.stdout, ran.stdout
    assert [c for c in CONTROLS if c in ran.stdout + ran.stderr] == []
    with Warehouse(warehouse).connect() as con:
        stored = con.sql("SELECT DISTINCT result_model_version FROM case_results").fetchall()
        versions = con.sql("SELECT DISTINCT model_version FROM targets").fetchall()
    assert stored == [(EVIL,)] and versions == [(EVIL,)]

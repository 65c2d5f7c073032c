"""Fault injection: a hostile model (decguard_pipeline_tests/support/faults.py, a real server on
loopback) misbehaves per request, and every run must still account for every case with a
result or a typed error of DecGuard's kinds, keep memory bounded, and never store or print the
credentials the model echoes. Every output is searched for them: report, sidecar, stdout,
stderr, the JSON output, and (slow test) every warehouse file and the Dagster instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.faults import (
    FAULTS,
    TIMEOUT_S,
    fault_of,
    hostile,
    run_measured,
)
from decguard_pipeline_tests.support.golden_cases import comparable

TOKEN = "tok-8d1c5e0b7a-bearer"
KEY = "key-3f9a2c6d41-apikey"
SECRETS = (TOKEN, KEY)
REDACTED = "[REDACTED]"
PER_FAULT = 2
BIN = Path(sys.executable).parent


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DG_FAULT_TOKEN", TOKEN)
    monkeypatch.setenv("DG_FAULT_KEY", KEY)
    return tmp_path


@pytest.fixture
def server():
    with hostile() as running:
        yield running


def contract(url: str, *, extra: str = "", **settings: Any) -> str:
    backend = {
        "provider": "http",
        "url": url,
        "timeout_s": TIMEOUT_S,
        "max_retries": 1,
        "retry_backoff_s": 0.01,
        "bearer_token_env": "DG_FAULT_TOKEN",
        "headers_from_env": {"X-Api-Key": "DG_FAULT_KEY"},
        **settings,
    }
    lines = [
        'schema_version: "0.1"',
        'decision: {name: q, type: choice, options: ["yes", "no"]}',
        f"backend: {json.dumps(backend)}",
        "dataset: cases.jsonl",
        "evaluation: {max_concurrency: 4}",
    ]
    return "\n".join(lines) + "\n" + extra


def write_cases(
    faults: list[str], per_fault: int = PER_FAULT, path: str = "cases.jsonl"
) -> list[str]:
    ids = [f"{fault}#{i}" for i in range(per_fault) for fault in faults]
    Path(path).write_text(
        "".join(json.dumps({"id": i, "input": f"text {i}", "expected": "yes"}) + "\n" for i in ids)
    )
    return ids


def leaks(**texts: str) -> dict[str, list[str]]:
    """Which secret appears in which named text (empty: none anywhere)."""
    found = {name: [s for s in SECRETS if s in text] for name, text in texts.items()}
    return {name: hits for name, hits in found.items() if hits}


def outcomes(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """case id -> {"kind": error kind or None, "message", "result"}."""
    out = {}
    for record in doc["results"]:
        error, result = record["error"], record["result"]
        assert (error is None) != (result is None), record["case_id"]
        out[record["case_id"]] = {
            "kind": error["kind"] if error else None,
            "message": error["message"] if error else None,
            "result": result,
        }
    return out


# -- the whole catalogue through `test` -----------------------------------------------------


@pytest.mark.usefixtures("batch_client")
def test_every_fault_ends_as_its_result_or_typed_error_and_nothing_leaks(
    workdir, server, ours, ref
):
    ids = write_cases(list(FAULTS))
    # a pipeline extension, so that a sidecar is written (and searched) too
    Path("c.yaml").write_text(contract(server.url, extra="pipeline: {guard: {threshold: 0.5}}\n"))
    ran = ours("test", "c.yaml", "-o", "report.json")
    assert ran.exit_code == 1, ran.stderr  # errored cases fail the implicit error-rate gate
    text = Path("report.json").read_text()
    sidecar = Path("report.pipeline.json").read_text()
    doc = json.loads(text)
    got = outcomes(doc)
    # nothing dropped, nothing added, dataset order kept
    assert [r["case_id"] for r in doc["results"]] == ids
    assert doc["metrics"]["counts"]["total"] == len(ids)
    assert doc["metrics"]["counts"]["succeeded"] + doc["metrics"]["counts"]["errored"] == len(ids)
    assert {i: got[i]["kind"] for i in ids} == {i: FAULTS[fault_of(i)].kind for i in ids}
    # retries happened, and Retry-After: 3600 was not waited for (the run is over)
    assert server.attempts["status-503-retry-after"] == 2 * PER_FAULT
    assert server.attempts["status-429-retry-after"] == PER_FAULT
    first = {fault_of(i): got[i] for i in reversed(ids)}
    too_large = "backend 'default' answered more than 1048576 bytes (max_response_bytes)"
    for fault in ("huge", "huge-chunked", "gzip-bomb", "deflate-bomb"):
        assert first[fault]["message"] == too_large, fault
    assert first["trickle"]["message"] == f"backend 'default' timed out after {TIMEOUT_S:g}s"
    assert first["metadata-deep"]["message"] == "metadata is nested more than 128 levels deep"
    assert first["metadata-big"]["message"] == (
        "metadata is 100010 bytes as JSON, over the limit of 65536 bytes"
    )
    assert first["gzip-corrupt"]["message"].startswith("DecodingError: Error -3 while decompr")
    assert first["gzip-ok"]["result"]["probabilities"] == {"yes": 0.75, "no": 0.25}
    # NaN and Infinity in metadata are written as DecGuard writes them (null), see below
    assert first["metadata-nan"]["result"]["metadata"] == {"score": None, "hi": None, "lo": [None]}
    # echoed credentials: redacted by value wherever they were, by key where DecGuard does
    echoed = first["echo-metadata"]["result"]["metadata"]
    assert echoed["trace"] == f"auth was {REDACTED} {REDACTED}!"
    assert echoed["nested"] == {"seen": [f"{REDACTED} {REDACTED}", {"again": [REDACTED] * 2}]}
    assert echoed[REDACTED] == "as a key" and echoed["authorization"] == REDACTED
    model = first["echo-model"]["result"]
    assert (model["model"], model["model_version"]) == (
        f"model-{REDACTED}",
        f"v-{REDACTED}-{REDACTED}",
    )
    assert leaks(report=text, sidecar=sidecar, stdout=ran.stdout, stderr=ran.stderr) == {}
    # the JSON output, and the stored report read back by both tools
    as_json = ours("test", "c.yaml", "-f", "json")
    assert leaks(json_stdout=as_json.stdout, json_stderr=as_json.stderr) == {}
    assert outcomes(json.loads(as_json.stdout)).keys() == got.keys()
    shown, theirs = ours("report", "report.json"), ref("report", "report.json")
    assert shown.exit_code == theirs.exit_code == doc["exit_code"], (shown.stderr, theirs.stderr)
    assert leaks(shown=shown.stdout + shown.stderr) == {}


@pytest.mark.usefixtures("batch_client")
def test_faults_decguard_defines_give_decguards_kinds_and_messages(workdir, server, ours, ref):
    """The faults DecGuard itself survives give the same outcome case by case (kind, message,
    answer); the model really echoes the credentials: the reference stores them."""
    faults = [f for f, fault in FAULTS.items() if fault.same_as_decguard]
    write_cases(faults, per_fault=1)
    Path("c.yaml").write_text(contract(server.url))
    a = ours("test", "c.yaml", "-o", "ours.json")
    b = ref("test", "c.yaml", "-o", "ref.json")
    assert a.exit_code == b.exit_code == 1, (a.stderr, b.stderr)
    mine, theirs = (json.loads(Path(p).read_text()) for p in ("ours.json", "ref.json"))
    ours_out, ref_out = outcomes(mine), outcomes(theirs)
    for case_id, want in ref_out.items():
        have = ours_out[case_id]
        assert (have["kind"], have["message"]) == (want["kind"], want["message"]), case_id
        assert (have["result"] is None) == (want["result"] is None), case_id
    redacted = {"echo-metadata#0", "echo-model#0"}
    same = [
        {**r, "result": None} if r["case_id"] in redacted else r
        for r in comparable(mine)["results"]
    ]
    want = [
        {**r, "result": None} if r["case_id"] in redacted else r
        for r in comparable(theirs)["results"]
    ]
    assert same == want
    reference_text = Path("ref.json").read_text()
    assert TOKEN in reference_text and KEY in reference_text
    assert leaks(ours=Path("ours.json").read_text()) == {}


@pytest.mark.usefixtures("batch_client")
def test_bombs_and_huge_bodies_keep_memory_bounded(workdir, server):
    """Twelve gzip and deflate bombs of 200 MB and eight 2 MiB bodies, eight at a time: before
    the limit, one bomb alone took 3.4 GB."""
    write_cases(["gzip-bomb", "deflate-bomb", "huge", "huge-chunked", "ok"], per_fault=6)
    Path("c.yaml").write_text(contract(server.url))
    code, stderr, peak = run_measured(
        [
            str(BIN / "decguard-pipeline"),
            "test",
            "c.yaml",
            "--max-concurrency",
            "8",
            "-o",
            "r.json",
        ],
        dict(os.environ),
    )
    assert code == 1, stderr
    doc = json.loads(Path("r.json").read_text())
    kinds = {fault_of(i): o["kind"] for i, o in outcomes(doc).items()}
    assert kinds == {
        "gzip-bomb": "invalid_response",
        "deflate-bomb": "invalid_response",
        "huge": "invalid_response",
        "huge-chunked": "invalid_response",
        "ok": None,
    }
    assert Path("r.json").stat().st_size < 64 * 1024
    assert peak < 400, f"peak {peak} MiB"


@pytest.mark.usefixtures("batch_client")
def test_limits_are_settings(workdir, server, ours):
    """max_response_bytes and max_metadata_bytes (pipeline extensions) move the limits."""
    write_cases(["huge", "metadata-big", "ok"], per_fault=1)
    Path("c.yaml").write_text(
        contract(server.url, max_response_bytes=4 << 20, max_metadata_bytes=200_000)
    )
    doc = json.loads(ours("test", "c.yaml", "-f", "json").stdout)
    assert {i: o["kind"] for i, o in outcomes(doc).items()} == {
        "huge#0": None,
        "metadata-big#0": None,
        "ok#0": None,
    }
    Path("c.yaml").write_text(contract(server.url, max_response_bytes=10))
    failed = ours("test", "c.yaml")
    assert (failed.exit_code, failed.stderr) == (
        2,
        "error: backend 'default' failed on every case; first error: invalid_response: "
        "backend 'default' answered more than 10 bytes (max_response_bytes)\n",
    )
    Path("c.yaml").write_text(contract(server.url, max_response_bytes=0))
    bad = ours("validate", "c.yaml")
    assert bad.exit_code == 2
    assert "backend.max_response_bytes: Input should be greater than or equal to 1" in bad.stderr


# -- single calls (run, SDK, health, target discovery): the synchronous client -------------


def test_single_calls_are_bounded_and_scrubbed(workdir, server):
    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
    from decguard_pipeline.core.decision import DecisionRequest
    from decguard_pipeline.core.errors import BackendError

    spec = DecisionSpec("q", "choice", ("yes", "no"))
    settings = json.loads(contract(server.url).splitlines()[2].removeprefix("backend: "))
    settings["health_url"] = server.health_url
    backend = create_backend(BackendConfig.model_validate(settings), decision=spec)
    outcome: dict[str, Any] = {}
    with backend:
        for fault in FAULTS:
            try:
                result = backend.decide(DecisionRequest(f"{fault}#0", spec, "x"))
                outcome[fault] = (None, result)
            except BackendError as exc:
                outcome[fault] = (exc.kind, str(exc))
            except Exception as exc:  # what the runner records as kind "exception"
                outcome[fault] = ("exception", f"{type(exc).__name__}: {exc}")
        assert backend.healthcheck() == {"status": "ok", "detail": "HTTP 200"}
        assert backend.version_hint() == f"v-{REDACTED}"
    assert {f: kind for f, (kind, _) in outcome.items()} == {f: x.kind for f, x in FAULTS.items()}
    assert outcome["echo-model"][1]["model"] == f"model-{REDACTED}"
    assert (
        outcome["huge"][1]
        == "backend 'default' answered more than 1048576 bytes (max_response_bytes)"
    )
    assert leaks(outcomes=repr(outcome)) == {}
    # a health answer too large to read is still a healthy status, without a version
    settings["health_url"] = server.health_url.replace("/healthz", "/healthz-huge")
    with create_backend(BackendConfig.model_validate(settings), decision=spec) as huge:
        assert huge.healthcheck() == {"status": "ok", "detail": "HTTP 200"}
        assert huge.version_hint() is None


def test_run_command_output_is_scrubbed(workdir, server, ours):
    write_cases(["ok"], per_fault=1)
    policy = "policy: {routes: [{action: accept}]}\n"
    Path("c.yaml").write_text(contract(server.url, extra=policy))
    ran = ours("run", "c.yaml", "x", "--id", "echo-model#0", "-f", "json", "--no-healthcheck")
    assert ran.exit_code == 0, ran.stderr
    assert json.loads(ran.stdout)["result"]["model"] == f"model-{REDACTED}"
    failed = ours("run", "c.yaml", "x", "--id", "echo-error#0", "--no-healthcheck")
    assert failed.exit_code == 2
    assert failed.stderr == "error: backend 'default' returned HTTP 500\n"
    assert leaks(out=ran.stdout + ran.stderr) == {}


# -- systemone, fuzzing and paraphrases --------------------------------------------------------


@pytest.mark.usefixtures("batch_client")
def test_systemone_echoes_are_redacted(workdir, server, ours, ref):
    write_cases(["a", "b", "c"], per_fault=1)
    Path("c.yaml").write_text(
        contract(server.systemone_url, provider="systemone", model="m", instructions="Is it?")
    )
    a = ours("test", "c.yaml", "-o", "ours.json")
    b = ref("test", "c.yaml", "-o", "ref.json")
    assert a.exit_code == b.exit_code == 0, (a.stderr, b.stderr)
    doc = json.loads(Path("ours.json").read_text())
    first = doc["results"][0]["result"]
    assert first["model_version"] == f"served-{REDACTED}"
    assert first["metadata"]["request_id"] == f"req-{REDACTED}-{REDACTED}"
    assert first["metadata"]["upstream_provider"] == f"upstream {REDACTED} {REDACTED}"
    assert doc["backend"]["model_version"] == f"served-{REDACTED}"
    assert doc["backend"]["details"]["served_models"] == [f"served-{REDACTED}"]
    assert leaks(report=Path("ours.json").read_text(), out=a.stdout + a.stderr) == {}
    assert TOKEN in Path("ref.json").read_text()  # the reference stores what was echoed
    # everything else as the reference has it
    redacted = json.loads(
        Path("ref.json").read_text().replace(TOKEN, REDACTED).replace(KEY, REDACTED)
    )
    assert comparable(doc) == comparable(redacted)


def test_fuzz_pairs_are_scrubbed(workdir, server, ours, ref):
    write_cases(["echo-metadata", "echo-model", "ok", "status-500"], per_fault=2)
    extra = (
        "properties:\n"
        "  whitespace: {max_tv_distance: 0.5}\n"
        "  option_order: {max_tv_distance: 0.5}\n"
    )
    Path("c.yaml").write_text(contract(server.url, extra=extra))
    a = ours("test", "c.yaml", "--all", "-o", "ours.json")
    assert a.exit_code in (0, 1), a.stderr
    text = Path("ours.json").read_text()
    doc = json.loads(text)
    pairs = doc["properties"]["pairs"]
    assert {p["case_id"] for p in pairs} == {r["case_id"] for r in doc["results"]}
    echoed = [p for p in pairs if "echo-model" in p["case_id"] and p["result"]]
    assert echoed and all(p["result"]["model"] == f"model-{REDACTED}" for p in echoed)
    assert leaks(report=text, out=a.stdout + a.stderr) == {}
    assert ours("report", "ours.json").exit_code == ref("report", "ours.json").exit_code


def test_paraphrases_echoing_the_key_and_huge_answers(workdir, ours, monkeypatch):
    from decguard_pipeline_tests.support.chat_server import chat_server

    monkeypatch.setenv("PARA_KEY", TOKEN)
    cases = [{"id": "e1", "input": "ECHOKEY please"}, {"id": "h1", "input": "HUGE answer"}]
    Path("cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    with chat_server() as chat:
        Path("c.yaml").write_text(
            'schema_version: "0.1"\n'
            "decision: {name: d, type: choice, options: [refund, reject]}\n"
            "backend: {provider: mock, seed: 5}\n"
            "dataset: cases.jsonl\n"
            "properties:\n"
            f"  paraphrase: {{source: {{provider: openai, model: m, url: '{chat.url}', "
            "api_key_env: PARA_KEY}, samples: 1, max_tv_distance: 0.5}\n"
        )
        ran = ours("fuzz", "c.yaml", "-o", "ours.json")
    assert ran.exit_code in (0, 1), ran.stderr
    text = Path("ours.json").read_text()
    pairs = {p["case_id"]: p for p in json.loads(text)["properties"]["pairs"]}
    assert pairs["e1"]["input"] == f"KEY {REDACTED} ECHOED"
    assert pairs["e1"]["provenance"]["response_model"] == f"served-{REDACTED}"
    assert pairs["h1"]["error"] == {
        "kind": "paraphrase_error",
        "message": "paraphraser answered more than 1048576 bytes (max_response_bytes)",
    }
    assert leaks(report=text, out=ran.stdout + ran.stderr) == {}


# -- the language-model providers: the same transport, the same limits and redaction ----------

ENGINE_FAULTS = {  # what a loopback openai / openjev server does -> the error kind it must give
    "ok": None,
    "echo": None,  # the served model and fingerprint echo both credentials
    "huge": "invalid_response",
    "gzip-bomb": "invalid_response",
    "gzip-ok": None,
    "status-500-echo": "unavailable",  # an error body echoing the key, never read
    "status-401-echo": "backend_error",
}


def engine_answer(provider: str, seen: Any) -> tuple[int, Any, dict[str, str]]:
    """The answer of a hostile language-model server to one POST; the fault is the case id,
    which the prompt carries."""
    from decguard_pipeline_tests.support.faults import _bomb, _pack
    from decguard_pipeline_tests.support.llm_servers import chat_answer

    text = json.dumps(seen.body)
    marked = [f for f in sorted(ENGINE_FAULTS, key=len, reverse=True) if f"<{f}#" in text]
    fault = marked[0] if marked else "echo"  # a canary asking for the model version
    key = seen.headers["Authorization"].removeprefix("Bearer ")
    echoed = [key, seen.headers["X-Api-Key"]]
    served = f"served-{echoed[0]}" if fault == "echo" else "served-1"
    if provider == "openai":
        letters = [("A", -0.2), ("B", -1.8)]
        fingerprint = f"fp-{echoed[1]}" if fault == "echo" else "fp-1"
        answer = chat_answer("A", model=served, fingerprint=fingerprint, top_logprobs=letters)
    else:
        answer = {"probability": [0.75, 0.25], "model": served}
    body = json.dumps(answer).encode()
    if fault == "huge":
        return 200, body[:-1] + b', "pad": "' + b"x" * (2 << 20) + b'"}', {}
    if fault == "gzip-bomb":
        return 200, _bomb("gzip"), {"Content-Encoding": "gzip"}
    if fault == "gzip-ok":
        return 200, _pack("gzip", body), {"Content-Encoding": "gzip"}
    if fault.startswith("status-"):
        status = int(fault.split("-")[1])
        return status, {"error": {"message": f"bad key {' '.join(echoed)}"}}, {}
    return 200, answer, {}


def engine_contract(provider: str, url: str, **settings: Any) -> str:
    backend: dict[str, Any] = {
        "provider": provider,
        "model": "m",
        "timeout_s": 5,
        "max_retries": 0,
        "api_key_env": "DG_FAULT_TOKEN",
        "headers_from_env": {"X-Api-Key": "DG_FAULT_KEY"},
        "prompt": "<{input}> {options}",
        **settings,
    }
    if provider == "openai":
        backend.update(base_url=f"{url}/v1", version_from="model+fingerprint")
    else:
        backend["url"] = f"{url}/score"
    return (
        'schema_version: "0.1"\n'
        'decision: {name: q, type: choice, options: ["yes", "no"]}\n'
        f"backend: {json.dumps(backend)}\n"
        "dataset: cases.jsonl\n"
    )


@pytest.mark.usefixtures("batch_client")
@pytest.mark.parametrize("provider", ["openai", "openjev"])
def test_language_model_providers_are_bounded_and_their_echoes_redacted(
    workdir, ours, ref, provider
):
    """openai and openjev read through the shared transport: the body limit and our own
    decoding hold there too, and a server echoing the key into the served model (the model
    version) or an error body leaks it into no report, output or warehouse row."""
    from datetime import UTC, datetime

    from decguard_pipeline.runs.golden import run_test
    from decguard_pipeline.warehouse.rows.golden import case_results_table
    from decguard_pipeline_tests.support.llm_servers import llm_server

    ids = [f"{fault}#0" for fault in ENGINE_FAULTS]
    Path("cases.jsonl").write_text(
        "".join(json.dumps({"id": i, "input": i, "expected": "yes"}) + "\n" for i in ids)
    )
    with llm_server(lambda seen: engine_answer(provider, seen)) as server:
        Path("c.yaml").write_text(engine_contract(provider, server.url))
        ran = ours("test", "c.yaml", "-o", "ours.json")
        report = run_test("c.yaml")
        sent = {s.headers.get("Authorization") for s in server.posts()}
    assert sent == {f"Bearer {TOKEN}"}  # the key did go out
    assert ran.exit_code == 1, ran.stderr  # errored cases fail the implicit error-rate gate
    text = Path("ours.json").read_text()
    doc = json.loads(text)
    got = outcomes(doc)
    assert {i: got[i]["kind"] for i in ids} == {i: ENGINE_FAULTS[fault_of(i)] for i in ids}
    too_large = "backend 'default' answered more than 1048576 bytes (max_response_bytes)"
    assert got["huge#0"]["message"] == got["gzip-bomb#0"]["message"] == too_large
    assert got["gzip-ok#0"]["result"]["probabilities"]["yes"] == pytest.approx(
        0.75 if provider == "openjev" else 1 / (1 + np.exp(-1.6)), abs=1e-12
    )
    assert got["status-500-echo#0"]["message"] == "backend 'default' returned HTTP 500"
    echoed = f"served-{REDACTED}+fp-{REDACTED}" if provider == "openai" else f"served-{REDACTED}"
    fine = "served-1+fp-1" if provider == "openai" else "served-1"
    assert got["echo#0"]["result"]["model_version"] == echoed
    assert sorted(doc["backend"]["details"]["served_models"]) == sorted([echoed, fine])
    assert leaks(report=text, stdout=ran.stdout, stderr=ran.stderr) == {}
    # the rows the warehouse stores for the run
    table = case_results_table(
        report.results,
        contract="c",
        target="t",
        run_id="r",
        recorded_at=datetime.now(UTC),
        model_version=None,
    )
    assert leaks(warehouse=json.dumps(table.to_pylist(), default=str)) == {}
    assert report.results.error_kind == [ENGINE_FAULTS[fault_of(i)] for i in ids]
    # the report verifies in DecGuard (which has no openai/openjev provider, but reads reports)
    assert ref("report", "ours.json").exit_code == 1


def test_language_model_metadata_is_bounded_and_keeps_its_tokens(workdir):
    """``max_metadata_bytes`` applies to the language-model providers' results: a sampled
    case with an unparsed answer carries ``{"unparsed_samples": 1}`` (22 bytes)."""
    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.backends.runner import Cases, run_cases
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
    from decguard_pipeline_tests.support.llm_servers import chat_answer, llm_server

    spec = DecisionSpec("q", "choice", ("yes", "no"))
    answer = chat_answer("A", "no letter here", usage=(30, 2))
    outcomes_by_limit = {}
    with llm_server(lambda seen: (200, answer, {})) as server:
        for limit in (22, 21):
            config = BackendConfig.model_validate(
                {
                    "provider": "openai",
                    "model": "m",
                    "base_url": f"{server.url}/v1",
                    "scoring": "sample",
                    "samples": 2,
                    "max_metadata_bytes": limit,
                }
            )
            with create_backend(config, decision=spec) as backend:
                cases = Cases(["c1"], ["x"], [None], [{}])
                results = run_cases(backend, spec, cases, max_concurrency=1, tolerance=1e-3)
            outcomes_by_limit[limit] = results
    kept, refused = outcomes_by_limit[22], outcomes_by_limit[21]
    assert kept.error_kind == [None] and kept.result_metadata == [{"unparsed_samples": 1}]
    assert refused.error_kind == ["invalid_response"]
    assert refused.error_message == ["metadata is 22 bytes as JSON, over the limit of 21 bytes"]
    assert refused.result_metadata == [{}]
    # the tokens were paid for either way
    assert refused.prompt_tokens.tolist() == kept.prompt_tokens.tolist() == [30.0]


# -- NaN in metadata ------------------------------------------------------------------------


def test_metadata_nan_is_written_and_verified_as_decguard_does(workdir, server, ours, ref):
    """DecGuard writes NaN and ±Infinity in a model's metadata as null (pydantic's JSON) and
    reads such a report back; so do we, and each tool verifies the other's file."""
    write_cases(["metadata-nan", "ok"], per_fault=1)
    Path("c.yaml").write_text(contract(server.url))
    assert ours("test", "c.yaml", "-o", "ours.json").exit_code == 0
    assert ref("test", "c.yaml", "-o", "ref.json").exit_code == 0
    mine, theirs = (json.loads(Path(p).read_text()) for p in ("ours.json", "ref.json"))
    assert comparable(mine) == comparable(theirs)
    assert mine["results"][0]["result"]["metadata"] == {"score": None, "hi": None, "lo": [None]}
    for path in ("ours.json", "ref.json"):
        assert ours("report", path).exit_code == ref("report", path).exit_code == 0


def test_metadata_nan_is_kept_in_the_warehouse(workdir, server):
    """The warehouse keeps what the model said: NaN and ±Infinity as JSON tokens that Python
    and DuckDB read back, and a report rebuilt from the rows is the same file."""
    import duckdb

    from decguard_pipeline.core.report.golden import result_records
    from decguard_pipeline.runs.golden import run_test
    from decguard_pipeline.warehouse.rows.golden import case_results_from_table, case_results_table

    write_cases(["metadata-nan", "ok"], per_fault=1)
    Path("c.yaml").write_text(contract(server.url))
    report = run_test("c.yaml")
    from datetime import UTC, datetime

    table = case_results_table(
        report.results,
        contract="c",
        target="t",
        run_id="r",
        recorded_at=datetime.now(UTC),
        model_version=None,
    )
    stored = table.column("result_metadata_json").to_pylist()[0]
    assert stored == '{"score":NaN,"hi":Infinity,"lo":[-Infinity]}'
    back = case_results_from_table(table, report.results.spec, backend="default", provider="http")
    assert json.dumps(back.result_metadata[0]) == json.dumps(report.results.result_metadata[0])
    assert list(result_records(back)) == list(result_records(report.results))
    connection = duckdb.connect()
    connection.register("stored", table)
    found = connection.sql(
        "SELECT result_metadata_json::JSON->>'$.lo[0]' FROM stored WHERE case_id = 'metadata-nan#0'"
    ).fetchall()
    assert found == [("-Infinity",)]


# -- the pipeline: evaluate, the warehouse and Dagster's event log ----------------------------


@pytest.mark.slow
def test_evaluate_with_a_hostile_model_stores_every_case_and_no_secret(workdir, server):
    """`evaluate` (target discovery through an echoing health answer, the Dagster assets, the
    warehouse) against the hostile model: every case is a row with its typed error or answer,
    and no file of the warehouse or of the Dagster instance holds a secret."""

    faults = [
        "ok", "status-500", "status-503", "reset-mid-body", "trickle", "gzip-bomb", "huge",
        "nan", "sum-off", "metadata-nan", "metadata-deep", "echo-metadata", "echo-model",
        "echo-error", "echo-header",
    ]  # fmt: skip
    folder = workdir / "contracts" / "hostile"
    folder.mkdir(parents=True)
    os.chdir(folder)
    ids = write_cases(faults)
    Path("decguard.yaml").write_text(contract(server.url, health_url=server.health_url))
    os.chdir(workdir)
    home, warehouse = workdir / "dagster_home", workdir / "warehouse"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    ran = subprocess.run(
        [str(BIN / "decguard-pipeline"), "evaluate", "--contracts", str(workdir / "contracts"),
         "--warehouse", str(warehouse)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = stored(
        warehouse,
        "SELECT case_id, error_kind, result_model, result_metadata_json FROM case_results "
        "ORDER BY position",
    )
    assert [r[0] for r in rows] == ids
    assert {r[0]: r[1] for r in rows} == {i: FAULTS[fault_of(i)].kind for i in ids}
    by_id = {r[0]: r for r in rows}
    assert by_id["echo-model#0"][2] == f"model-{REDACTED}"
    assert by_id["metadata-nan#0"][3] == '{"score":NaN,"hi":Infinity,"lo":[-Infinity]}'
    targets = stored(warehouse, "SELECT model_version FROM targets")
    assert (f"v-{REDACTED}",) in targets
    assert stored_leaks(warehouse, home) == {}


def stored(warehouse: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of the warehouse's own views."""
    with Warehouse(warehouse).connect() as con:
        return con.sql(sql).fetchall()


def stored_leaks(*roots: Path) -> dict[str, list[str]]:
    """Secrets in any file (its name, its bytes, a Parquet file's decoded values) under
    ``roots``."""
    import pyarrow.parquet as pq

    hits: dict[str, list[str]] = {}
    for root in roots:
        for path in root.rglob("*"):
            texts = [str(path.relative_to(root))]
            if path.is_file():
                texts.append(path.read_bytes().decode("utf-8", "replace"))
                if path.suffix == ".parquet":  # compressed pages: search the decoded values
                    texts.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
            hits.update(leaks(**{str(path): "\n".join(texts)}))
    return hits


@pytest.mark.slow
def test_evaluate_with_an_echoing_language_model_stores_no_secret(workdir):
    """`evaluate` of an openai backend whose server echoes the key into the served model:
    target discovery (a canary case), every case row, the run's backend details, the
    warehouse's partition names and the Dagster instance hold no secret."""

    from decguard_pipeline_tests.support.llm_servers import llm_server

    folder = workdir / "contracts" / "llm"
    folder.mkdir(parents=True)
    # the echo first: its input is the canary that target discovery sends
    ids = [f"{fault}#0" for fault in sorted(ENGINE_FAULTS, key=lambda f: f != "echo")]
    (folder / "cases.jsonl").write_text(
        "".join(json.dumps({"id": i, "input": i, "expected": "yes"}) + "\n" for i in ids)
    )
    home, warehouse = workdir / "dagster_home", workdir / "warehouse"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with llm_server(lambda seen: engine_answer("openai", seen)) as server:
        (folder / "decguard.yaml").write_text(engine_contract("openai", server.url))
        ran = subprocess.run(
            [str(BIN / "decguard-pipeline"), "evaluate", "--contracts",
             str(workdir / "contracts"), "--warehouse", str(warehouse)],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = stored(
        warehouse,
        "SELECT case_id, error_kind, result_model_version FROM case_results ORDER BY position",
    )
    assert [(r[0], r[1]) for r in rows] == [(i, ENGINE_FAULTS[fault_of(i)]) for i in ids]
    assert rows[0][2] == f"served-{REDACTED}+fp-{REDACTED}"
    targets = stored(warehouse, "SELECT model_version FROM targets")
    assert targets == [(f"served-{REDACTED}+fp-{REDACTED}",)]
    assert leaks(out=ran.stdout + ran.stderr) == {}
    assert stored_leaks(warehouse, home) == {}
    assert leaks(stdout=ran.stdout, stderr=ran.stderr) == {}
    # a few rows are inlined in the catalog (SQLite keeps text as its bytes): it was searched
    assert (warehouse / "catalog.sqlite").is_file()
    assert ids[0].encode() in (warehouse / "catalog.sqlite").read_bytes()
    assert any(p.name.endswith(".db") for p in home.rglob("*"))  # the event log was searched

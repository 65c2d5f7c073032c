"""Paraphrase sources against decguard 0.1.1: ``file`` (lookup and load errors), ``openai``
(request, parsing and error kinds against a real OpenAI-compatible chat endpoint on loopback,
built with aiohttp.web) and ``decguard.paraphrasers`` plugins."""

from __future__ import annotations

import json

import pytest

from decguard_pipeline_tests.support.chat_server import SECRET, chat_server
from decguard_pipeline_tests.support.fuzz_compare import assert_same_layout, assert_same_report

CASES = [
    {"id": "p1", "input": "The parcel never arrived."},
    {"id": "p2", "input": "FENCED please refund me"},
    {"id": "p3", "input": "FAIL500 the provider breaks"},
    {"id": "p4", "input": "BADJSON odd answer"},
    {"id": "p5", "input": "NOCHOICES empty body"},
    {"id": "p6", "input": "BLANK one blank item"},
    {"id": "p7", "input": {"body": "object input. two sentences", "n": 1}},
]


def _contract(tmp_path, source: str, cases=CASES, text_field="body"):
    (tmp_path / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    path = tmp_path / "decguard.yaml"
    path.write_text(
        'schema_version: "0.1"\n'
        "decision: {name: d, type: choice, options: [refund, reject, review]}\n"
        "backend: {provider: mock, seed: 5}\n"
        "dataset: cases.jsonl\n"
        f"fuzz: {{seed: 11, text_field: {text_field}}}\n"
        "properties:\n"
        f"  paraphrase: {{source: {source}, samples: 2, max_tv_distance: 0.01}}\n"
    )
    return path


def test_openai_endpoint_matches_reference(ours, ref, tmp_path, monkeypatch):
    monkeypatch.setenv("PARA_KEY", SECRET)
    with chat_server() as chat:
        source = (
            f"{{provider: openai, model: para-1, url: '{chat.url}/', api_key_env: PARA_KEY, "
            "temperature: 0.3}"
        )
        contract = _contract(tmp_path, source)
        a, b = ours("fuzz", contract, "-f", "json"), ref("fuzz", contract, "-f", "json")
        assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr) == (1, "")
        doc = assert_same_report(a.stdout, b.stdout)
        ours_requests = chat.bodies[: len(chat.bodies) // 2]
        assert ours_requests == chat.bodies[len(chat.bodies) // 2 :]  # same requests, both tools
        assert set(chat.authorizations) == {f"Bearer {SECRET}"}
        a, b = ours("fuzz", contract), ref("fuzz", contract)
        assert_same_layout(a.stdout, b.stdout)
    assert SECRET not in a.stdout + json.dumps(doc)
    body = ours_requests[0]
    assert body["model"] == "para-1" and body["temperature"] == 0.3 and body["seed"] == 11
    assert body["messages"][0]["content"].startswith("Paraphrase the user's text 2 times.")
    pairs = {p["id"]: p for p in doc["properties"]["pairs"]}
    assert pairs["paraphrase/p1/0"]["provenance"] == {
        "provider": "openai",
        "model": "para-1",
        "url": chat.url + "/",
        "temperature": 0.3,
        "response_model": "para-served-1",
        "response_system_fingerprint": "fp_123",
    }
    assert pairs["paraphrase/p2/0"]["input"] == "FENCED PLEASE REFUND ME"
    assert pairs["paraphrase/p2/1"]["input"] == "FENCED please refund me indeed"
    assert pairs["paraphrase/p7/0"]["input"] == {"body": "OBJECT INPUT. TWO SENTENCES", "n": 1}
    assert {
        k: pairs[f"paraphrase/{k}/0"]["error"]["message"] for k in ("p3", "p4", "p5", "p6")
    } == {
        "p3": "paraphraser returned HTTP 500",
        "p4": "paraphraser did not answer with a JSON array",
        "p5": "paraphraser response has no message content",
        "p6": "paraphraser did not answer with a JSON array of strings",
    }
    assert {pairs[f"paraphrase/{k}/0"]["error"]["kind"] for k in ("p3", "p4")} == {
        "paraphrase_error"
    }


def test_openai_timeouts_and_unreachable(ours, ref, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with chat_server() as chat:
        cases = [{"id": "s1", "input": "SLOW answer"}, {"id": "s2", "input": "fast answer"}]
        source = (
            f"{{provider: openai, model: m, url: '{chat.url}', api_key_env: null, timeout_s: 0.3}}"
        )
        contract = _contract(tmp_path, source, cases)
        a, b = ours("fuzz", contract, "-f", "json"), ref("fuzz", contract, "-f", "json")
        doc = assert_same_report(a.stdout, b.stdout)
        assert set(chat.authorizations) == {None}
    errors = [p["error"] for p in doc["properties"]["pairs"] if p["error"]]
    assert errors == [{"kind": "timeout", "message": "paraphraser timed out after 0.3s"}]
    dead = _contract(
        tmp_path,
        "{provider: openai, model: m, url: 'http://127.0.0.1:9/v1', api_key_env: null}",
        cases[1:],
    )
    a, b = ours("fuzz", dead, "-f", "json"), ref("fuzz", dead, "-f", "json")
    doc = assert_same_report(a.stdout, b.stdout)
    assert doc["properties"]["pairs"][0]["error"] == {
        "kind": "unavailable",
        "message": "paraphraser unreachable: ConnectError",
    }


@pytest.mark.parametrize(
    "source",
    [
        "{provider: openai, model: m, api_key_env: NOT_SET_ANYWHERE_X}",  # read at first call
        "{provider: openai, model: m, timeout_s: 0}",
        "{provider: openai, url: 'ftp://x'}",
        "{provider: openai, model: m, url: 'https://u:p@host/v1'}",
        "{provider: identity, extra: 1}",
        "{provider: file}",
        "{provider: file, path: missing.jsonl}",
        "{provider: nope}",
    ],
)
def test_provider_settings_and_load_errors(ours, ref, tmp_path, source):
    contract = _contract(tmp_path, source)
    for command in ("validate", "fuzz"):
        a, b = ours(command, contract), ref(command, contract)
        assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr), command
    assert a.exit_code == 2


@pytest.mark.parametrize(
    "rows",
    [
        ['{"id": "p1", "paraphrases": ["x"]}', "{not json"],
        ['{"id": "p1", "paraphrases": ["x"], "id": "p2"}'],
        ['{"id": "p1", "paraphrases": "x"}'],
        ['{"id": "p1", "paraphrases": ["x", ""]}'],
        ['{"paraphrases": ["x"]}'],
        ['["not", "an", "object"]'],
    ],
)
def test_paraphrase_file_errors(ours, ref, tmp_path, rows):
    (tmp_path / "para.jsonl").write_text("\n\n".join(rows) + "\n")
    contract = _contract(tmp_path, "{provider: file, path: para.jsonl}")
    a, b = ours("validate", contract), ref("validate", contract)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert a.exit_code == 2 and "para.jsonl: line" in a.stderr


def test_paraphrase_file_lookup(ours, ref, tmp_path):
    (tmp_path / "para.jsonl").write_text(
        json.dumps({"id": "p1", "paraphrases": ["by id one", "by id two", "by id three"]})
        + "\n"
        + json.dumps({"input": "FENCED please refund me", "paraphrases": ["by text"]})
        + "\n"
        + json.dumps({"id": "p2", "paraphrases": ["id wins over text"]})
        + "\n"
    )
    contract = _contract(tmp_path, "{provider: file, path: para.jsonl}")
    a, b = ours("fuzz", contract, "-f", "json"), ref("fuzz", contract, "-f", "json")
    doc = assert_same_report(a.stdout, b.stdout)
    inputs = {p["id"]: p["input"] for p in doc["properties"]["pairs"]}
    assert inputs == {
        "paraphrase/p1/0": "by id one",
        "paraphrase/p1/1": "by id two",
        "paraphrase/p2/0": "id wins over text",
    }
    reasons = {s["case_id"]: s["reason"] for s in doc["properties"]["skipped"]}
    assert reasons["p3"] == "paraphrase provider 'file' gave none"


PLUGIN = """
from decguard_pipeline.runs.properties.paraphrase import Paraphraser


class Shouting(Paraphraser):
    provider = "shouting"

    @classmethod
    def from_config(cls, source, *, base_dir):
        return cls()

    def paraphrase(self, text, *, case_id, n, seed):
        if "boom" in text:
            raise RuntimeError("plugin bug")
        return [text.upper() + "!"] * n


class NotOne:
    pass
"""


def test_openai_provenance_never_records_the_query_string():
    from decguard_pipeline.core.contract.properties import ParaphraseSource
    from decguard_pipeline.runs.properties.paraphrase import create_paraphraser

    source = ParaphraseSource(provider="openai", model="m", url="https://h.example/v1?org=x")
    provenance = create_paraphraser(source, base_dir=".").provenance()
    assert provenance["url"] == "https://h.example/v1"


def test_plugins_from_entry_points(ours, tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "shout_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "shout_plugin.py").write_text(PLUGIN)
    (site / "shout_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: shout-plugin\nVersion: 1.0\n"
    )
    (site / "shout_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[decguard.paraphrasers]\nshouting = shout_plugin:Shouting\nbroken = shout_plugin:NotOne\n"
    )
    monkeypatch.syspath_prepend(str(site))
    cases = [{"id": "a", "input": "calm words"}, {"id": "b", "input": "boom"}]
    contract = _contract(tmp_path, "{provider: shouting}", cases)
    doc = json.loads(ours("fuzz", contract, "-f", "json").stdout)
    pairs = doc["properties"]["pairs"]
    assert [p["input"] for p in pairs] == ["CALM WORDS!", "boom"]  # duplicates removed
    assert pairs[0]["provenance"] == {"provider": "shouting"}
    assert pairs[1]["error"] == {"kind": "exception", "message": "RuntimeError: plugin bug"}
    broken = ours("validate", _contract(tmp_path, "{provider: broken}", cases))
    assert broken.exit_code == 2
    assert "paraphraser 'broken' (shout_plugin:NotOne) is not a Paraphraser" in broken.stderr
    unknown = ours("validate", _contract(tmp_path, "{provider: nope}", cases))
    assert "available: broken, file, identity, openai, shouting" in unknown.stderr

"""The ``systemone`` backend (typesafe.systemone/v1) against a loopback server of that
protocol, compared with decguard==0.1.1 answer by answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline_tests.support.canned_server import Reply, canned
from decguard_pipeline_tests.support.golden_cases import comparable

SERVED = "typesafe/jev-1.13-20260917"


def _answer(name: str, answer: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"model": SERVED, "answers": {name: answer}, **top}


# input text -> what the server answers (status, body, headers)
CHOICE: dict[str, Reply] = {
    "ok": (200, _answer("team", {"type": "choice", "choice": "Billing",
                                 "probabilities": {"Billing": 0.7, "shipping": 0.2,
                                                   "technical": 0.1}},
                        id="req-1", provider="openrouter/x",
                        usage={"input_tokens": 10, "output_tokens": 2, "cost": 0.001,
                               "cached": "n/a", "reasoning": 3}), {}),
    "header id": (200, _answer("team", {"type": "choice", "choice": "shipping",
                                        "probabilities": {"Billing": 0.1, "shipping": 0.8,
                                                          "technical": 0.1}}),
                  {"x-typesafe-request-id": "hdr-7"}),
    "tie": (200, _answer("team", {"type": "choice", "choice": "technical",
                                  "probabilities": {"Billing": 0.45, "shipping": 0.1,
                                                    "technical": 0.45}}), {}),
    "not max": (200, _answer("team", {"type": "choice", "choice": "shipping",
                                      "probabilities": {"Billing": 0.7, "shipping": 0.2,
                                                        "technical": 0.1}}), {}),
    "not sent": (200, _answer("team", {"type": "choice", "choice": "legal",
                                       "probabilities": {"legal": 1.0}}), {}),
    "no probabilities": (200, _answer("team", {"type": "choice", "choice": "Billing"}), {}),
    "wrong type": (200, _answer("team", {"type": "noul", "noul": 0.5}), {}),
    "answer list": (200, _answer("team", [1]), {}),  # type: ignore[arg-type]
    "two questions": (200, {"model": SERVED, "answers": {"team": {}, "other": {}}}, {}),
    "no answers": (200, {"model": SERVED}, {}),
    "no model": (200, {"answers": {"team": {"type": "choice"}}}, {}),
    "empty model": (200, _answer("team", {"type": "choice"}) | {"model": ""}, {}),
    "bad sum": (200, _answer("team", {"type": "choice", "choice": "Billing",
                                      "probabilities": {"Billing": 0.7, "shipping": 0.2,
                                                        "technical": 0.2}}), {}),
    "string prob": (200, _answer("team", {"type": "choice", "choice": "Billing",
                                          "probabilities": {"Billing": "0.7", "shipping": 0.2,
                                                            "technical": 0.1}}), {}),
    "other model": (200, _answer("team", {"type": "choice", "choice": "technical",
                                          "probabilities": {"Billing": 0.0, "shipping": 0.0,
                                                            "technical": 1.0}})
                    | {"model": "kev-0.8b"}, {}),
    "rate limited": (429, {"error": "slow down"}, {}),
    "overloaded": (529, {"error": "busy"}, {}),
    "teapot": (418, {"error": "no"}, {}),
    "garbage": (200, b"{oops", {}),
}  # fmt: skip

NOUL: dict[str, Reply] = {
    "yes": (200, _answer("urgent", {"type": "noul", "noul": 0.8}), {}),
    "edge": (200, _answer("urgent", {"type": "noul", "noul": 1}), {}),
    "half": (200, _answer("urgent", {"type": "noul", "noul": 0.5, "confidence": 0.99}), {}),
    "over": (200, _answer("urgent", {"type": "noul", "noul": 1.2}), {}),
    "string": (200, _answer("urgent", {"type": "noul", "noul": "0.5"}), {}),
    "bool": (200, _answer("urgent", {"type": "noul", "noul": True}), {}),
    "nan": (200, b'{"model": "m", "answers": {"urgent": {"type": "noul", "noul": NaN}}}', {}),
    "missing": (200, _answer("urgent", {"type": "noul"}), {}),
}  # fmt: skip

SCORE: dict[str, Reply] = {
    "ok": (200, _answer("frustration", {"type": "score", "probabilities":
                                        {"0": 0.1, "1": 0.3, "2": 0.6}}), {}),
    "legend": (200, _answer("frustration", {"type": "score", "legend":
                                            {"0": "calm", "1": "frustrated", "2": "very angry"},
                                            "probabilities": {"2": 0.2, "0": 0.5, "1": 0.3}}), {}),
    "bad legend": (200, _answer("frustration", {"type": "score", "legend": {"0": "calm"},
                                                "probabilities": {"0": 1.0, "1": 0, "2": 0}}), {}),
    "padded key": (200, _answer("frustration", {"type": "score", "probabilities":
                                                {"00": 1.0, "1": 0, "2": 0}}), {}),
    "out of range": (200, _answer("frustration", {"type": "score", "probabilities":
                                                  {"0": 0.5, "1": 0, "3": 0.5}}), {}),
    "label keys": (200, _answer("frustration", {"type": "score", "probabilities":
                                                {"calm": 1.0, "frustrated": 0,
                                                 "very angry": 0}}), {}),
    "missing level": (200, _answer("frustration", {"type": "score", "probabilities":
                                                   {"0": 0.5, "1": 0.5}}), {}),
}  # fmt: skip

CONTRACTS = {
    "choice": (
        "decision: {name: team, type: choice, options: [billing, shipping, technical],"
        ' description: "Which team should handle this?"}\n',
        "  label_map: {Billing: billing}\n",
        CHOICE,
    ),
    "noul": (
        'decision: {name: urgent, type: noul, description: "Does this need attention now?"}\n',
        "",
        NOUL,
    ),
    "score": (
        'decision: {name: frustration, type: score, levels: [calm, frustrated, "very angry"]}\n',
        "  instructions: How frustrated is the customer?\n",
        SCORE,
    ),
}


def _state_text(state: Any) -> str:
    return state if isinstance(state, str) else state["text"]


@pytest.mark.parametrize("kind", CONTRACTS)
def test_answers_match_reference(kind, tmp_path, monkeypatch, ours, ref):
    monkeypatch.chdir(tmp_path)
    decision, extra, replies = CONTRACTS[kind]
    inputs = list(replies)
    with canned(lambda body: replies[_state_text(body["state"])], "/v1/systemone") as server:
        Path("c.yaml").write_text(
            f'schema_version: "0.1"\n{decision}backend:\n  provider: systemone\n'
            f"  model: typesafe/jev-1.13\n  url: {server.url}\n  max_retries: 1\n"
            f"  retry_backoff_s: 0.01\n{extra}dataset: cases.jsonl\n"
        )
        Path("cases.jsonl").write_text(
            "".join(
                json.dumps({"id": f"c{i}", "input": text if i % 2 else {"text": text}}) + "\n"
                for i, text in enumerate(inputs)
            )
        )
        a = ours("test", "c.yaml", "-o", "ours.json")
        ours_bodies = list(server.bodies)
        server.bodies.clear()
        b = ref("test", "c.yaml", "-o", "ref.json")
    assert a.exit_code == b.exit_code, (a.stderr, b.stderr)
    mine = json.loads(Path("ours.json").read_text())
    theirs = json.loads(Path("ref.json").read_text())
    assert comparable(mine) == comparable(theirs)
    # the same questions, retries included (429 and 529 are retried once)
    key = lambda body: json.dumps(body, sort_keys=True)  # noqa: E731
    assert sorted(ours_bodies, key=key) == sorted(server.bodies, key=key)
    assert len(ours_bodies) == len(inputs) + sum(
        status in (429, 529) for status, _, _ in replies.values()
    )
    outcome = {r["input"] if isinstance(r["input"], str) else r["input"]["text"]:
               r["result"] or r["error"] for r in mine["results"]}  # fmt: skip
    details = mine["backend"]["details"]
    assert details["protocol"] == "typesafe.systemone/v1"
    if kind == "choice":
        assert ours_bodies[0]["questions"]["team"]["criteria"] == {
            "Billing": None,
            "shipping": None,
            "technical": None,
        }
        ok = outcome["ok"]
        assert ok["probabilities"] == {"billing": 0.7, "shipping": 0.2, "technical": 0.1}
        assert ok["model_version"] == SERVED and ok["model"] == "typesafe/jev-1.13"
        assert ok["metadata"] == {
            "request_id": "req-1",
            "upstream_provider": "openrouter/x",
            "usage": {"input_tokens": 10, "output_tokens": 2, "cost": 0.001},
        }
        assert outcome["header id"]["metadata"] == {"request_id": "hdr-7"}
        assert outcome["tie"]["selected"] == "billing"  # ties go to the first contract label
        assert outcome["rate limited"]["kind"] == "unavailable"
        assert outcome["teapot"]["kind"] == "backend_error"
        assert details["served_models"] == ["kev-0.8b", SERVED]
        assert mine["backend"]["model_version"] is None  # two models answered
    elif kind == "noul":
        assert "criteria" not in ours_bodies[0]["questions"]["urgent"]
        assert outcome["yes"]["probabilities"] == {"yes": 0.8, "no": 0.19999999999999996}
        assert outcome["half"]["confidence"] == 0.5  # the provider's confidence is ignored
        assert outcome["over"]["message"] == "noul answer must be a probability in [0, 1], got 1.2"
    else:
        criteria = [body["questions"]["frustration"]["criteria"] for body in ours_bodies]
        assert criteria[0] == ["calm", "frustrated", "very angry"]
        assert outcome["legend"]["probabilities"] == {
            "calm": 0.5,
            "frustrated": 0.3,
            "very angry": 0.2,
        }
        assert (
            outcome["padded key"]["message"] == "score probabilities key '00' is not a level index"
        )
        assert mine["backend"]["model_version"] == SERVED


def test_noul_labels_reformatted_map_by_position():
    """Label formats (fuzzing) send shown labels; the positive answer is the first shown."""
    from decguard.backends.systemone import SystemOneBackend as RefBackend
    from decguard.backends.systemone import SystemOneSettings as RefSettings
    from decguard.decisions import DecisionSpec as RefSpec

    from decguard_pipeline.backends.systemone import SystemOneBackend, SystemOneSettings
    from decguard_pipeline.core.contract import DecisionSpec

    spec = DecisionSpec("urgent", "noul", ("yes", "no"), "Urgent?")
    mine = SystemOneBackend(SystemOneSettings(url="http://x/"), decision=spec, model="m")
    ref_spec = RefSpec(name="urgent", type="noul", labels=("yes", "no"), description="Urgent?")
    theirs = RefBackend(RefSettings(url="http://x/"), decision=ref_spec, model="m")
    for shown in (("YES", "NO"), ("A) yes", "B) no"), ("yes", "no")):
        got = mine._noul({"noul": 0.75}, shown)
        assert got == theirs._noul({"noul": 0.75}, shown)
        assert got == {shown[0]: 0.75, shown[1]: 0.25}


def test_label_map_is_refused_for_noul(tmp_path, ours, ref):
    path = tmp_path / "c.yaml"
    path.write_text(
        'schema_version: "0.1"\ndecision: {name: u, type: noul, description: "Urgent?"}\n'
        "backend: {provider: systemone, model: m, url: 'http://x/', label_map: {Y: 'yes'}}\n"
    )
    a, b = ours("validate", path), ref("validate", path)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr) == (2, b.stderr)
    assert "label_map does not apply to noul decisions" in a.stderr

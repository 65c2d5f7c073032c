"""Invalid production records of every kind: both CLIs stop with exit code 2 and the same
message, naming the file, the line (``.jsonl``) or record (``.json``) and the field. Values
DecGuard coerces (``"0.5"``, ``1`` for true) are accepted by both, with the same report."""

from __future__ import annotations

import json
import textwrap

import pytest

from decguard_pipeline_tests.support.production_records import CONTRACTS, run_both

GOOD = {
    "id": "r1",
    "decision": "route",
    "probabilities": {"refund": 0.7, "reject": 0.2, "review": 0.1},
    "selected": "refund",
}
P = GOOD["probabilities"]


def rec(**changes):
    out = {**GOOD, **changes}
    return {k: v for k, v in out.items() if v is not DROP}


DROP = object()

INVALID = {
    "unknown field": rec(colour="red"),
    "missing decision": rec(decision=DROP),
    "missing probabilities": rec(probabilities=DROP),
    "missing selected": rec(selected=DROP),
    "decision mismatch": rec(decision="other"),
    "decision not text": rec(decision=5),
    "id null": rec(id=None),
    "id empty": rec(id=""),
    "id number": rec(id=5),
    "probabilities not object": rec(probabilities=[0.7, 0.2, 0.1]),
    "probability missing label": rec(probabilities={"refund": 0.8, "reject": 0.2}),
    "probability unknown label": rec(probabilities={**P, "maybe": 0.0}),
    "probability text": rec(probabilities={**P, "reject": "a lot"}),
    "probability negative": rec(probabilities={"refund": 0.9, "reject": 0.2, "review": -0.1}),
    "probability null": rec(probabilities={**P, "review": None}),
    "probabilities off": rec(probabilities={"refund": 0.7, "reject": 0.2, "review": 0.2}),
    "selected not argmax": rec(selected="reject"),
    "selected not a label": rec(selected="maybe"),
    "selected bool": rec(selected=True),
    "selected float": rec(selected=1.0),
    "confidence mismatch": rec(confidence=0.69),
    "confidence above one": rec(confidence=1.5),
    "confidence null": rec(confidence=None),
    "confidence text": rec(confidence="high"),
    "outcome not a label": rec(outcome="maybe"),
    "outcome bool": rec(outcome=False),
    "outcome_correct disagrees": rec(outcome="reject", outcome_correct=True),
    "outcome_correct text": rec(outcome_correct="perhaps"),
    "latency negative": rec(latency_ms=-1),
    "latency text": rec(latency_ms="slow"),
    "cost negative": rec(cost=-0.5),
    "action unknown": rec(action="escalate"),
    "action fallback, fallback false": rec(action="fallback", fallback=False),
    "fallback true, action accept": rec(action="accept", fallback=True),
    "metadata null": rec(metadata=None),
    "metadata list": rec(metadata=["en"]),
    "timestamp without zone": rec(timestamp="2026-11-02T09:15:00"),
    "timestamp garbage": rec(timestamp="yesterday"),
    "timestamp number": rec(timestamp=1700000000),
    "input number": rec(input=5),
    "input list": rec(input=["a"]),
    "not an object": [1, 2, 3],
    "a string": "record",
}

COERCED = {
    "probabilities as text": rec(probabilities={"refund": "0.7", "reject": "0.2", "review": 0.1}),
    "probability bool": rec(probabilities={"refund": True, "reject": 0, "review": 0}),
    "confidence as text": rec(confidence="0.7"),
    "outcome_correct as 1": rec(outcome="refund", outcome_correct=1),
    "fallback as 'no'": rec(fallback="no", action="accept"),
    "latency as text": rec(latency_ms="12.5"),
    "timestamp with space": rec(timestamp="2026-11-02 09:15:00+01:00"),
    "timestamp basic format": rec(timestamp="20261102T091500Z"),
}


@pytest.fixture
def contract(write):
    return write("c.yaml", textwrap.dedent(CONTRACTS["choice"]))


def _lines(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _same_error(ours, ref, *args):
    a, b = ours("check", *args), ref("check", *args)
    assert (a.exit_code, a.stderr, a.stdout) == (b.exit_code, b.stderr, b.stdout)
    assert a.exit_code == 2
    return a.stderr


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_record_in_jsonl(case, contract, write, ours, ref):
    good = [{**GOOD, "id": f"g{i}"} for i in range(3)]
    path = write("r.jsonl", _lines(*good[:2], INVALID[case], good[2]))
    message = _same_error(ours, ref, contract, "-d", path)
    assert message.startswith(f"error: {path}: line 3: ")


@pytest.mark.parametrize("case", sorted(INVALID)[::4])
def test_invalid_record_in_json(case, contract, write, ours, ref):
    path = write("r.json", json.dumps([{**GOOD, "id": "g"}, INVALID[case]]))
    message = _same_error(ours, ref, contract, "-d", path)
    assert message.startswith(f"error: {path}: record 2: ")


@pytest.mark.parametrize("case", sorted(COERCED))
def test_coerced_values_are_accepted_alike(case, contract, write, ours, ref):
    path = write("r.jsonl", _lines({**GOOD, "id": "g"}, COERCED[case]))
    run_both(ours, ref, contract, "-d", path)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n  \n",
        '{"id": "r1", "decision": "route",\n',
        '{"id": "r1"}}\n',
        "\ufeff" + json.dumps(GOOD) + "\n",
        json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n",
        json.dumps({**GOOD, "id": "record-2"}) + "\n" + json.dumps(rec(id=DROP)) + "\n",
        # a bad record before a JSON error and a duplicate: the first in the file wins
        _lines(GOOD, rec(id="x", selected="review")) + "{oops\n" + _lines(GOOD),
        _lines(GOOD, GOOD) + "{oops\n",
        _lines(GOOD, {**GOOD, "id": "r2"}, {**GOOD, "id": "r2", "decision": "z"}),
    ],
)
def test_file_level_errors(text, contract, write, ours, ref):
    path = write("r.jsonl", "")
    path.write_text(text, encoding="utf-8")
    _same_error(ours, ref, contract, "-d", path)


def test_invalid_utf8_line(contract, tmp_path, ours, ref):
    path = tmp_path / "r.jsonl"
    path.write_bytes(_lines(GOOD).encode() + b'{"id": "\xff"}\n')
    assert "line 2: production dataset is not valid UTF-8" in _same_error(
        ours, ref, contract, "-d", path
    )


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("r.csv", "id\n"),
        ("missing.jsonl", None),
        ("missing.json", None),
        ("r.json", '{"records": []}'),
        ("r.json", "[1,"),
        ("r.json", "[]"),
        ("r.json", '[{"id": "a", "id": "b"}]'),
    ],
)
def test_unreadable_datasets(name, text, contract, write, tmp_path, ours, ref):
    path = tmp_path / name if text is None else write(name, text)
    _same_error(ours, ref, contract, "-d", path)


@pytest.mark.parametrize("value", [["en"], {"x": 1}, float("nan")])
def test_unusable_segment_value_is_reported_after_the_baseline(value, contract, write, ours, ref):
    bad_segment = {**GOOD, "id": "s", "metadata": {"tier": value}}
    path = write("r.jsonl", _lines(GOOD, bad_segment))
    assert "record 's': metadata.tier" in _same_error(ours, ref, contract, "-d", path)
    # a broken baseline is reported first, as DecGuard loads it before building segments
    broken = write("b.jsonl", _lines(rec(selected="review")))
    assert "b.jsonl: line 1" in _same_error(ours, ref, contract, "-d", path, "--baseline", broken)


def test_missing_dataset_option(contract, ours, ref):
    a, b = ours("check", contract), ref("check", contract)
    assert a.exit_code == b.exit_code == 2

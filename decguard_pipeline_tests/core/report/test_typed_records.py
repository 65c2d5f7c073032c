"""The typed path of report verification (``typed_records``) accepts what the plain-dict path
accepts and builds the same report; anything off goes the other way, which words it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from decguard_pipeline.core import json_limits
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.report import typed_records, verify
from decguard_pipeline_tests.support.golden_cases import write_inputs


def _both_ways(path: Path, monkeypatch: pytest.MonkeyPatch):
    """(typed report, report of the other paths), the typed path switched off for the second."""

    def not_here(*args):
        raise AssertionError("the typed path let this report go the other way")

    with monkeypatch.context() as patch:
        patch.setattr(verify, "_checked_columns", not_here)
        typed = verify.load_report(path)
    with monkeypatch.context() as patch:
        patch.setattr(typed_records, "decode", lambda raw: None)
        plain = verify.load_report(path)
    return typed, plain


def _same(a, b) -> None:
    assert a.document == b.document
    x, y = a.results, b.results
    lists = ("case_ids", "inputs", "expected", "metadata", "model", "model_version",
             "result_metadata", "error_kind", "error_message", "backend", "provider")  # fmt: skip
    for name in lists:
        assert getattr(x, name) == getattr(y, name), name
    for name in ("probs", "selected", "confidence", "latency_ms"):
        np.testing.assert_array_equal(getattr(x, name), getattr(y, name))


@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_generated_reports_load_the_same_both_ways(seed, tmp_path, monkeypatch, ours):
    monkeypatch.chdir(tmp_path)
    contract, _, _ = write_inputs(tmp_path, seed)
    if ours("test", contract.name, "-o", "r.json").exit_code == 2:
        return
    raw = Path("r.json").read_bytes()
    assert typed_records.decode(raw) is not None  # the typed path is the one taken
    typed, plain = _both_ways(Path("r.json"), monkeypatch)
    _same(typed, plain)


def _report(tmp_path: Path, monkeypatch, ours) -> dict:
    monkeypatch.chdir(tmp_path)
    contract, _, _ = write_inputs(tmp_path, 1)
    assert ours("test", contract.name, "-o", "r.json").exit_code in (0, 1)
    return json.loads(Path("r.json").read_text())


def test_big_integers_and_digit_runs_in_strings_stay_on_the_typed_path(tmp_path, monkeypatch, ours):
    doc = _report(tmp_path, monkeypatch, ours)
    doc["dataset"]["hash"] = "sha256:" + "0" * 64
    doc["results"][0]["metadata"] = {"big": 2**70}
    Path("r.json").write_text(json.dumps(doc))
    decoded = typed_records.decode(Path("r.json").read_bytes())
    assert decoded.shallow  # a big integer is a Shallow value
    assert decoded.records[0].metadata == {"big": 2**70}  # exact, as the standard library reads it
    typed, plain = _both_ways(Path("r.json"), monkeypatch)
    _same(typed, plain)
    assert typed.results.metadata[0] == {"big": 2**70}


def test_repeated_key_keeps_its_last_value_like_the_standard_library(tmp_path, monkeypatch, ours):
    doc = _report(tmp_path, monkeypatch, ours)
    text = json.dumps(doc)
    first = doc["results"][0]
    # the record's case id given twice, a wrong one first: the last one counts
    old = f'"results": [{{"case_id": {json.dumps(first["case_id"])}'
    assert text.count(old) == 1
    new = '"results": [{"case_id": "nobody", ' + old[len('"results": [{') :]
    Path("r.json").write_text(text.replace(old, new))
    records = typed_records.decode(Path("r.json").read_bytes()).records
    assert records[0].case_id == first["case_id"]
    typed, plain = _both_ways(Path("r.json"), monkeypatch)
    _same(typed, plain)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["results"][0].update(expected="not-a-label"),
        lambda d: d["results"][0].update(error={"kind": "timeout", "message": "x"}),
        lambda d: d["results"][0]["result"].update(case_id="other"),
        lambda d: d["results"][1].update(case_id=d["results"][0]["case_id"]),
        lambda d: d["results"][0]["result"].update(confidence=0.123),
        lambda d: d["results"][0]["result"].update(provider="elsewhere"),
    ],
    ids=["expected", "result and error", "result id", "duplicate id", "confidence", "provider"],
)
def test_what_the_typed_path_refuses_is_worded_by_the_other_paths(
    edit, tmp_path, monkeypatch, ours
):
    doc = _report(tmp_path, monkeypatch, ours)
    edit(doc)
    Path("r.json").write_text(json.dumps(doc))
    with pytest.raises(ReportError) as typed:
        verify.load_report("r.json")
    with monkeypatch.context() as patch, pytest.raises(ReportError) as plain:
        patch.setattr(typed_records, "decode", lambda raw: None)
        verify.load_report("r.json")
    assert str(typed.value) == str(plain.value)


def test_nan_goes_the_other_way(tmp_path, monkeypatch, ours):
    doc = _report(tmp_path, monkeypatch, ours)
    text = json.dumps(doc).replace('"latency_ms": ', '"latency_ms": NaN, "x": ', 1)
    Path("r.json").write_text(text)
    assert typed_records.decode(Path("r.json").read_bytes()) is None


def _outcome(path: str) -> str:
    try:
        return repr(verify.load_report(path).document)
    except ReportError as exc:
        return str(exc)


@pytest.mark.parametrize("inner", ["0", "", "{}"], ids=["number", "empty array", "empty object"])
@pytest.mark.parametrize("where", ["result metadata", "record metadata", "input", "details"])
def test_nesting_is_measured_on_the_values_as_on_the_bytes(
    where, inner, tmp_path, monkeypatch, ours
):
    """Around the parser's limit (200 arrays and objects), in each place a report holds free
    JSON, ending in a value or in an empty array or object (which holds nothing deeper): the
    typed path refuses exactly what ``json_limits.too_deep`` refuses, in its words."""
    doc = _report(tmp_path, monkeypatch, ours)
    first = doc["results"][0]
    place = {
        "result metadata": lambda: first["result"],
        "record metadata": lambda: first,
        "input": lambda: first,
        "details": lambda: doc["backend"],
    }[where]()
    key = "input" if where == "input" else "details" if where == "details" else "metadata"
    place[key] = {"deep": "MARK"}
    text = json.dumps(doc)
    refused = []
    for depth in (194, 195, 196, 197, 198, 199):
        nested = "[" * depth + inner + "]" * depth
        Path("r.json").write_text(text.replace('"MARK"', nested, 1))
        raw = Path("r.json").read_bytes()
        decoded = typed_records.decode(raw)
        within = typed_records.nested_within(decoded, json_limits.PARSER_DEPTH)
        assert within == (json_limits.too_deep(raw) is None), depth
        typed = _outcome("r.json")
        with monkeypatch.context() as patch:
            patch.setattr(typed_records, "decode", lambda raw: None)
            plain = _outcome("r.json")
        assert typed == plain, depth
        refused.append("recursion limit exceeded" in typed)
    assert refused[0] is False and refused[-1] is True  # the limit lies within the range

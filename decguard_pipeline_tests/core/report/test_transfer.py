"""A loaded report sent between processes (``transfer``, used by ``diff``'s two loads) comes
back exactly as pickle gives it back: every value of the same type and bits, every array of
the same dtype, shape and bytes; what MessagePack cannot carry goes as pickle."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from decguard_pipeline.core.report import transfer, verify
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline_tests.support.golden_cases import write_inputs


def _identical(a: Any, b: Any, where: str = "") -> None:
    """Equal and of the same types throughout (``1 == 1.0 == True`` is not enough)."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _identical(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _identical(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert (a.dtype, a.shape, a.tobytes()) == (b.dtype, b.shape, b.tobytes()), where
    elif isinstance(a, float):
        assert math.copysign(1.0, a) == math.copysign(1.0, b), where
        assert a == b or (math.isnan(a) and math.isnan(b)), where
    else:
        assert a == b, where


def _same_report(sent: Report, back: Report) -> None:
    expected = pickle.loads(pickle.dumps(sent))  # what the pickled way gives back
    _identical(expected.stored, back.stored, "stored")
    for name in transfer._FIELDS:
        _identical(getattr(expected.results, name), getattr(back.results, name), name)
    assert expected.results.spec == back.results.spec
    _identical(expected.results._cache, back.results._cache, "_cache")
    assert (back.extensions, back.products, back.pending) == ({}, {}, None)


def _loaded(tmp_path: Path, monkeypatch, ours, seed: int, edit=None) -> Report | None:
    monkeypatch.chdir(tmp_path)
    contract, _, _ = write_inputs(tmp_path, seed)
    if ours("test", contract.name, "-o", "r.json").exit_code == 2:
        return None
    if edit is not None:
        doc = json.loads(Path("r.json").read_text(encoding="utf-8"))
        edit(doc)
        Path("r.json").write_text(json.dumps(doc), encoding="utf-8")
    report = verify.load_report(Path("r.json"))
    report.results.ok  # noqa: B018 (a cached array, carried too)
    report.results.expected_index  # noqa: B018
    return report


@pytest.mark.parametrize("seed", range(1, 40, 4))
def test_generated_reports_come_back_exactly(seed, tmp_path, monkeypatch, ours):
    report = _loaded(tmp_path, monkeypatch, ours, seed)
    if report is None:
        return
    data = transfer.dumps(report)
    assert data[:1] == b"M"  # the MessagePack way, not pickle
    _same_report(report, transfer.loads(data))


def test_floats_and_integers_keep_their_types(tmp_path, monkeypatch, ours):
    def edit(doc):
        doc["results"][0]["metadata"] = {"f": 1.0, "i": 1, "t": True, "n": None, "neg": -0.0}
        doc["results"][1]["metadata"] = {"nested": [[1, 2.5], {"x": [False]}], "big": 2**63}

    report = _loaded(tmp_path, monkeypatch, ours, 1, edit)
    data = transfer.dumps(report)
    assert data[:1] == b"M"
    back = transfer.loads(data)
    _same_report(report, back)
    assert back.results.metadata[0] == {"f": 1.0, "i": 1, "t": True, "n": None, "neg": -0.0}


def test_an_integer_past_64_bits_goes_as_pickle(tmp_path, monkeypatch, ours):
    def edit(doc):
        doc["results"][0]["metadata"] = {"big": 2**70}

    report = _loaded(tmp_path, monkeypatch, ours, 1, edit)
    data = transfer.dumps(report)
    assert data[:1] == b"P"
    back = transfer.loads(data)
    _same_report(report, back)
    assert back.results.metadata[0] == {"big": 2**70}


def test_a_lone_surrogate_goes_as_pickle(tmp_path, monkeypatch, ours):
    """No report that loads holds one (its JSON is refused); a report made otherwise may."""
    report = _loaded(tmp_path, monkeypatch, ours, 1)
    report.results.metadata[0] = {"text": "\ud800"}
    data = transfer.dumps(report)
    assert data[:1] == b"P"
    assert transfer.loads(data).results.metadata[0] == {"text": "\ud800"}


def test_pending_pairs_and_extensions_go_as_pickle(tmp_path, monkeypatch, ours):
    report = _loaded(tmp_path, monkeypatch, ours, 1)
    report.extensions["calibration"] = {"ece": 0.1}
    data = transfer.dumps(report)
    assert data[:1] == b"P"
    assert transfer.loads(data).extensions == {"calibration": {"ece": 0.1}}


def test_something_else_is_refused():
    with pytest.raises(TypeError):
        transfer.loads(b"P" + pickle.dumps({"not": "a report"}))


def test_an_array_of_objects_goes_as_pickle(tmp_path, monkeypatch, ours):
    """Its bytes would be pointers into this process."""
    report = _loaded(tmp_path, monkeypatch, ours, 1)
    report.results.latency_ms = report.results.latency_ms.astype(object)
    report.results._cache["objects"] = np.array([{"a": 1}], dtype=object)
    data = transfer.dumps(report)
    assert data[:1] == b"P"
    back = transfer.loads(data)
    assert back.results.latency_ms.dtype == object
    assert back.results._cache["objects"][0] == {"a": 1}


def test_an_answer_that_does_not_read_back_is_loaded_here(tmp_path, monkeypatch, ours):
    """``diff``'s child load (load_both): whatever its bytes are, the parent has the report."""
    from decguard_pipeline.core.report import load_both

    report = _loaded(tmp_path, monkeypatch, ours, 1)

    def unreadable(data):
        raise ValueError("cut short")

    monkeypatch.setattr(transfer, "loads", unreadable)
    again = load_both.ChildLoad(Path("r.json")).result()
    assert again.document == report.document
    assert again.results.case_ids == report.results.case_ids

"""The typed reading of a stored ``properties`` section (``typed_section``, part of the report's
typed decoding) agrees with the strict path: a valid section gives the schema's normalised form
(key order included) and the report verifies to the same document; a tampered one is refused
with the same message (or accepted the same) as when the typed path is off, and as DecGuard
refuses it."""

from __future__ import annotations

import copy
import json
import pickle
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
from pydantic import ValidationError

from decguard_pipeline.core.contract.properties import Properties
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.properties import pair_columns, section_holds, typed_section
from decguard_pipeline.core.properties.schema import PairModel, PropertyRunModel
from decguard_pipeline.core.report import typed_records, verify
from decguard_pipeline.core.report.render import failed_pairs
from decguard_pipeline.core.result_structs import Shallow
from decguard_pipeline_tests.core.properties.test_fast import (
    TOLERANCE,
    _copy,
    _errored,
    _mutate,
    _stored,
)

NAMES = ["refund", "choice", "noul", "score", "wide"]


def _typed(section: dict[str, Any], free: Any) -> Any:
    raw = json.dumps(section).encode()
    return msgspec.json.decode(raw, type=typed_section.TypedSection[free])


@pytest.mark.parametrize("free", [Shallow, Any], ids=["shallow", "any"])
@pytest.mark.parametrize("name", NAMES)
def test_valid_sections_normalise_as_the_schema_does(reports, name, free):
    section, results = _stored(reports[name])
    _assert_normalised_alike(section, free)
    # with errored pairs, redacted metadata, defaults left out
    edited = _errored(section, results, random.Random(name))
    assert '"token": "[REDACTED]"' in _assert_normalised_alike(edited, free)


def _assert_normalised_alike(section: Any, free: Any) -> str:
    """The typed path normalises ``section`` to the strict schema's very JSON; that JSON."""
    strict = PropertyRunModel.model_validate(
        section, context={"probability_tolerance": TOLERANCE}
    ).model_dump(mode="json")
    decoded = _typed(section, free)
    assert typed_section.pairs_hold(decoded.pairs, None, TOLERANCE) is not None
    typed = typed_section.checked(decoded)
    assert typed is not None
    assert typed["pairs"] == []  # made only when read
    typed["pairs"] = typed_section.pair_dicts(decoded.pairs)
    assert typed == strict  # the very values (lists, not tuples), then their order
    assert json.dumps(typed) == json.dumps(strict)
    return json.dumps(typed)


def _outcome(path: Path) -> str:
    try:
        report = verify.load_report(path)
    except ReportError as exc:
        return str(exc)
    return "verified " + json.dumps(report.document)


def _both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, bool]:
    """(outcome with the typed path, outcome without it, whether the typed path took the
    section)."""
    taken: list[bool] = []  # the small parts, then the pairs, accepted
    checked, pairs_hold = typed_section.checked, typed_section.pairs_hold

    def recording(section: Any) -> Any:
        loaded = checked(section)
        taken.append(loaded is not None)
        return loaded

    def holding(pairs: Any, labels: Any, tolerance: float) -> Any:
        held = pairs_hold(pairs, labels, tolerance)
        taken.append(held is not None)
        return held

    with monkeypatch.context() as patch:
        patch.setattr(typed_section, "checked", recording)
        patch.setattr(typed_section, "pairs_hold", holding)
        typed = _outcome(path)
    with monkeypatch.context() as patch:
        patch.setattr(typed_records, "decode", lambda raw: None)
        plain = _outcome(path)
    return typed, plain, taken == [True, True]


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


@pytest.mark.parametrize("name", NAMES)
def test_reports_verify_the_same_with_and_without_the_typed_path(reports, name, monkeypatch):
    typed, plain, taken = _both_ways(reports[name], monkeypatch)
    assert taken
    assert typed.startswith("verified ")
    assert typed == plain


@pytest.mark.parametrize("name", NAMES)
def test_tampered_sections_are_refused_or_accepted_the_same(reports, name, tmp_path, monkeypatch):
    doc = json.loads(reports[name].read_text())
    rng = random.Random(f"typed-section-{name}")
    seen = {"verified": 0, "refused": 0, "typed": 0}
    for attempt in range(50):
        tampered = _copy(doc)
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            _mutate(tampered["properties"], rng)
        typed, plain, taken = _both_ways(_write(tmp_path / "r.json", tampered), monkeypatch)
        assert typed == plain, attempt
        seen["verified" if typed.startswith("verified ") else "refused"] += 1
        seen["typed"] += taken
    # both outcomes occur, and the typed path takes a share of the sections it can
    assert seen["verified"] >= 5 and seen["refused"] >= 20 and seen["typed"] >= 5, seen


def _first(doc: dict[str, Any], *, reduced: bool = False) -> dict[str, Any]:
    pairs = doc["properties"]["pairs"]
    if reduced:
        return next(p for p in pairs if p["reduced"] is not None)
    return next(p for p in pairs if p["result"] is not None)


EDITS = {
    # a wrong type in a property pair
    "sample as text": lambda d: _first(d).update(sample="0"),
    "sample as float": lambda d: _first(d).update(sample=0.0),
    "flipped as number": lambda d: _first(d)["comparison"].update(flipped=0),
    "distance as text": lambda d: _first(d)["comparison"].update(tv_distance="0.0"),
    "distance as bool": lambda d: _first(d)["comparison"].update(tv_distance=False),
    "confidence as bool": lambda d: _first(d)["result"].update(confidence=True),
    "presentation of three": lambda d: _first(d).update(presentation=[["a", "b", "c"]]),
    "unknown property": lambda d: _first(d).update(property="nonsense"),
    "extra field": lambda d: _first(d).update(note="x"),
    # a missing field
    "no latency": lambda d: _first(d)["result"].pop("latency_ms"),
    "no id": lambda d: _first(d).pop("id"),
    "no backend calls": lambda d: _first(d, reduced=True)["reduced"].pop("backend_calls"),
    "no comparison": lambda d: _first(d).update(comparison=None),
    # tampered values
    "distance": lambda d: _first(d)["comparison"].update(tv_distance=0.5),
    "probabilities": lambda d: _first(d)["result"]["probabilities"].update(
        {k: 1.0 / len(_first(d)["result"]["labels"]) for k in _first(d)["result"]["labels"]}
    ),
    "selected": lambda d: _first(d)["result"].update(selected="nope"),
    "result id": lambda d: _first(d)["result"].update(case_id="other"),
    "violations": lambda d: _first(d).update(violations=["made up"]),
    "reduced without violations": lambda d: _first(d, reduced=True).update(violations=[]),
    "summary count": lambda d: d["properties"]["summaries"][0].update(n_transformed=1),
    "contract hash type": lambda d: d["contract"].update(hash=5),
    "deep steps": lambda d: _first(d).update(steps=[{"x": json.loads("[" * 200 + "]" * 200)}]),
}


# pydantic's lax reading, DecGuard's too: "0" and 0.0 are the integer 0, 0 is false, "0.0" and
# false are the float 0.0; the typed path leaves those to it
ACCEPTED = {"sample as text", "sample as float", "flipped as number", "distance as text",
            "distance as bool"}  # fmt: skip


@pytest.mark.parametrize("edit", list(EDITS), ids=list(EDITS))
def test_each_edit_is_judged_as_decguard_judges_it(reports, edit, tmp_path, monkeypatch, ref):
    doc = json.loads(reports["refund"].read_text())
    EDITS[edit](doc)
    path = _write(tmp_path / "r.json", doc)
    typed, plain, taken = _both_ways(path, monkeypatch)
    assert typed == plain
    theirs = ref("report", str(path))
    if edit in ACCEPTED:
        assert not taken
        assert typed.startswith("verified ")
        assert theirs.exit_code in (0, 1)
    else:  # refused, with DecGuard's message (exit code 2 for both: cli.errors)
        assert not typed.startswith("verified ")
        assert theirs.exit_code == 2
        assert typed in theirs.stderr


def test_integers_in_float_fields_read_as_the_schema_reads_them(reports, tmp_path, monkeypatch):
    doc = json.loads(reports["refund"].read_text())
    pair = _first(doc)
    comparison = pair["comparison"]
    for field in ("tv_distance", "js_divergence", "max_abs_delta", "confidence_delta"):
        if comparison[field] == 0.0:
            comparison[field] = 0  # an integer where the schema wants a float
    assert 0 in comparison.values()
    typed, plain, taken = _both_ways(_write(tmp_path / "r.json", doc), monkeypatch)
    assert taken
    assert typed == plain
    assert typed.startswith("verified ")


def _holds_both_ways(section: dict[str, Any], results: Any) -> tuple[bool, bool] | None:
    """Whether the column-wise checks find nothing, reading the typed records and reading
    the normalised dicts; None when the typed path does not take the section."""
    try:
        decoded = _typed(section, Shallow)
    except msgspec.ValidationError:
        return None
    small = typed_section.checked(decoded)
    held = typed_section.pairs_hold(decoded.pairs, None, TOLERANCE)
    if small is None or held is None:
        return None
    enabled = Properties.model_validate(small["config"]).enabled()
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    shared = (small["summaries"], enabled, results, row_of)

    def holds(pairs: Any, skipped: Any, access: Any, found: Any = None) -> bool:
        summaries, enabled, results, row_of = shared
        return section_holds.holds(
            summaries, pairs, skipped, enabled, results, row_of, access, held=found
        )

    typed = holds(decoded.pairs, decoded.skipped, pair_columns.STRUCTS, held)
    plain = holds(typed_section.pair_dicts(decoded.pairs), small["skipped"], pair_columns.DICTS)
    return typed, plain


@pytest.mark.parametrize("name", NAMES)
def test_typed_records_are_checked_as_their_dicts_are(reports, name):
    """The recomputation reads the typed pairs as it reads their dicts: the same verdict on
    every valid section and every tampered one the typed path takes."""
    section, results = _stored(reports[name])
    assert _holds_both_ways(section, results) == (True, True)
    rng = random.Random(f"typed-checks-{name}")
    outcomes = {True: 0, False: 0}
    for attempt in range(60):
        tampered = _copy(section)
        _mutate(tampered, rng)
        both = _holds_both_ways(tampered, results)
        if both is not None:
            assert both[0] == both[1], attempt
            outcomes[both[0]] += 1
    assert outcomes[False] >= 5, outcomes


def test_a_loaded_report_makes_its_pair_dicts_when_read(reports):
    report = verify.load_report(reports["refund"])
    assert report.pending is not None  # verified from the typed records
    shown = report.text_document()
    assert report.pending is not None  # the text does not need them all
    pairs = report.document["properties"]["pairs"]
    assert report.pending is None
    strict = PropertyRunModel.model_validate(
        json.loads(reports["refund"].read_text())["properties"],
        context={"probability_tolerance": TOLERANCE},
    ).model_dump(mode="json")
    assert json.dumps(pairs) == json.dumps(strict["pairs"])
    failed = failed_pairs(report.document["properties"])
    assert failed  # the fuzz report has failing pairs to show
    assert shown["properties"]["pairs"] == failed
    assert {**shown, "properties": None} == {**report.document, "properties": None}


def test_a_pickled_report_carries_its_pairs(reports):
    report = verify.load_report(reports["refund"])
    assert report.pending is not None
    again = pickle.loads(pickle.dumps(report))
    assert again.pending is None
    assert again.document == report.document
    assert len(again.document["properties"]["pairs"]) > 0


def _consistency_edits(pair: dict[str, Any], other: dict[str, Any], rng: random.Random) -> None:
    """One edit of what ``PairModel._consistent`` looks at (``other``: a pair with a reduced
    example to borrow), which may keep the pair consistent or not."""
    error = {"kind": "timeout", "message": "no answer"}
    edit = rng.choice(
        ["no result", "error too", "no comparison", "no violations", "reduced", "case id",
         "errored", "errored with violations", "errored with reduced"]
    )  # fmt: skip
    if edit == "no result":
        pair["result"] = None
    elif edit == "error too":
        pair["error"] = error
    elif edit == "no comparison":
        pair["comparison"] = None
    elif edit == "no violations":
        pair["violations"] = []
    elif edit == "reduced":
        pair["reduced"] = copy.deepcopy(other["reduced"])
        pair["reduced"]["result"]["case_id"] = pair["id"]
    elif edit == "case id":
        if pair["result"] is not None:
            pair["result"]["case_id"] += "x"
    else:  # a well-formed errored pair, then maybe not
        pair.update(result=None, comparison=None, violations=[], reduced=None, error=error)
        if edit == "errored with violations":
            pair["violations"] = ["tv_distance 1 > 0"]
        elif edit == "errored with reduced":
            pair["reduced"] = copy.deepcopy(other["reduced"])


@pytest.mark.parametrize("name", NAMES)
def test_pairs_hold_is_the_pair_models_rules(reports, name):
    """``pairs_hold`` accepts pairs exactly when every one of them validates as the strict
    schema's ``PairModel``, over random edits of what its rules look at: with no errored
    pair and with some."""
    section, _ = _stored(reports[name])
    pairs = section["pairs"]
    shrunk = [p for p in pairs if p["reduced"] is not None]
    if not shrunk:  # a reduced example made of an answered pair, to borrow
        pair = copy.deepcopy(next(p for p in pairs if p["result"] is not None))
        fields = ("steps", "input", "presentation", "result", "comparison")
        pair["reduced"] = {
            **{key: pair[key] for key in fields},
            "violations": ["x"],
            "backend_calls": 1,
        }
        shrunk = [pair]
    answered = [p for p in pairs if p["error"] is None]
    rng = random.Random(name)
    verdicts = set()
    for _ in range(120):
        pool = rng.choice([pairs, answered])  # some errored pairs in it, or none
        edited = copy.deepcopy(rng.sample(pool, k=min(len(pool), 40)))
        for pair in rng.sample(edited, k=rng.choice([0, 1, 1, 2, 3])):
            _consistency_edits(pair, rng.choice(shrunk), rng)
        typed = msgspec.json.decode(json.dumps(edited), type=list[typed_section.TypedPair[Shallow]])
        expected = True
        for pair in edited:
            try:
                PairModel.model_validate(pair, context={"probability_tolerance": TOLERANCE})
            except ValidationError:
                expected = False
        held = typed_section.pairs_hold(typed, None, TOLERANCE) is not None
        assert held == expected, edited
        verdicts.add((expected, any(p["error"] is not None for p in edited)))
    assert len(verdicts) == 4  # held or not, with errored pairs and without

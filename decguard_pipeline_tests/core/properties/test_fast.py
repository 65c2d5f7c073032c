"""The fast path of loading and verifying a stored ``properties`` section (plain-dict checks,
whole-column comparisons) agrees with the strict path (the pydantic schema, then the checks one
pair at a time) on valid sections, on sections that only need normalising, and on tampered
ones: the same normalised section (key order included), the same checks, or the same error.
The column-wise helpers it relies on agree with their one-at-a-time counterparts."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from decguard_pipeline.core.contract.properties import Properties
from decguard_pipeline.core.properties import pair_columns, section_holds
from decguard_pipeline.core.properties import report as section_report
from decguard_pipeline.core.properties.compare import (
    compare,
    judge,
    judged_mask,
    tolerance_violations,
)
from decguard_pipeline.core.properties.fast import load_plain
from decguard_pipeline.core.properties.schema import PairModel, PropertyRunModel
from decguard_pipeline.core.properties.summary import count_violations, property_checks
from decguard_pipeline.core.report import typed_records
from decguard_pipeline.core.report.verify import load_report
from decguard_pipeline.core.result_records import check_result_invariants, results_hold
from decguard_pipeline_tests.core.properties.conftest import _run

TOLERANCE = 1e-3


def _strict(section: Any, results: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Verification as it was before the fast path: the schema, then the checks one by one."""
    normalised = section_report.load_section(section, TOLERANCE)  # not plain_json: strict
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    section_report._check_pairs(normalised, results, row_of)
    section_report._check_context(normalised, results)
    section_report._check_summaries(normalised, len(results))
    return normalised, property_checks(
        normalised["summaries"], Properties.model_validate(normalised["config"])
    )


def _fast(section: Any, results: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    checks = section_report.verify_section(
        section, results, "fuzz", tolerance=TOLERANCE, plain_json=True
    )
    return section, checks


def _copy(value: Any) -> Any:
    """A deep copy of a JSON value (faster than copy.deepcopy)."""
    return json.loads(json.dumps(value))


def _outcome(verify: Any, section: Any, results: Any) -> tuple[Any, ...]:
    try:
        normalised, checks = verify(_copy(section), results)
    except Exception as exc:  # the very exception is what must agree
        return ("error", type(exc).__name__, str(exc), getattr(exc, "lines", None))
    return ("ok", json.dumps(normalised), json.dumps(checks))


def _stored(path: Path) -> tuple[dict[str, Any], Any]:
    """The raw section as JSON gives it, and the report's verified case results."""
    raw = json.loads(path.read_text())["properties"]
    return raw, load_report(path).results


@pytest.mark.parametrize("name", ["refund", "choice", "noul", "score", "wide"])
def test_valid_sections_take_the_fast_path_and_agree(reports, name):
    section, results = _stored(reports[name])
    strict = PropertyRunModel.model_validate(
        section, context={"probability_tolerance": TOLERANCE}
    ).model_dump(mode="json")
    fast = load_plain(copy.deepcopy(section), TOLERANCE)
    assert fast is not None
    assert json.dumps(fast) == json.dumps(strict)
    enabled = Properties.model_validate(fast["config"]).enabled()
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    columns = (fast["summaries"], fast["pairs"], fast["skipped"], enabled, results, row_of)
    assert section_holds.holds(*columns, pair_columns.DICTS)
    assert _outcome(_fast, section, results) == _outcome(_strict, section, results)
    assert _outcome(_fast, section, results)[0] == "ok"


def test_load_plain_never_changes_the_section(reports):
    section, _ = _stored(reports["refund"])
    section["pairs"][0]["result"]["metadata"] = {"api_key": "secret", "note": "kept"}
    section["pairs"][1] = dict(reversed(list(section["pairs"][1].items())))
    before = json.dumps(section)
    loaded = load_plain(section, TOLERANCE)
    assert json.dumps(section) == before
    assert loaded is not None
    assert loaded["pairs"][0]["result"]["metadata"] == {"api_key": "[REDACTED]", "note": "kept"}
    assert list(loaded["pairs"][1]) == list(PairModel.model_fields)


# -- tampering ---------------------------------------------------------------------------


def _locations(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in a JSON value."""
    found: list[tuple[Any, Any]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in list(items):
        found.append((value, key))
        if isinstance(item, dict | list):
            found.extend(_locations(item))
    return found


def _other_type(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() else rng.choice([str(value), [value], None])
    if isinstance(value, int):
        return rng.choice([float(value), value != 0, str(value)])
    if isinstance(value, str):
        return rng.choice([1, [value], {"x": value}, None])
    if isinstance(value, list):
        return rng.choice([{}, "x", [value]])
    if isinstance(value, dict):
        return rng.choice([[], "x", 0])
    return 0.0


def _nudged(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, float):
        return rng.choice([math.nextafter(value, 2.0), value + 1e-9, -value, value * 2, 0.0])
    if isinstance(value, int):
        return rng.choice([value + 1, -value, 0])
    if isinstance(value, str):
        return rng.choice([value + "x", "", value.upper(), "original_error", "refund"])
    return value


OPS = ("delete", "none", "retype", "nudge", "nudge", "nudge", "extra", "reorder", "copy", "swap")


def _mutate(section: dict[str, Any], rng: random.Random) -> None:
    """One random edit somewhere in the section (retried until one applies)."""
    locations = _locations(section)
    while True:
        parent, key = rng.choice(locations)
        value, op = parent[key], rng.choice(OPS)
        if op == "delete":
            del parent[key]
        elif op == "none" and value is not None:
            parent[key] = None
        elif op == "retype":
            parent[key] = _other_type(value, rng)
        elif op == "nudge" and isinstance(value, bool | int | float | str):
            parent[key] = _nudged(value, rng)
        elif op == "extra" and isinstance(value, dict):
            value[rng.choice(["extra", "Api-Key"])] = "s3cret"
        elif op == "reorder" and isinstance(value, dict) and len(value) > 1:
            parent[key] = dict(reversed(list(value.items())))  # valid: the schema reorders
        elif op == "copy" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(value))
        elif op == "swap" and isinstance(parent, list) and len(parent) > 1:
            other = rng.randrange(len(parent))
            parent[key], parent[other] = parent[other], parent[key]
        else:
            continue
        return


@pytest.mark.parametrize("name", ["refund", "choice", "noul", "score", "wide"])
def test_tampered_sections_give_the_strict_outcome(reports, name):
    section, results = _stored(reports[name])
    rng = random.Random(f"fast-path-{name}")
    seen = {"ok": 0, "error": 0}
    for attempt in range(80):
        tampered = _copy(section)
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            _mutate(tampered, rng)
        strict = _outcome(_strict, tampered, results)
        assert _outcome(_fast, tampered, results) == strict, (attempt, strict)
        seen[strict[0]] += 1
    assert seen["ok"] >= 8 and seen["error"] >= 30, seen


def _errored(section: dict[str, Any], results: Any, rng: random.Random) -> dict[str, Any]:
    """A valid section with some pairs turned into backend errors and some metadata, with the
    summaries recomputed: both paths must accept it."""
    section = copy.deepcopy(section)
    for pair in rng.sample(section["pairs"], k=max(1, len(section["pairs"]) // 5)):
        if pair["result"] is None:
            continue
        pair.update(
            result=None,
            comparison=None,
            violations=[],
            reduced=None,
            error={"kind": "timeout", "message": "no answer"},
        )
    for pair in section["pairs"]:
        if pair["result"] is not None and rng.random() < 0.3:
            pair["result"]["metadata"] = {"trace": [1, {"token": "x"}], "n": 2}
            pair["result"].pop("model_version")
            pair.pop("provenance")
    enabled = Properties.model_validate(section["config"]).enabled()
    names = [s["property"] for s in section["summaries"]]
    section["summaries"] = section_report.summarize_all(
        names, enabled, section["pairs"], section["skipped"], len(results)
    )
    return section


@pytest.mark.parametrize("name", ["refund", "choice", "score"])
def test_errored_and_incomplete_pairs_agree(reports, name):
    section, results = _stored(reports[name])
    rng = random.Random(name)
    for _ in range(3):
        edited = _errored(section, results, rng)
        assert load_plain(copy.deepcopy(edited), TOLERANCE) is not None
        fast = _outcome(_fast, edited, results)
        assert fast == _outcome(_strict, edited, results)
        assert fast[0] == "ok"
        assert '"token": "[REDACTED]"' in fast[1]


def test_original_errors_over_http_agree(tmp_path, loopback):
    server = loopback({"seed": 2, "position_bias": 0.2}, labels=("a", "b", "c"))
    cases = [
        {"id": "ok-1", "input": "first case. two sentences"},
        {"id": "status=500", "input": "the original fails"},
        {"id": "ok-2", "input": "third case"},
    ]
    (tmp_path / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    contract = tmp_path / "decguard.yaml"
    contract.write_text(
        'schema_version: "0.1"\n'
        "decision: {name: d, type: choice, options: [a, b, c]}\n"
        f"backend: {{provider: http, url: '{server.url}'}}\n"
        "dataset: cases.jsonl\n"
        "properties:\n"
        "  option_order: {samples: 2, max_tv_distance: 0.05}\n"
        "  whitespace: {max_tv_distance: 0.0}\n"
    )
    path = tmp_path / "fuzz.json"
    _run("fuzz", contract, "-o", path)
    section, results = _stored(path)
    assert any(p["error"] for p in section["pairs"])
    assert _outcome(_fast, section, results) == _outcome(_strict, section, results)
    rng = random.Random(7)
    for _ in range(60):
        tampered = _copy(section)
        _mutate(tampered, rng)
        assert _outcome(_fast, tampered, results) == _outcome(_strict, tampered, results)


@pytest.fixture
def plain_loads(monkeypatch) -> list[bool]:
    """Whether each fast load during the test gave a section (True) or gave up (False)."""
    seen: list[bool] = []

    def recording(section: Any, tolerance: float) -> dict[str, Any] | None:
        loaded = load_plain(section, tolerance)
        seen.append(loaded is not None)
        return loaded

    monkeypatch.setattr(section_report, "load_plain", recording)
    return seen


def test_load_report_takes_the_fast_path_when_the_typed_one_is_off(
    reports, plain_loads, monkeypatch
):
    monkeypatch.setattr(typed_records, "decode", lambda raw: None)
    for name in ("refund", "score"):
        assert load_report(reports[name]).document["properties"]["pairs"]
    assert plain_loads == [True, True]


def test_nan_in_a_report_takes_the_strict_path(reports, tmp_path, plain_loads):
    """orjson refuses NaN: the section is loaded strictly, where a NaN in free-form data
    becomes null, as before."""
    doc = json.loads(reports["refund"].read_text())
    doc["properties"]["pairs"][0]["provenance"] = {"weight": float("nan")}
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(doc, indent=2))
    loaded = load_report(path).document["properties"]
    assert loaded["pairs"][0]["provenance"] == {"weight": None}
    assert plain_loads == []


# -- the column-wise helpers -------------------------------------------------------------


def _comparisons(rng: np.random.Generator, m: int, k: int, relation: str, score: bool) -> Any:
    before = rng.dirichlet(np.ones(k), size=m)
    after = rng.dirichlet(np.ones(k), size=m)
    after[: m // 4] = before[: m // 4]  # unchanged answers: every distance exactly 0
    selected = np.argmax(before, axis=1)
    labels = tuple(f"l{i}" for i in range(k))
    return compare(before, after, selected, labels, relation=relation, score=score)


@pytest.mark.parametrize(
    ("prop", "relation", "score"),
    [
        ({"option_order": {"max_tv_distance": 0.2, "max_flip_rate": 0}}, "invariant", False),
        ({"label_format": {"max_js_divergence": 0.05, "max_abs_delta": 0.3}}, "invariant", False),
        ({"whitespace": {"max_confidence_delta": 0.1}}, "invariant", False),
        ({"paraphrase": {"max_tv_distance": 0}}, "invariant", False),
        ({"irrelevant_context": {"max_flip_rate": 0.5}}, "invariant", False),
        (
            {
                "inversion": {
                    "rewrites": [{"find": "a", "replace": "b"}],
                    "max_flip_rate": 0,
                    "max_tv_distance": 0.4,
                }
            },
            "swapped",
            False,
        ),
        ({"monotonic": {"field": "x", "max_level_decrease": 0.1}}, "monotonic", True),
        (
            {"monotonic": {"field": "x", "direction": "decreasing", "max_flip_rate": 0}},
            "monotonic",
            True,
        ),
    ],
)
def test_column_wise_judging_matches_judge(prop, relation, score):
    config = next(iter(Properties.model_validate(prop).enabled().values()))
    rng = np.random.default_rng(11)
    k = 2 if relation == "swapped" else 4
    computed = _comparisons(rng, 400, k, relation, score)
    records = computed.records()
    mask = judged_mask(config, computed)
    assert mask.tolist() == [bool(judge(config, r)) for r in records]
    assert pair_columns.judged(config, computed) == [judge(config, r) for r in records]
    expected = sum(1 for r in records if tolerance_violations(config, r))
    assert count_violations(config, records) == expected
    assert computed.values() == [tuple(r.values()) for r in records]


def _result(rng: random.Random) -> dict[str, Any]:
    labels = ["x", "y", "z"]
    weights = [rng.random() for _ in labels]
    probabilities = {
        label: w / math.fsum(weights) for label, w in zip(labels, weights, strict=True)
    }
    best = max(labels, key=lambda label: probabilities[label])
    return {
        "labels": labels,
        "probabilities": probabilities,
        "selected": best,
        "confidence": probabilities[best],
    }


def _broken(result: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    result = copy.deepcopy(result)
    probabilities = result["probabilities"]
    label = rng.choice(result["labels"])
    edit = rng.randrange(12)
    if edit == 0:
        probabilities[label] = int(probabilities[label] > 0.5)
    elif edit == 1:
        probabilities[label] = True
    elif edit == 2:
        probabilities[label] = float(rng.choice(["nan", "inf", "-inf"]))
    elif edit == 3:
        probabilities[label] = -probabilities[label]
    elif edit == 4:
        probabilities[label] += rng.choice([1e-9, 2e-3, 0.5])
    elif edit == 5:
        result["probabilities"] = dict(reversed(list(probabilities.items())))
    elif edit == 6:
        result["labels"] = [*result["labels"][:2], result["labels"][0]]
    elif edit == 7:
        result["selected"] = label
    elif edit == 8:
        result["confidence"] = math.nextafter(result["confidence"], 0.0)
    elif edit == 9:  # a tie: the first label listed wins
        result["probabilities"] = {"x": 0.4, "y": 0.4, "z": 0.2}
        result.update(selected=rng.choice(["x", "y"]), confidence=0.4)
    elif edit == 10:
        probabilities[label] = 10**400
    else:
        result["probabilities"] = {"x": 1, "y": 0, "z": 0}
        result.update(selected="x", confidence=1.0)
    return result


def _invariants_hold(result: dict[str, Any]) -> bool:
    try:
        return check_result_invariants(result, TOLERANCE) is None
    except OverflowError:  # a number no float holds (the schema refuses it before)
        return False


def test_results_hold_matches_the_invariants_one_by_one():
    rng = random.Random(3)
    for _ in range(400):
        batch = [_result(rng) for _ in range(rng.randrange(1, 6))]
        if rng.random() < 0.8:
            index = rng.randrange(len(batch))
            batch[index] = _broken(batch[index], rng)
        one_by_one = all(_invariants_hold(r) for r in batch)
        assert results_hold(batch, TOLERANCE) == one_by_one, batch
        floats_only = one_by_one and all(
            type(v) is float for r in batch for v in r["probabilities"].values()
        )
        assert results_hold(batch, TOLERANCE, floats=True) == floats_only, batch

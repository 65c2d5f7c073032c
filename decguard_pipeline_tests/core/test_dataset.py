"""Golden datasets (§3) load as decguard==0.1.1 loads them: ids, inputs, labels, metadata,
hash and counts; the fast path for plain cases and the pydantic path agree."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.dataset import load_dataset
from decguard_pipeline.core.errors import DatasetError
from decguard_pipeline_tests.support.golden_cases import generate

SPEC = DecisionSpec("d", "score", ("1", "2", "3", "low"))


def _both(path: Path, spec: DecisionSpec = SPEC) -> tuple[Any, Any]:
    from decguard.datasets import load_dataset as ref_load
    from decguard.decisions import DecisionSpec as RefSpec
    from decguard.errors import DatasetError as RefDatasetError

    try:
        data = load_dataset(path, spec)
        mine: Any = (
            data.hash,
            data.n_labeled,
            list(zip(data.ids, data.inputs, data.expected, data.metadata, strict=True)),
        )
    except DatasetError as exc:
        mine = str(exc)
    try:
        ref = ref_load(path, RefSpec(name=spec.name, type=spec.type, labels=spec.labels))
        theirs: Any = (
            ref.hash,
            ref.n_labeled,
            [(c.id, c.input, c.expected, c.metadata) for c in ref.cases],
        )
    except RefDatasetError as exc:
        theirs = str(exc)
    return mine, theirs


CASES: dict[str, str] = {
    "ids given and generated": (
        '{"input": "a"}\n\n   \n{"id": "x", "input": "b"}\n{"input": "c", "expected": 2}\n'
    ),
    "generated ids count non-blank lines": '\n\n{"input": "a"}\n\n{"input": "b"}\n',
    "int and string labels": (
        '{"input": "a", "expected": 1}\n{"input": "b", "expected": "low"}\n'
        '{"input": "c", "expected": null}\n'
    ),
    "object inputs and metadata": (
        '{"input": {"text": "t", "n": [1, 2.5, null, true], "ü": {"é": 1}},'
        ' "metadata": {"team": "x", "nested": {"a": [1]}}}\n'
    ),
    "empty input string": '{"input": ""}\n',
    "unicode ids": '{"id": "ünï 1", "input": "a"}\n{"id": "ünï 2", "input": "b"}\n',
    "crlf lines": '{"input": "a"}\r\n{"input": "b"}\r\n',
    "nan and big numbers in input": (
        '{"input": {"x": NaN, "y": 1e400, "z": 123456789012345678901}}\n'
    ),
    "expected zero-padded int": '{"input": "a", "expected": 01}\n',
    "expected float": '{"input": "a", "expected": 2.0}\n',
    "expected bool": '{"input": "a", "expected": false}\n',
    "metadata null": '{"input": "a", "metadata": null}\n',
    "id null": '{"id": null, "input": "a"}\n',
    "top-level array line": '[{"input": "a"}]\n',
    "bom": '\ufeff{"input": "a"}\n',
    "trailing garbage": '{"input": "a"} x\n',
    "two objects on a line": '{"input": "a"}{"input": "b"}\n',
    "duplicate nested key": '{"input": {"a": 1, "a": 2}}\n',
    "unknown label after valid cases": (
        '{"input": "a", "expected": 1}\n{"input": "b", "expected": 9}\n'
    ),
    "duplicate id later": '{"id": "a", "input": "x"}\n{"input": "y"}\n{"id": "a", "input": "z"}\n',
    "bad case then bad json": '{"input": 5}\n{oops\n',
}


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
@pytest.mark.parametrize("name", CASES)
def test_cases_match_reference(name, suffix, tmp_path):
    text = CASES[name]
    if suffix == ".json":  # the same cases as a JSON list (lines that parse)
        items = []
        for line in text.splitlines():
            try:
                items.append(json.loads(line))
            except ValueError:
                items.append("not json")
        text = json.dumps([i for i in items if i != "not json"] or [], ensure_ascii=False)
    path = tmp_path / f"cases{suffix}"
    path.write_text(text, encoding="utf-8")
    mine, theirs = _both(path)
    assert mine == theirs


@pytest.mark.parametrize("seed", range(0, 60, 5))
def test_generated_datasets_match_reference(seed, tmp_path):
    contract, cases, suffix = generate(seed)
    decision = contract["decision"]
    labels = decision.get("options") or decision.get("labels") or decision.get("levels")
    spec = DecisionSpec("d", decision["type"], tuple(str(x) for x in labels or ("yes", "no")))
    path = tmp_path / f"cases{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(cases, ensure_ascii=False))
    else:
        path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases))
    mine, theirs = _both(path, spec)
    assert mine == theirs
    assert mine[0] == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_large_dataset_columns(tmp_path):
    path = tmp_path / "big.jsonl"
    with path.open("w") as out:
        for i in range(20_000):
            case: dict[str, Any] = {"input": f"text {i}"}
            if i % 3:
                case["expected"] = ["1", 2, "low"][i % 3]
            if i % 7 == 0:
                case["id"] = f"id-{i}"
            out.write(json.dumps(case) + "\n")
    data = load_dataset(path, SPEC)
    assert len(data) == 20_000
    assert data.ids[:2] == ["id-0", "case-2"] and data.ids[7] == "id-7"
    assert data.expected[:3] == [None, "2", "low"]
    assert data.n_labeled == sum(1 for i in range(20_000) if i % 3)

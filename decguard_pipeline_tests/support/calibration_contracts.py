"""Contracts whose mock backend answers generated probabilities with known calibration, for the
calibration-extension tests of the CLI, the steps and the diff.

Every case's input carries a unique token (``q0007q``) and the mock has one rule per token with
that case's probabilities (``calibration_data.multiclass_cases``, rounded so the mock accepts
them), so a run reproduces the generated model exactly. A second backend ``candidate`` can
answer other probabilities for the same cases (a diff's second version).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from decguard_pipeline_tests.support.calibration_data import multiclass_cases, sharpen

LABELS = ("low", "mid", "high")


def token(i: int) -> str:
    return f"q{i:04d}q"


def rounded(probs: np.ndarray) -> list[dict[str, float]]:
    """Rows as the mock accepts them (six digits, the last label takes the rest)."""
    out = []
    for row in probs:
        values = [round(float(v), 6) for v in row[:-1]]
        values.append(round(1.0 - sum(values), 6))
        out.append(dict(zip(LABELS, values, strict=True)))
    return out


def _rules(probs: np.ndarray) -> list[dict[str, Any]]:
    return [{"contains": token(i), "probabilities": p} for i, p in enumerate(rounded(probs))]


def generated_model(
    seed: int, n: int, kind: str = "over"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(probabilities, expected, the true distributions)``: ``kind`` as in
    ``multiclass_cases``; the true distributions let a test make a recalibrated or degraded
    second version of the same cases."""
    rng = np.random.default_rng(seed)
    truth, expected = multiclass_cases(rng, n, len(LABELS), "calibrated")
    shown = {"calibrated": truth, "over": sharpen(truth, 0.5), "under": sharpen(truth, 2.0)}
    return shown[kind], expected, truth


def write_contract(
    folder: Path,
    probs: np.ndarray,
    expected: np.ndarray,
    *,
    pipeline: dict[str, Any] | None = None,
    candidate: np.ndarray | None = None,
    top: dict[str, Any] | None = None,
    unlabeled_every: int = 0,
) -> Path:
    """``decguard.yaml`` and ``cases.jsonl`` in ``folder``; ``pipeline``: the contract's
    pipeline section (none: a DecGuard contract); ``candidate``: a second backend's answers;
    ``unlabeled_every``: every such case has no expected label."""
    folder.mkdir(parents=True, exist_ok=True)
    cases = []
    for i, e in enumerate(expected.tolist()):
        case: dict[str, Any] = {"id": f"c{i}", "input": f"message {token(i)}"}
        if not unlabeled_every or i % unlabeled_every:
            case["expected"] = LABELS[e]
        cases.append(case)
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    contract: dict[str, Any] = {
        "schema_version": "0.1",
        "decision": {"name": "grade", "type": "choice", "options": list(LABELS)},
        "backend": {"provider": "mock", "model": "gen-v1", "rules": _rules(probs)},
        "dataset": "cases.jsonl",
        **(top or {}),
    }
    if candidate is not None:
        contract["backends"] = {
            "candidate": {"provider": "mock", "model": "gen-v2", "rules": _rules(candidate)}
        }
    if pipeline is not None:
        contract["pipeline"] = pipeline
    path = folder / "decguard.yaml"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


def labeled_rows(report: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(probabilities, expected index)`` of the labeled, decided cases of a report
    document read from its file, in dataset order (a recomputation independent of the
    pipeline's columns)."""
    labels = report["contract"]["labels"]
    probs, expected = [], []
    for record in report["results"]:
        result = record["result"]
        if result is None or record["expected"] is None:
            continue
        probs.append([result["probabilities"][label] for label in labels])
        expected.append(labels.index(str(record["expected"])))
    return np.array(probs, dtype=np.float64).reshape(-1, len(labels)), np.array(
        expected, dtype=np.int64
    )

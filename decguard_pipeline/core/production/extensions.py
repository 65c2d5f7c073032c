"""What ``check`` adds beyond DecGuard (docs/production.md), as a plain JSON-ready dict that
goes to the sidecar ``<report stem>.pipeline.json``, the text sections after DecGuard's
layout and the warehouse; DecGuard's report is never touched.

* ``outcomes``: how many records still lack an outcome (correctness) or a label outcome.
* ``accuracy_interval``: a Wilson interval on production accuracy, overall and per segment.
* ``label_drift``: total variation and PSI between the current and baseline distributions
  of the selected label.
* ``calibration_by_model_version``: accuracy and ECE per ``model_version``, with the
  baseline's ECE for the same version and the increase.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from decguard_pipeline import PRODUCER_VERSION
from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.metrics import expected_calibration_error, reliability
from decguard_pipeline.core.production.columns import Columns, identity
from decguard_pipeline.core.production.report import ProductionReport
from decguard_pipeline.core.production.segments import groups
from decguard_pipeline.core.production.settings import ProductionExtension
from decguard_pipeline.core.stats import wilson_interval

SIDECAR_VERSION = "0.1"
SIDECAR_SUFFIX = ".pipeline.json"


def sidecar_path(report_path: str | Path) -> Path:
    """``out/check.json`` -> ``out/check.pipeline.json``."""
    path = Path(report_path)
    return path.with_name(path.stem + SIDECAR_SUFFIX)


def settings_of(loaded: LoadedContract) -> ProductionExtension | None:
    pipeline = loaded.contract.pipeline
    return None if pipeline is None else pipeline.production


def pending(columns: Columns, rows: np.ndarray | None = None) -> dict[str, Any]:
    """Records still waiting for their outcome (no correctness known) and for a label."""
    correct = columns.correct if rows is None else columns.correct[rows]
    outcome = columns.outcome if rows is None else columns.outcome[rows]
    total = len(correct)
    waiting = int(np.count_nonzero(correct < 0))
    unlabelled = int(np.count_nonzero(outcome < 0))
    return {
        "total": total,
        "with_correctness": total - waiting,
        "with_outcome": total - unlabelled,
        "pending": waiting,
        "pending_rate": waiting / total if total else None,
        "pending_label": unlabelled,
        "pending_label_rate": unlabelled / total if total else None,
    }


def accuracy_interval(
    columns: Columns, confidence: float, rows: np.ndarray | None = None
) -> dict[str, Any]:
    """Wilson score interval on accuracy over the records whose correctness is known."""
    correct = columns.correct if rows is None else columns.correct[rows]
    known = correct[correct >= 0]
    n, hits = len(known), int(np.count_nonzero(known == 1))
    bounds = wilson_interval(hits, n, confidence)
    return {
        "method": "wilson",
        "confidence": confidence,
        "n": n,
        "correct": hits,
        "accuracy": hits / n if n else None,
        "low": None if bounds is None else bounds[0],
        "high": None if bounds is None else bounds[1],
    }


def label_shares(columns: Columns, n_labels: int) -> tuple[list[int], list[float]]:
    counts = np.bincount(columns.selected.astype(np.int64), minlength=n_labels).tolist()
    total = sum(counts)
    return counts, [c / total for c in counts]


def psi(current: list[float], baseline: list[float], epsilon: float) -> float:
    """Population stability index Σ (p − q)·ln(p/q), an empty share read as ``epsilon``."""
    terms = []
    for p, q in zip(current, baseline, strict=True):
        if p == q:
            terms.append(0.0)
            continue
        p, q = max(p, epsilon), max(q, epsilon)
        terms.append((p - q) * math.log(p / q))
    return math.fsum(terms)


def label_drift(
    columns: Columns, baseline: Columns | None, labels: tuple[str, ...], epsilon: float
) -> dict[str, Any]:
    counts, shares = label_shares(columns, len(labels))
    out: dict[str, Any] = {
        "labels": list(labels),
        "current_counts": counts,
        "current": shares,
        "baseline_counts": None,
        "baseline": None,
        "tv_distance": None,
        "psi": None,
        "psi_epsilon": epsilon,
    }
    if baseline is not None and len(baseline):
        base_counts, base_shares = label_shares(baseline, len(labels))
        out["baseline_counts"] = base_counts
        out["baseline"] = base_shares
        out["tv_distance"] = 0.5 * math.fsum(
            abs(p - q) for p, q in zip(shares, base_shares, strict=True)
        )
        out["psi"] = psi(shares, base_shares, epsilon)
    return out


def _calibration(columns: Columns, rows: np.ndarray, n_bins: int) -> dict[str, Any]:
    correct = columns.correct[rows]
    known = correct >= 0
    confidence = columns.confidence[rows][known]
    hits = correct[known] == 1
    n = int(np.count_nonzero(known))
    return {
        "n": len(rows),
        "n_correctness": n,
        "accuracy": int(np.count_nonzero(hits)) / n if n else None,
        "mean_confidence": math.fsum(confidence.tolist()) / n if n else None,
        "ece": expected_calibration_error(reliability(confidence, hits, n_bins)),
    }


def _by_version(columns: Columns) -> dict[Any, np.ndarray]:
    codes = columns.model_version
    return {
        columns.versions.values[int(code)]: np.flatnonzero(codes == code)
        for code in np.unique(codes).tolist()
    }


def calibration_by_version(
    columns: Columns, baseline: Columns | None, n_bins: int
) -> list[dict[str, Any]]:
    """Per model_version (absent last), its calibration now and in the baseline."""
    current = _by_version(columns)
    before = _by_version(baseline) if baseline is not None else {}
    out = []
    for version in sorted(current, key=lambda v: (v is None, identity(v))):
        entry = {"model_version": version, **_calibration(columns, current[version], n_bins)}
        base = None
        if baseline is not None and version in before:
            base = _calibration(baseline, before[version], n_bins)
        entry["baseline"] = base
        ece, base_ece = entry["ece"], None if base is None else base["ece"]
        entry["ece_increase"] = None if ece is None or base_ece is None else ece - base_ece
        out.append(entry)
    return out


def extension_results(loaded: LoadedContract, report: ProductionReport) -> dict[str, Any]:
    """The sidecar document of a check (computed whether or not the contract asks for the
    CLI output: the Dagster assets always record it)."""
    settings = settings_of(loaded) or ProductionExtension()
    document = report.document
    columns = report.columns
    base = report.baseline
    evaluation = loaded.contract.evaluation
    before = None if base is None else base.columns
    labels = tuple(document["contract"]["labels"])
    baseline_info = None
    if base is not None:
        baseline_info = {k: base.info[k] for k in ("source", "path", "hash", "n_records")}
    segments = []
    for key in loaded.contract.production.segments:
        for value, rows in groups(columns, key):
            segments.append(
                {
                    "key": key,
                    "value": value,
                    "outcomes": pending(columns, rows),
                    "accuracy_interval": accuracy_interval(columns, settings.confidence, rows),
                }
            )
    return {
        "sidecar_version": SIDECAR_VERSION,
        "decguard_version": PRODUCER_VERSION,
        "kind": "production_check",
        "contract": {k: document["contract"][k] for k in ("name", "type", "labels", "hash")},
        "dataset": {k: document["dataset"][k] for k in ("path", "hash", "n_records")},
        "baseline": baseline_info,
        "status": document["status"],
        "settings": settings.model_dump(),
        "outcomes": pending(columns),
        "accuracy_interval": accuracy_interval(columns, settings.confidence),
        "label_drift": label_drift(columns, before, labels, settings.psi_epsilon),
        "calibration_by_model_version": calibration_by_version(
            columns, before, evaluation.calibration_bins
        ),
        "segments": segments,
    }

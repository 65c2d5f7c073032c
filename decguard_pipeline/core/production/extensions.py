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
from typing import Any

import numpy as np

from decguard_pipeline.core.contract import Evaluation, LoadedContract
from decguard_pipeline.core.contract.production import ProductionExtension
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.production.columns import Columns, identity
from decguard_pipeline.core.production.metrics import grouped_metrics
from decguard_pipeline.core.production.report import ProductionReport, version_partition
from decguard_pipeline.core.production.segments import partition
from decguard_pipeline.core.report.sidecar import SIDECAR_VERSION, sidecar_path

# where a check's sidecar goes, for the CLI and the production assets
__all__ = ["extension_results", "settings_of", "sidecar_path"]
from decguard_pipeline.core.stats import wilson_interval


def settings_of(loaded: LoadedContract) -> ProductionExtension | None:
    pipeline = loaded.contract.pipeline
    return None if pipeline is None else pipeline.production


def pending(columns: Columns, groups: np.ndarray | None = None, n: int = 1) -> list[dict[str, Any]]:
    """Per group, records still waiting for their outcome (no correctness known) and for a
    label outcome."""
    g = np.zeros(len(columns), dtype=np.int64) if groups is None else groups
    total = np.bincount(g, minlength=n).tolist()
    waiting = np.bincount(g[columns.correct < 0], minlength=n).tolist()
    unlabelled = np.bincount(g[columns.outcome < 0], minlength=n).tolist()
    return [
        {
            "total": total[i],
            "with_correctness": total[i] - waiting[i],
            "with_outcome": total[i] - unlabelled[i],
            "pending": waiting[i],
            "pending_rate": waiting[i] / total[i] if total[i] else None,
            "pending_label": unlabelled[i],
            "pending_label_rate": unlabelled[i] / total[i] if total[i] else None,
        }
        for i in range(n)
    ]


def accuracy_intervals(
    columns: Columns, confidence: float, groups: np.ndarray | None = None, n: int = 1
) -> list[dict[str, Any]]:
    """Per group, the Wilson score interval on accuracy over records with known
    correctness."""
    g = np.zeros(len(columns), dtype=np.int64) if groups is None else groups
    known = columns.correct >= 0
    sizes = np.bincount(g[known], minlength=n).tolist()
    hits = np.bincount(g[known & (columns.correct == 1)], minlength=n).tolist()
    out = []
    for size, hit in zip(sizes, hits, strict=True):
        bounds = wilson_interval(hit, size, confidence)
        out.append(
            {
                "method": "wilson",
                "confidence": confidence,
                "n": size,
                "correct": hit,
                "accuracy": hit / size if size else None,
                "low": None if bounds is None else bounds[0],
                "high": None if bounds is None else bounds[1],
            }
        )
    return out


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


def _by_version(
    columns: Columns, n_bins: int, measured: list[dict[str, Any]] | None = None
) -> dict[Any, dict[str, Any]]:
    """Calibration per model_version of a record set (``measured``: its metrics per version
    present, when the report already has them)."""
    groups, n = version_partition(columns)
    if measured is None:
        measured = grouped_metrics(columns, Evaluation(calibration_bins=n_bins), groups, n)
    book = columns.versions
    present = np.flatnonzero(np.bincount(columns.model_version, minlength=len(book.values)))
    return {
        book.values[code]: {
            "n": m["counts"]["total"],
            "n_correctness": m["outcomes"]["n"],
            "accuracy": m["outcomes"]["accuracy"],
            "mean_confidence": m["confidence"]["mean"],
            "ece": m["calibration"]["ece"],
        }
        for code, m in zip(present.tolist(), measured, strict=True)
    }


def calibration_by_version(
    columns: Columns,
    baseline: Columns | None,
    n_bins: int,
    measured: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Per model_version (absent last), its calibration now and in the baseline."""
    current = _by_version(columns, n_bins, measured)
    before = _by_version(baseline, n_bins) if baseline is not None else {}
    out = []
    for version in sorted(current, key=lambda v: (v is None, identity(v))):
        entry = {"model_version": version, **current[version], "baseline": before.get(version)}
        base = entry["baseline"]
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
        values, groups = partition(columns, key)
        n = len(values)
        waiting = pending(columns, groups, n)
        intervals = accuracy_intervals(columns, settings.confidence, groups, n)
        for value, outcomes, interval in zip(values, waiting, intervals, strict=True):
            segments.append(
                {"key": key, "value": value, "outcomes": outcomes, "accuracy_interval": interval}
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
        "outcomes": pending(columns)[0],
        "accuracy_interval": accuracy_intervals(columns, settings.confidence)[0],
        "label_drift": label_drift(columns, before, labels, settings.psi_epsilon),
        "calibration_by_model_version": calibration_by_version(
            columns, before, evaluation.calibration_bins, report.by_version
        ),
        "segments": segments,
    }

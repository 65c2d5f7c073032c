"""A Guard Eval Harness (GEH) run directory, file for file, from a guard evaluation.

Teams that evaluate guard classifiers with GEH read its results from files: dashboards and CI
scripts open ``datasets/<name>/metrics.json``, ``summary.json`` and ``manifest.json``. This
module builds the same files from the pipeline's case results, so those scripts (and GEH's own
``geh report``, ``compare`` and ``export``, which rebuild from ``manifest.json`` and the
dataset folders) read a pipeline run as they read a GEH run:

```
DIR/manifest.json                     the run: contract, target, data hashes, drop counts, status
DIR/summary.json                      every dataset's metrics, plus the aggregate over all
DIR/datasets/<suite>/metrics.json     GEH's metric keys, GEH's definitions
DIR/datasets/<suite>/dataset-manifest.json
```

GEH is binary: a sample is unsafe or safe, its score the probability of unsafe. Here the
positive class is the contract's one guarded label (``pipeline.guard.labels``; a ``noul``
decision's positive label by default), the score its probability, a *sample* a case with an
``expected`` label that got a decision. Errored cases are GEH's dropped predictions; their
share of all cases is the drop rate whose status (``normal`` below 5 %, ``warning`` from 5 %
up to and including 20 %, ``partial`` above: GEH's documented table, the contract's
``pipeline.partial_runs`` limits) the manifest records. JSON is written as GEH writes it
(two-space indent, sorted keys), each file atomically, the run manifest last. Definitions:
docs/metrics.md.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from decguard_pipeline.core.atomic_file import atomic_output
from decguard_pipeline.core.errors import ContractError, ReportError
from decguard_pipeline.core.exact import fsum
from decguard_pipeline.core.guard.extension import GuardConfig
from decguard_pipeline.core.guard.metrics import (
    accuracy,
    average_precision,
    false_negative_rate,
    false_positive_rate,
    precision,
    recall,
    roc_auc,
)
from decguard_pipeline.core.guard.partial_runs import (
    NORMAL,
    PARTIAL,
    WARNING,
    drop_rate,
    run_state,
)
from decguard_pipeline.core.guard.thresholds import counts_at
from decguard_pipeline.core.product import PROGRAM, __version__
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.results import CaseResults

# ``geh list metrics``: the names, in GEH's order
METRICS = ("accuracy", "auprc", "auroc", "precision", "recall", "f1", "fpr", "fnr",
           "tp", "tn", "fp", "fn")  # fmt: skip
RATIOS = ("accuracy", "precision", "recall", "f1", "fpr", "fnr", "auroc", "auprc")
SWEEP = tuple(i / 10 for i in range(11))  # GEH's fixed threshold_sweep: 0.0, 0.1, ..., 1.0
# GEH's per-dataset judgment of a run that dropped samples (summary.json, dataset manifests)
JUDGMENT_BELOW = 0.01
DROPPED_IDS_SHOWN = 25  # dropped sample ids a dataset manifest lists
DATASET_FILES = ("metrics.json", "dataset-manifest.json", "predictions.jsonl")
_STATUS_ORDER = {NORMAL: 0, WARNING: 1, PARTIAL: 2}


def positive_label(config: GuardConfig, source: str) -> str:
    """The one guarded label GEH's binary files are about; a ``ContractError`` naming the
    contract file and field when the guard has several."""
    if len(config.guarded) != 1:
        raise ContractError(
            f"{source}: a Guard Eval Harness run is about one positive label, but the guard "
            f"scores {len(config.guarded)} ({', '.join(config.guarded)}); name one in "
            "pipeline.guard.labels"
        )
    return config.guarded[0]


def _f1(p: float | None, r: float | None) -> float | None:
    """GEH's F1: 2PR / (P + R), undefined (None) unless both are defined and P + R > 0,
    i.e. whenever TP = 0."""
    if p is None or r is None or p + r <= 0:
        return None
    return 2 * p * r / (p + r)


def _ratios(tp: int, tn: int, fp: int, fn: int) -> dict[str, Any]:
    p, r = precision(tp, fp), recall(tp, fn)
    return {
        "accuracy": accuracy(tp, fp, tn, fn),
        "precision": p,
        "recall": r,
        "f1": _f1(p, r),
        "fpr": false_positive_rate(fp, tn),
        "fnr": false_negative_rate(fn, tp),
    }


def metrics_document(y_true: np.ndarray, y_score: np.ndarray, threshold: float) -> dict[str, Any]:
    """``metrics.json``: GEH's keys (``count``, the confusion counts at ``threshold``, the
    ratios, AUROC and AUPRC from the raw scores, ``threshold_sweep``) with GEH's definitions;
    an undefined ratio is null, as in GEH."""
    y_true = np.asarray(y_true, dtype=bool)
    y_score = np.asarray(y_score, dtype=np.float64)
    at, *sweep = counts_at(y_true, y_score, (threshold, *SWEEP))
    return {
        "count": len(y_true),
        **_counted(*at),
        "auroc": roc_auc(y_true, y_score),
        "auprc": average_precision(y_true, y_score),
        "threshold_sweep": [
            {"threshold": t, **_counted(*counts)} for t, counts in zip(SWEEP, sweep, strict=True)
        ],
    }


def _counted(tp: int, fp: int, tn: int, fn: int) -> dict[str, Any]:
    """The confusion counts and the ratios GEH computes from them."""
    return {"tp": tp, "tn": tn, "fp": fp, "fn": fn, **_ratios(tp, tn, fp, fn)}


def macro_document(per_dataset: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Each ratio averaged over the datasets, every dataset counting the same; null when
    any dataset leaves it undefined (an average over some of them would hide which)."""
    out: dict[str, float | None] = {}
    for metric in RATIOS:
        values = [d[metric] for d in per_dataset]
        ok = values and all(v is not None for v in values)
        out[metric] = fsum(values) / len(values) if ok else None
    return out


def judgment(dropped: int, total: int) -> str | None:
    """GEH's ``evaluation_judgment`` of a dataset with dropped samples."""
    if dropped <= 0 or total <= 0:
        return None
    return "acceptable_partial" if dropped / total < JUDGMENT_BELOW else "flagged_partial"


@dataclass
class HarnessDataset:
    """One evaluated dataset, as GEH sees it."""

    name: str
    report: Report
    positive: str

    @property
    def results(self) -> CaseResults:
        return self.report.results

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """``(unsafe, unsafe_score)`` of the samples: labeled cases with a decision."""
        r = self.results
        index = r.spec.labels.index(self.positive)
        labeled = r.ok & (r.expected_index >= 0)
        return r.expected_index[labeled] == index, r.probs[labeled, index]

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def dropped(self) -> int:
        return self.total - int(self.results.ok.sum())

    @property
    def dropped_ids(self) -> list[str]:
        ok = self.results.ok
        return [case for case, fine in zip(self.results.case_ids, ok, strict=True) if not fine]

    @property
    def evaluated(self) -> int:
        r = self.results
        return int((r.ok & (r.expected_index >= 0)).sum())

    @property
    def unsafe_count(self) -> int:
        index = self.results.spec.labels.index(self.positive)
        return int((self.results.expected_index == index).sum())


def _dataset_manifest(ds: HarnessDataset, status: str) -> dict[str, Any]:
    """``dataset-manifest.json``: GEH's dataset metadata fields; ``metadata`` holds the counts
    GEH's summary reads and the dataset's hash and drop status."""
    doc = ds.report.document["dataset"]
    metadata: dict[str, Any] = {
        "hash": doc["hash"],
        "evaluated_sample_count": ds.evaluated,
        "unlabeled_sample_count": int(ds.results.ok.sum()) - ds.evaluated,
        "status": status,
    }
    if ds.dropped:  # as GEH: these keys only for a dataset that dropped samples
        ids = ds.dropped_ids
        metadata["dropped_sample_count"] = ds.dropped
        metadata["drop_rate"] = drop_rate(ds.total, ds.dropped)
        metadata["evaluation_judgment"] = judgment(ds.dropped, ds.total)
        metadata["dropped_sample_ids"] = ids[:DROPPED_IDS_SHOWN]
        if len(ids) > DROPPED_IDS_SHOWN:
            metadata["dropped_sample_ids_truncated"] = True
    return {
        "name": ds.name,
        "display_name": ds.name,
        "version": None,
        "source_uri": doc["path"],
        "license": None,
        "splits": ["test"],
        "sample_count": ds.total,
        "unsafe_count": ds.unsafe_count,
        "languages": [],
        "categories": [],
        "input_modalities": ["text"],
        "metric_eligibility": {"binary_classification": True},
        "metadata": metadata,
    }


def _summary_entry(ds: HarnessDataset, metrics: dict[str, Any]) -> dict[str, Any]:
    """A dataset in ``summary.json``, as GEH's summary lists it."""
    entry: dict[str, Any] = {
        "name": ds.name,
        "display_name": ds.name,
        "sample_count": ds.total,
        "unsafe_count": ds.unsafe_count,
        "evaluated_sample_count": ds.evaluated,
        "metrics": metrics,
    }
    said = judgment(ds.dropped, ds.total)
    if said is not None:
        entry["evaluation_judgment"] = said
        entry["note"] = (
            f"{ds.dropped} of {ds.total} samples ({ds.dropped / ds.total:.1%}) could not be "
            "scored and were excluded from metrics"
        )
    return entry


@dataclass
class HarnessRun:
    """The documents of a run directory by relative path, in writing order (the manifest
    last: a reader that finds it finds every other file of the run)."""

    documents: dict[str, dict[str, Any]]

    @property
    def datasets(self) -> list[str]:
        return [p.split("/")[1] for p in self.documents if p.endswith("/metrics.json")]

    @property
    def manifest(self) -> dict[str, Any]:
        return self.documents["manifest.json"]

    def write(self, directory: str | Path) -> Path:
        """Every file, each atomically (core.atomic_file); dataset folders of an earlier run
        in the same directory that this run has not are removed (their GEH files only), so
        that GEH's rebuild from the folders sees this run alone."""
        directory = Path(directory)
        try:
            for relative, document in self.documents.items():
                if relative == "manifest.json":
                    _remove_stale(directory / "datasets", set(self.datasets))
                with atomic_output(directory / relative) as out:
                    out.write(dump(document).encode("utf-8"))
        except OSError as exc:
            where = exc.filename or directory
            raise ReportError(
                f"{where}: cannot write Guard Eval Harness run: {exc.strerror or exc}"
            ) from exc
        return directory


def dump(document: Any) -> str:
    """JSON as GEH writes it: two-space indent, sorted keys, no final newline."""
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False)


def _remove_stale(datasets: Path, keep: set[str]) -> None:
    if not datasets.is_dir():
        return
    for folder in datasets.iterdir():
        if folder.name in keep or not folder.is_dir() or folder.is_symlink():
            continue
        if not (folder / "metrics.json").is_file():
            continue  # not a GEH dataset folder: not ours to remove
        for name in DATASET_FILES:
            (folder / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # other files in it: they stay, and so does it
            os.rmdir(folder)


def folder_name(name: str) -> str:
    """A dataset's folder, as GEH names it."""
    return name.replace("/", "__")


def harness_run(
    evaluated: Sequence[tuple[str, Report]],
    config: GuardConfig,
    *,
    target: str,
    source: str,
) -> HarnessRun:
    """The run directory's documents for ``(dataset name, DecGuard report)`` pairs in
    evaluation order (the main dataset first), at the guard's threshold; ``target``: the
    evaluated target (``backend@model_version``); ``source``: the contract file, for errors.
    The reports' contract, backend, datasets and ``created_at`` fill the manifest."""
    positive = positive_label(config, source)
    names = [folder_name(name) for name, _ in evaluated]
    if len(set(names)) != len(names):
        raise ContractError(
            f"{source}: two evaluated datasets would share a Guard Eval Harness folder "
            f"({', '.join(names)}); rename the suite named like another"
        )
    datasets = [
        HarnessDataset(name, report, positive)
        for name, (_, report) in zip(names, evaluated, strict=True)
    ]
    threshold = config.guard.threshold
    limits = config.partial_runs
    documents: dict[str, dict[str, Any]] = {}
    per_dataset, entries, listed, warnings = [], [], [], []
    statuses = []
    for ds in datasets:
        metrics = metrics_document(*ds.columns(), threshold)
        rate = drop_rate(ds.total, ds.dropped)
        status = run_state(rate, warn_from=limits.warn_from, partial_above=limits.partial_above)
        statuses.append(status)
        documents[f"datasets/{ds.name}/metrics.json"] = metrics
        documents[f"datasets/{ds.name}/dataset-manifest.json"] = _dataset_manifest(ds, status)
        per_dataset.append(metrics)
        entries.append(_summary_entry(ds, metrics))
        dataset = ds.report.document["dataset"]
        listed.append(
            {
                "name": ds.name,
                "path": dataset["path"],
                "hash": dataset["hash"],
                "sample_count": ds.total,
                "unsafe_count": ds.unsafe_count,
                "evaluated_sample_count": ds.evaluated,
                "dropped_sample_count": ds.dropped,
                "drop_rate": rate,
                "status": status,
            }
        )
        if ds.dropped:
            warnings.append(
                f"dropped {ds.dropped} of {ds.total} samples ({rate:.2%}) from dataset "
                f"{ds.name} after adapter errors"
            )
    pooled = [ds.columns() for ds in datasets]
    micro = metrics_document(
        np.concatenate([y for y, _ in pooled]), np.concatenate([s for _, s in pooled]), threshold
    )
    first = datasets[0].report.document
    backend, contract = first["backend"], first["contract"]
    status = max(statuses, key=_STATUS_ORDER.__getitem__)
    run_name = f"{contract['name']}-{target}"
    total = sum(ds.total for ds in datasets)
    dropped = sum(ds.dropped for ds in datasets)
    documents["summary.json"] = {
        "run_name": run_name,
        "status": status,
        "threshold": threshold,
        "tool_version": __version__,
        "adapter": backend["provider"],
        "model_name": backend["model"],
        "dataset_count": len(datasets),
        "datasets": entries,
        "aggregate": {"micro": micro, "macro": macro_document(per_dataset)},
    }
    documents["manifest.json"] = {
        "tool": PROGRAM,
        "tool_version": __version__,
        "run_name": run_name,
        "status": status,
        "created_at": first["created_at"],
        "contract": {"name": contract["name"], "hash": contract["hash"], "path": contract["path"]},
        "target": target,
        # GEH's model adapter is what the pipeline calls the backend's provider
        "model": {"adapter": backend["provider"], "model_name": backend["model"]},
        "adapter_capabilities": {"adapter_name": backend["provider"]},
        "backend": backend["name"],
        "model_version": backend["model_version"],
        "threshold": threshold,
        "positive_label": positive,
        "partial_runs": {"warn_from": limits.warn_from, "partial_above": limits.partial_above},
        "sample_count": total,
        "dropped_sample_count": dropped,
        "drop_rate": drop_rate(total, dropped),
        "datasets": listed,
        "warnings": warnings,
    }
    return HarnessRun(documents)

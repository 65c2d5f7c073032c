"""Rows for the warehouse from core objects, and back (exact round trip of case results)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from decguard_pipeline.core.contract import DecisionSpec, LoadedContract
from decguard_pipeline.core.dataset import Dataset
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.warehouse.rows.base import input_text, to_json


def _const(value: Any, n: int, type_: pa.DataType) -> pa.Array:
    return pa.array([value] * n, type=type_)


def case_results_table(
    results: CaseResults,
    *,
    contract: str,
    target: str,
    run_id: str,
    recorded_at: datetime,
    model_version: str | None,
) -> pa.Table:
    """One row per case: the full distribution, selected label, confidence, latency, error."""
    n, k = len(results), len(results.labels)
    labels = list(results.labels)
    ok = results.ok
    exp = results.expected_index
    flat = results.probs.reshape(-1)
    values = pa.array(np.where(np.isnan(flat), 0.0, flat))
    offsets = pa.array(np.arange(0, (n + 1) * k, k, dtype=np.int32))
    mask = pa.array(~ok)
    probs = pa.ListArray.from_arrays(offsets, values, mask=mask)
    keys = pa.array(labels * n, type=pa.string())
    probabilities = pa.MapArray.from_arrays(offsets, keys, values, mask=mask)
    selected_idx = results.selected.tolist()
    selected = [labels[s] if s >= 0 else None for s in selected_idx]
    correct = np.where(ok & (exp >= 0), results.selected == exp, False)
    correct_mask = ~(ok & (exp >= 0))
    return pa.table(
        {
            "contract": _const(contract, n, pa.string()),
            "target": _const(target, n, pa.string()),
            "run_id": _const(run_id, n, pa.string()),
            "recorded_at": _const(recorded_at, n, pa.timestamp("us", "UTC")),
            "backend": _const(results.backend, n, pa.string()),
            "model_version": _const(model_version, n, pa.string()),
            "position": pa.array(np.arange(n, dtype=np.int64)),
            "case_id": pa.array(results.case_ids, pa.string()),
            "input_text": pa.array([input_text(v) for v in results.inputs], pa.string()),
            "input_json": pa.array([to_json(v) for v in results.inputs], pa.string()),
            "expected": pa.array(results.expected, pa.string()),
            "metadata_json": pa.array([to_json(m) for m in results.metadata], pa.string()),
            "labels": _const(labels, n, pa.list_(pa.string())),
            "probs": probs,
            "probabilities": probabilities,
            "selected": pa.array(selected, pa.string()),
            "confidence": pa.array(results.confidence, mask=~ok),
            "correct": pa.array(correct, mask=correct_mask),
            "latency_ms": pa.array(results.latency_ms, mask=~ok),
            "result_model": pa.array(results.model, pa.string()),
            "result_model_version": pa.array(results.model_version, pa.string()),
            "result_metadata_json": pa.array(
                [
                    to_json(m) if ok_i else None
                    for m, ok_i in zip(results.result_metadata, ok.tolist(), strict=True)
                ],
                pa.string(),
            ),
            "error_kind": pa.array(results.error_kind, pa.string()),
            "error_message": pa.array(results.error_message, pa.string()),
            "prompt_tokens": _tokens(results.prompt_tokens, n),
            "completion_tokens": _tokens(results.completion_tokens, n),
        }
    )


def _tokens(counts: np.ndarray | None, n: int) -> pa.Array:
    """Token counts as integers, null where unknown (NaN, or no case reported any)."""
    if counts is None:
        return pa.nulls(n, pa.int64())
    unknown = np.isnan(counts)
    return pa.array(np.where(unknown, 0, counts).astype(np.int64), mask=unknown)


def _token_column(table: pa.Table, name: str) -> np.ndarray | None:
    """A token column back as floats (NaN where null); None when no case has a count (or
    the file was written before the column existed)."""
    if name not in table.column_names or table.column(name).null_count == table.num_rows:
        return None
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)


def case_results_from_table(
    table: pa.Table, spec: DecisionSpec, *, backend: str, provider: str
) -> CaseResults:
    """Columnar results back from a ``case_results`` file (bit-exact)."""
    table = table.sort_by("position")
    n, k = table.num_rows, len(spec.labels)
    index = {label: i for i, label in enumerate(spec.labels)}
    probs_col = table.column("probs").combine_chunks()
    ok = np.asarray(probs_col.is_valid())
    probs = np.full((n, k), np.nan)
    if n:
        flat = np.asarray(probs_col.flatten().to_numpy(zero_copy_only=False), dtype=np.float64)
        starts = np.asarray(probs_col.offsets)[:-1][ok]
        rows = flat[starts[:, None] + np.arange(k)] if len(starts) else np.zeros((0, k))
        probs[ok] = rows
    selected = np.array(
        [index[s] if s is not None else -1 for s in table.column("selected").to_pylist()],
        dtype=np.int64,
    )

    def floats(name: str) -> np.ndarray:
        return np.asarray(
            table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64
        )  # nulls become NaN

    def parsed(name: str) -> list[Any]:
        return [None if t is None else json.loads(t) for t in table.column(name).to_pylist()]

    meta = parsed("result_metadata_json")
    return CaseResults(
        spec=spec,
        backend=backend,
        provider=provider,
        case_ids=table.column("case_id").to_pylist(),
        inputs=parsed("input_json"),
        expected=table.column("expected").to_pylist(),
        metadata=parsed("metadata_json"),
        probs=probs,
        selected=selected,
        confidence=floats("confidence"),
        latency_ms=floats("latency_ms"),
        model=table.column("result_model").to_pylist(),
        model_version=table.column("result_model_version").to_pylist(),
        result_metadata=[m if m is not None else {} for m in meta],
        error_kind=table.column("error_kind").to_pylist(),
        error_message=table.column("error_message").to_pylist(),
        prompt_tokens=_token_column(table, "prompt_tokens"),
        completion_tokens=_token_column(table, "completion_tokens"),
    )


def flat_metrics(metrics: dict[str, Any]) -> dict[str, float | None]:
    """The metrics section as ``name -> value`` (what the ``metrics`` table stores)."""
    c, cls, cal = metrics["counts"], metrics["classification"], metrics["calibration"]
    sel, lat = metrics["selective"] or {}, metrics["latency"]
    flat: dict[str, float | None] = {
        "total": c["total"],
        "succeeded": c["succeeded"],
        "errored": c["errored"],
        "labeled": c["labeled"],
        "error_rate": c["error_rate"],
        "accuracy": cls["accuracy"],
        "macro_f1": cls["macro_f1"],
        "ordinal_mae": cls["ordinal_mae"],
        "ece": cal["ece"],
        "brier": cal["brier"],
        "nll": cal["nll"],
        "calibration_bins": cal["bins"],
        "confidence_threshold": sel.get("threshold"),
        "coverage": sel.get("coverage"),
        "abstention_rate": sel.get("abstention_rate"),
        "selective_accuracy": sel.get("selective_accuracy"),
    }
    for key in ("mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms"):
        flat[f"latency_{key}"] = lat[key]
    return {k: (None if v is None else float(v)) for k, v in flat.items()}


def run_base(keys: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The columns every row of one target's evaluation starts with: the keys, then who
    answered in evaluation ``run`` (its ``runs`` row)."""
    return {**keys, "backend": run["backend"], "model_version": run["model_version"]}


def metrics_rows(metrics: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**base, "metric": k, "value": v} for k, v in flat_metrics(metrics).items()]


def per_label_rows(metrics: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    per_label = metrics["classification"]["per_label"]
    return [{**base, "label": label, **scores} for label, scores in per_label.items()]


def reliability_rows(metrics: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    bins = metrics["calibration"]["reliability"]
    return [{**base, "bin": i, **b} for i, b in enumerate(bins)]


def gate_rows(
    checks: list[dict[str, Any]], base: dict[str, Any], *, source: str
) -> list[dict[str, Any]]:
    return [{**base, "source": source, **check} for check in checks]


def contract_row(loaded: LoadedContract, keys: dict[str, Any]) -> dict[str, Any]:
    c = loaded.contract
    return {
        **keys,
        "contract_hash": loaded.hash,
        "path": str(loaded.path),
        "decision": c.decision.name,
        "decision_type": c.decision.type,
        "labels": list(c.labels),
        "schema_version": c.schema_version,
        "backends": c.backend_names(),
        "providers": [c.backend_config(name).provider for name in c.backend_names()],
        "dataset": c.dataset,
        "contract_json": to_json(c.model_dump(mode="json", exclude_none=False)),
    }


def interval_rows(section: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """The golden intervals section (core.golden.statistics) as rows, one per metric."""
    settings = {k: section[k] for k in ("confidence", "bootstrap_resamples", "seed")}
    return [
        {**base, **settings, "metric": name, **entry}
        for name, entry in section["intervals"].items()
    ]


def intervals_section(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The golden intervals section back from its rows (what the HTML page shows)."""
    first = rows[0]
    return {
        **{k: first[k] for k in ("confidence", "bootstrap_resamples", "seed")},
        "intervals": {
            r["metric"]: {k: r[k] for k in ("value", "low", "high", "method")} for r in rows
        },
    }


def dataset_row(data: Dataset, keys: dict[str, Any]) -> dict[str, Any]:
    return {
        **keys,
        "dataset_hash": data.hash,
        "path": str(data.path),
        "n_cases": len(data),
        "n_labeled": data.n_labeled,
    }


def case_rows(data: Dataset, keys: dict[str, Any]) -> list[dict[str, Any]]:
    """The golden cases as loaded, one row each in dataset order."""
    return [
        {
            **keys,
            "dataset_hash": data.hash,
            "position": i,
            "case_id": case_id,
            "input_text": input_text(value),
            "input_json": to_json(value),
            "expected": expected,
            "metadata_json": to_json(meta),
        }
        for i, (case_id, value, expected, meta) in enumerate(
            zip(data.ids, data.inputs, data.expected, data.metadata, strict=True)
        )
    ]


def run_row(
    keys: dict[str, Any],
    *,
    loaded: LoadedContract,
    data: Dataset,
    results: CaseResults,
    meta: dict[str, Any],
    model_version: str | None,
    health: dict[str, str],
    started_at: datetime,
    wall_s: float,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One evaluation of a target: who answered, on what, how it went, what it used and
    cost (``usage``: the run's usage section, core/usage.py)."""
    return {
        **keys,
        "dagster_run_id": keys["run_id"],
        "backend": meta["name"],
        "provider": meta["provider"],
        "model": meta["model"],
        "model_version": model_version,
        "contract_hash": loaded.hash,
        "dataset_hash": data.hash,
        "dataset_path": str(data.path),
        "n_cases": len(data),
        "n_labeled": data.n_labeled,
        "n_errored": int((~results.ok).sum()),
        "health_status": health["status"],
        "health_detail": health["detail"],
        "backend_details_json": to_json(meta["details"]),
        "started_at": started_at,
        "wall_s": wall_s,
        **usage_columns(usage),
    }


def usage_columns(usage: dict[str, Any] | None) -> dict[str, Any]:
    """The ``runs`` columns of a usage section: tokens (null when no case reported any),
    cost per run and per 1,000 decisions (null without pricing) and the section itself."""
    known = usage is not None and usage["cases_with_usage"] > 0
    return {
        "prompt_tokens": usage["prompt_tokens"] if known else None,
        "completion_tokens": usage["completion_tokens"] if known else None,
        "cost_per_run": None if usage is None else usage["cost_per_run"],
        "cost_per_1000": None if usage is None else usage["cost_per_1000"],
        "usage_json": None if usage is None else to_json(usage),
    }


USAGE_METRICS = ("prompt_tokens", "completion_tokens", "cost_per_run", "cost_per_1000")


def usage_rows(usage: dict[str, Any] | None, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's tokens and cost as ``metrics`` rows (what SQL, the summary and the UI read
    beside accuracy and ECE); none for a run that used nothing worth saying."""
    if usage is None or (not usage["cases_with_usage"] and usage["pricing"] is None):
        return []
    columns = usage_columns(usage)
    return [
        {**base, "metric": name, "value": None if columns[name] is None else float(columns[name])}
        for name in USAGE_METRICS
    ]


def report_row(keys: dict[str, Any], document: dict[str, Any], path: Path) -> dict[str, Any]:
    """A written report file: its verdict, where it is and its sha256 (read back from disk)."""
    return {
        **keys,
        "mode": document["mode"],
        "status": document["status"],
        "exit_code": document["exit_code"],
        "path": str(path),
        "report_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }

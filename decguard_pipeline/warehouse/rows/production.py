"""Rows of the production tables (``warehouse/schema/production.py``) from a checked record
set and a check report, and back: stored, inbox and golden rows as JSON records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from decguard_pipeline.core.errors import DatasetError
from decguard_pipeline.core.production.record_text import (
    json_flags,
    json_floats,
    json_strings,
    string_bytes,
)
from decguard_pipeline.core.production.schema import RECORD_FIELDS
from decguard_pipeline.core.production.segments import shown
from decguard_pipeline.warehouse.rows.base import to_json

SOURCE = "production"  # ``production_checks.source``
BATCH = 50_000


# -- production_records -------------------------------------------------------------------------


def record_json(record: dict[str, Any]) -> str:
    """A normalised record as one JSON object, unknown fields left out (floats exact)."""
    try:
        return orjson.dumps({k: v for k, v in record.items() if v is not None}).decode()
    except orjson.JSONEncodeError:  # integers beyond 64 bits in an input or metadata
        return to_json({k: v for k, v in record.items() if v is not None})


# -- records written elsewhere, as JSON records ---------------------------------------------


def write_inbox_lines(table: pa.Table, label: str, path: Path) -> None:
    """Each inbox row of ``table`` (already in order: batches in write order, rows by
    ``position``) as one record (a JSON line, its non-null fields in record order) in
    ``path``. Built column-wise; an object given as JSON text (``input_json``,
    ``metadata_json``) is parsed and written again by orjson, each distinct text once;
    invalid JSON names the row."""
    n = 0
    with path.open("wb") as out:
        for batch in table.to_batches(BATCH):
            lines = _inbox_lines(pa.Table.from_batches([batch]), label, n)
            out.write(string_bytes(pc.binary_join_element_wise(lines, "\n", "")))
            n += batch.num_rows


def _null() -> pa.Scalar:
    """A null string (made when needed: building a pyarrow scalar imports pandas)."""
    return pa.scalar(None, pa.string())


def _reencoded(texts: pa.Array) -> tuple[pa.Array, tuple[int, str] | None]:
    """JSON texts as orjson writes their values (no text for a JSON null), and the first
    row whose text is not JSON, with the parser's message."""
    encoded = pc.dictionary_encode(texts)
    out: list[str | None] = []
    bad: dict[int, str] = {}
    for index, text in enumerate(encoded.dictionary.to_pylist()):
        try:
            value = json.loads(text)
        except ValueError as exc:
            bad[index] = str(exc)
            out.append(None)
            continue
        out.append(None if value is None else orjson.dumps(value).decode())
    first = None
    if bad:
        codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
        row = int(np.flatnonzero(np.isin(codes, list(bad)))[0])
        first = (row, bad[int(codes[row])])
    return pa.array(out, pa.string()).take(encoded.indices), first


def _inbox_lines(batch: pa.Table, label: str, before: int) -> pa.Array:
    """The JSON record of each inbox row (``before``: rows in earlier batches)."""
    column = lambda name: batch.column(name).combine_chunks()  # noqa: E731
    given = column("input")
    objects, bad_input = _reencoded(pc.if_else(given.is_valid(), _null(), column("input_json")))
    metadata, bad_metadata = _reencoded(column("metadata_json"))
    problems = [(p[0], 0, "input_json", p[1]) for p in [bad_input] if p]
    problems += [(p[0], 1, "metadata_json", p[1]) for p in [bad_metadata] if p]
    if problems:
        row, _, name, message = min(problems)
        where = f"{label}: row {before + row + 1}"
        raise DatasetError(f"{where}: {name}: not valid JSON ({message})")
    probabilities = column("probabilities")
    entries = pc.binary_join_element_wise(
        json_strings(probabilities.keys), ":", json_floats(probabilities.items), ""
    )
    listed = pa.ListArray.from_arrays(probabilities.offsets, entries)
    joined = pc.binary_join_element_wise("{", pc.binary_join(listed, ","), "}", "")
    values = {
        "input": pc.if_else(given.is_valid(), json_strings(given), objects),
        "metadata": metadata,
        "probabilities": pc.if_else(probabilities.is_valid(), joined, _null()),
    }
    pieces: list[Any] = []
    for name in RECORD_FIELDS:
        value = values.get(name)
        if value is None:
            data = column(name)
            encode = json_floats if name in _INBOX_FLOATS else (
                json_flags if name in _INBOX_FLAGS else json_strings
            )  # fmt: skip
            value = pc.if_else(data.is_valid(), encode(data), _null())
        pieces.append(pc.fill_null(pc.binary_join_element_wise(f',"{name}":', value, ""), ""))
    body = pc.binary_join_element_wise(*pieces, "")
    return pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(body, 1), "}", "")


_INBOX_FLOATS = ("confidence", "latency_ms", "cost")
_INBOX_FLAGS = ("outcome_correct", "fallback")


def golden_lines(table: pa.Table, decision: str) -> Iterator[bytes]:
    """Golden case results as production records: the answer (probabilities, selected),
    ``outcome`` = the expected label; errored cases left out (they have no answer)."""
    for row in table.to_pylist():
        if row["selected"] is None:
            continue
        record = {
            "id": row["case_id"],
            "decision": decision,
            "input": json.loads(row["input_json"]),
            "probabilities": dict(row["probabilities"]),
            "selected": row["selected"],
            "backend": row["backend"],
            "model": row["result_model"],
            "model_version": row["result_model_version"] or row["model_version"],
            "outcome": row["expected"],
            "latency_ms": row["latency_ms"],
            "metadata": json.loads(row["metadata_json"] or "{}"),
        }
        yield orjson.dumps({k: v for k, v in record.items() if v is not None})


# -- a check report's rows ------------------------------------------------------------------


def flat_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, float | None]:
    """DecGuard's production metrics as ``section.name`` scalars (``counts.total``,
    ``outcomes.accuracy``, ``calibration.ece``, ``confidence.histogram.9``…); the
    reliability table is left to the report file."""
    out: dict[str, float | None] = {}
    for name, value in metrics.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            out.update(flat_metrics(value, f"{key}."))
        elif isinstance(value, list):
            if all(isinstance(v, int | float) for v in value):
                out.update({f"{key}.{i}": float(v) for i, v in enumerate(value)})
        elif value is None or isinstance(value, int | float):
            out[key] = None if value is None else float(value)
    return out


def check_rows(
    doc: dict[str, Any],
    ext: dict[str, Any],
    keys: dict[str, Any],
    *,
    baseline: tuple[str, str | None, str],
    first: dict[str, Any],
    contract_hash: str,
    report_path: Path,
    report_sha256: str,
    sidecar: Path,
) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows of one check: ``doc`` the report (records apart), ``ext`` its
    sidecar, ``keys`` the write's key columns, ``baseline`` (rule, ref, reason) as chosen,
    ``first`` the first stored record row (source, run)."""
    rule, ref, reason = baseline
    base = doc["baseline"]
    metric_rows = [
        {**keys, "segment_key": None, "segment_value": None, "metric": k, "value": v}
        for k, v in flat_metrics(doc["metrics"]).items()
    ]
    for segment in doc["segments"]:
        where = {"segment_key": segment["key"], "segment_value": shown(segment["value"])}
        metric_rows += [
            {**keys, **where, "metric": k, "value": v}
            for k, v in flat_metrics(segment["metrics"]).items()
        ]
    label = ext["label_drift"]
    drift = {
        **keys,
        "baseline": ref,
        "baseline_rule": rule,
        "baseline_source": None if base is None else base["source"],
        "baseline_n_records": None if base is None else base["n_records"],
        **doc["drift"],
        "label_tv_distance": label["tv_distance"],
        "label_psi": label["psi"],
        "psi_epsilon": label["psi_epsilon"],
    }
    outcomes = ext["outcomes"]
    run = {
        **keys,
        "status": doc["status"],
        "exit_code": doc["exit_code"],
        "source": first["source"],
        "dataset_path": doc["dataset"]["path"],
        "dataset_hash": doc["dataset"]["hash"],
        "records_run_id": first["run_id"],
        "n_records": doc["dataset"]["n_records"],
        "n_outcomes": doc["dataset"]["n_outcomes"],
        "n_correctness": doc["dataset"]["n_correctness"],
        "pending": outcomes["pending"],
        "pending_label": outcomes["pending_label"],
        "baseline": ref,
        "baseline_rule": rule,
        "baseline_reason": reason,
        "baseline_source": None if base is None else base["source"],
        "baseline_path": None if base is None else base["path"],
        "baseline_hash": None if base is None else base["hash"],
        "baseline_n_records": None if base is None else base["n_records"],
        "contract_hash": contract_hash,
        "report_path": str(report_path),
        "report_sha256": report_sha256,
        "sidecar_path": str(sidecar),
    }
    return {
        "production_runs": [run],
        "production_metrics": metric_rows,
        "production_drift": [drift],
        "production_segments": segment_rows(doc, ext, keys),
        "production_extensions": extension_rows(ext, keys),
        "production_checks": checks_rows(doc, keys, ref),
    }


def segment_rows(
    doc: dict[str, Any], ext: dict[str, Any], keys: dict[str, Any]
) -> list[dict[str, Any]]:
    extra = {(s["key"], to_json(s["value"])): s for s in ext["segments"]}
    rows = []
    for position, segment in enumerate(doc["segments"]):
        m = segment["metrics"]
        threshold = m["threshold"]
        side = extra.get((segment["key"], to_json(segment["value"])))
        interval = None if side is None else side["accuracy_interval"]
        rows.append(
            {
                **keys,
                "position": position,
                "segment_key": segment["key"],
                "segment_value": shown(segment["value"]),
                "segment_value_json": to_json(segment["value"]),
                "status": segment["status"],
                "n_records": m["counts"]["total"],
                "n_correctness": m["counts"]["with_correctness"],
                "accuracy": m["outcomes"]["accuracy"],
                "error_rate": m["outcomes"]["error_rate"],
                "ece": m["calibration"]["ece"],
                "brier": m["calibration"]["brier"],
                "nll": m["calibration"]["nll"],
                "confidence_mean": m["confidence"]["mean"],
                "threshold_coverage": None if threshold is None else threshold["coverage"],
                "abstention_rate": m["routing"]["abstention_rate"],
                "fallback_rate": m["routing"]["fallback_rate"],
                "pending": None if side is None else side["outcomes"]["pending"],
                "accuracy_low": None if interval is None else interval["low"],
                "accuracy_high": None if interval is None else interval["high"],
            }
        )
    return rows


def extension_rows(ext: dict[str, Any], keys: dict[str, Any]) -> list[dict[str, Any]]:
    """The sidecar's results in long format (section, segment, model_version, label,
    metric, value)."""
    rows: list[dict[str, Any]] = []

    def add(section: str, metric: str, value: Any, **where: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float | type(None)):
            return
        rows.append(
            {
                **keys,
                "section": section,
                "segment_key": where.get("segment_key"),
                "segment_value": where.get("segment_value"),
                "model_version": where.get("model_version"),
                "label": where.get("label"),
                "metric": metric,
                "value": None if value is None else float(value),
            }
        )

    for name, value in ext["outcomes"].items():
        add("outcomes", name, value)
    for name, value in ext["accuracy_interval"].items():
        add("accuracy_interval", name, value)
    drift = ext["label_drift"]
    for name in ("tv_distance", "psi", "psi_epsilon"):
        add("label_drift", name, drift[name])
    for i, label in enumerate(drift["labels"]):
        add("label_drift", "current_count", drift["current_counts"][i], label=label)
        add("label_drift", "current_share", drift["current"][i], label=label)
        if drift["baseline"] is not None:
            add("label_drift", "baseline_count", drift["baseline_counts"][i], label=label)
            add("label_drift", "baseline_share", drift["baseline"][i], label=label)
    for entry in ext["calibration_by_model_version"]:
        version = entry["model_version"]
        where = {"model_version": None if version is None else str(version)}
        for name in ("n", "n_correctness", "accuracy", "mean_confidence", "ece", "ece_increase"):
            add("calibration_by_model_version", name, entry[name], **where)
        if entry["baseline"] is not None:
            for name, value in entry["baseline"].items():
                add("calibration_by_model_version", f"baseline_{name}", value, **where)
    for segment in ext["segments"]:
        where = {"segment_key": segment["key"], "segment_value": shown(segment["value"])}
        for name, value in segment["outcomes"].items():
            add("outcomes", name, value, **where)
        for name, value in segment["accuracy_interval"].items():
            add("accuracy_interval", name, value, **where)
    return rows


def checks_rows(
    doc: dict[str, Any], keys: dict[str, Any], baseline: str | None
) -> list[dict[str, Any]]:
    """Every check of the report (gate_results columns): aggregate checks, then each
    segment's, with the segment they were measured on."""
    common = {**keys, "backend": None, "model_version": None, "source": SOURCE,
              "baseline": baseline}  # fmt: skip
    # DecGuard's order: the aggregate checks, then each segment's
    n_aggregate = len(doc["checks"]) - sum(len(s["checks"]) for s in doc["segments"])
    rows = [
        {**common, **c, "segment_key": None, "segment_value": None}
        for c in doc["checks"][:n_aggregate]
    ]
    for segment in doc["segments"]:
        where = {"segment_key": segment["key"], "segment_value": shown(segment["value"])}
        rows += [{**common, **c, **where} for c in segment["checks"]]
    return rows

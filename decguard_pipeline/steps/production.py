"""Production checks as steps (issue 6): what the daily ``production_records`` and
``production_check`` assets call. No Dagster here.

A day's records come from ``<production dir>/<contract>/<YYYY-MM-DD>.jsonl`` (the directory is
``$DECGUARD_PRODUCTION``, default ``data/production`` under the project root) or, when there is
no such file, from the rows producers wrote to the warehouse table ``production_inbox`` for
that contract and day. They are checked exactly as ``decguard-pipeline check`` checks a records
file (DecGuard's rules and messages) and stored normalised in ``production_records``.

``production_check`` reads the day's stored records back (never the source again: a rotated
or edited log cannot change what was ingested), builds DecGuard's check report against the
baseline the contract's ``pipeline.production.baseline`` names (by default the newest earlier
day with ingested records), writes and verifies the ``check_version`` 0.1 report file and its
sidecar, and stores metrics, drift, segments, extension results and checks. The report's
``dataset`` (and a previous day's ``baseline``) carry the source's path and hash as ingested,
so the report equals ``check CONTRACT --dataset DAYFILE --baseline PREVDAYFILE`` apart from
``created_at``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.contract.production import ProductionExtension
from decguard_pipeline.core.errors import DatasetError, DecGuardError
from decguard_pipeline.core.gates import FAIL, PASS, WARN, overall_status
from decguard_pipeline.core.production.check import load_baseline
from decguard_pipeline.core.production.extensions import (
    extension_results,
    settings_of,
    sidecar_path,
)
from decguard_pipeline.core.production.loader import RecordSet, load_records
from decguard_pipeline.core.production.metrics import production_metrics
from decguard_pipeline.core.production.report import Baseline, ProductionReport, build_report
from decguard_pipeline.core.production.schema import RECORD_FIELDS
from decguard_pipeline.core.production.segments import partition, shown
from decguard_pipeline.core.production.verify import load_production_report
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.steps import base as steps
from decguard_pipeline.steps.contracts import ContractEntry, project_root
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.base import input_text, to_json
from decguard_pipeline.warehouse.schema import TABLES
from decguard_pipeline.warehouse.schema.production import INBOX_FIELDS
from decguard_pipeline.warehouse.store import read_file

ENV_DIR = "DECGUARD_PRODUCTION"
ENV_START = "DECGUARD_PRODUCTION_START"
# the first daily partition when nothing else says (no setting, no variable, no file)
DEFAULT_START = date(2026, 1, 1)
INBOX = "production_inbox"
RECORDS = "production_records"
SOURCE = "production"  # ``production_checks.source``
FILE, TABLE = "file", "table"
PREVIOUS, GOLDEN, NONE, PINNED = "previous", "golden", "none", "file"
DEFAULT_BACKEND = "default"
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_RANK = {PASS: 0, WARN: 1, FAIL: 2}
BATCH = 50_000


# -- where records come from ------------------------------------------------------------


def production_root() -> Path:
    """``$DECGUARD_PRODUCTION``, else ``data/production`` under the project root."""
    return Path(os.environ.get(ENV_DIR) or project_root() / "data" / "production")


def parse_day(text: str) -> date | None:
    """A ``YYYY-MM-DD`` name as a date, None for anything else."""
    match = _DAY.match(text)
    if match is None:
        return None
    try:
        return date(*map(int, match.groups()))
    except ValueError:
        return None


def day_file(contract: str, day: str) -> Path:
    return production_root() / contract / f"{day}.jsonl"


def file_days(contract: str) -> list[str]:
    """Days with a records file for a contract, oldest first."""
    folder = production_root() / contract
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.jsonl") if parse_day(p.stem) and p.is_file())


def _day_dirs(warehouse: Warehouse, table: str, contract: str) -> dict[str, list[Path]]:
    """A contract's files of ``table`` by day, oldest write first."""
    return {
        day: files for day, files in warehouse.partitions(table, contract).items() if parse_day(day)
    }


def inbox_days(contract: str, warehouse: Warehouse) -> list[str]:
    """Days for which producers wrote ``production_inbox`` rows, oldest first."""
    return sorted(_day_dirs(warehouse, INBOX, contract))


def stored_days(contract: str, warehouse: Warehouse) -> list[str]:
    """Days whose records were ingested (``production_records`` written), oldest first."""
    return sorted(_day_dirs(warehouse, RECORDS, contract))


def has_records(contract: str, day: str, warehouse: Warehouse) -> bool:
    return day_file(contract, day).is_file() or day in _day_dirs(warehouse, INBOX, contract)


def settings(loaded: LoadedContract) -> ProductionExtension:
    return settings_of(loaded) or ProductionExtension()


def start_date(entry: ContractEntry) -> tuple[date, str]:
    """The first daily partition and where it came from: the contract's
    ``pipeline.production.start_date``, ``$DECGUARD_PRODUCTION_START``, the earliest records
    file of the contract, else :data:`DEFAULT_START`."""
    configured = settings(entry.require()).start_date if entry.ok else None
    if configured is not None:
        return configured, "pipeline.production.start_date"
    env = os.environ.get(ENV_START, "").strip()
    if env:
        parsed = parse_day(env)
        if parsed is None:
            raise DecGuardError(f"${ENV_START}: {env!r} is not a date (YYYY-MM-DD)")
        return parsed, f"${ENV_START}"
    days = file_days(entry.key)
    if days:
        return date.fromisoformat(days[0]), f"earliest file {day_file(entry.key, days[0])}"
    return DEFAULT_START, "default"


# -- loading records ----------------------------------------------------------------------


def _options(loaded: LoadedContract, segments: bool = True) -> dict[str, Any]:
    contract = loaded.contract
    return {
        "tolerance": contract.evaluation.probability_tolerance,
        "segment_keys": tuple(contract.production.segments) if segments else (),
    }


def _load_lines(
    lines: Iterator[bytes],
    loaded: LoadedContract,
    folder: Path,
    *,
    label: str,
    segments: bool = True,
    rows: bool = False,
) -> tuple[RecordSet, str]:
    """Records given as JSON lines, checked by ``check``'s own loader (a JSONL file in
    ``folder``, which must outlive the record set: its records are streamed from it). Errors
    name ``label`` (and ``row N`` instead of ``line N`` when ``rows``). Returns the record
    set and the sha256 of the lines."""
    path = folder / f"records-{len(list(folder.iterdir()))}.jsonl"
    digest = hashlib.sha256()
    with path.open("wb") as stream:
        for line in lines:
            chunk = line + b"\n"
            digest.update(chunk)
            stream.write(chunk)
    try:
        data = load_records(path, loaded.contract.spec(), **_options(loaded, segments))
    except DatasetError as exc:
        message = str(exc).replace(str(path), label)
        if rows:
            message = message.replace(f"{label}: line ", f"{label}: row ")
            message = message.replace("(first at line ", "(first at row ")
        raise DatasetError(message) from None
    return data, "sha256:" + digest.hexdigest()


def inbox_ref(contract: str, day: str) -> str:
    return f"warehouse:{INBOX}/{contract}/{day}"


def _inbox_lines(files: list[Path], label: str) -> Iterator[bytes]:
    """Each inbox row as one record (JSON): batches in write order, rows by ``position``."""
    n = 0
    for path in files:
        table = read_file(path).sort_by([("position", "ascending")])
        for batch in table.to_batches(BATCH):
            for row in batch.to_pylist():
                n += 1
                yield orjson.dumps(_inbox_record(row, f"{label}: row {n}"))


def _json_field(row: dict[str, Any], name: str, where: str) -> Any:
    try:
        return json.loads(row[name])
    except ValueError as exc:
        raise DatasetError(f"{where}: {name}: not valid JSON ({exc})") from None


def _inbox_record(row: dict[str, Any], where: str) -> dict[str, Any]:
    record: dict[str, Any] = {}
    names = {name for name, _ in INBOX_FIELDS}
    for name in RECORD_FIELDS:
        if name == "input":
            value = row["input"]
            if value is None and row["input_json"] is not None:
                value = _json_field(row, "input_json", where)
        elif name == "metadata":
            value = row["metadata_json"]
            value = None if value is None else _json_field(row, "metadata_json", where)
        elif name == "probabilities":
            value = None if row[name] is None else dict(row[name])
        else:
            value = row[name] if name in names else None
        if value is not None:
            record[name] = value
    return record


@dataclass
class Ingested:
    """What one materialisation of ``production_records`` read and wrote."""

    day: str
    source: str  # file | table
    path: str  # the file, or warehouse:production_inbox/<contract>/<day>
    hash: str
    data: RecordSet
    table: pa.Table  # the rows written to production_records
    label_counts: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.data)


def _check_segments(data: RecordSet, loaded: LoadedContract) -> None:
    """A segment value DecGuard cannot group by fails ``check``: fail the ingestion too."""
    for key in loaded.contract.production.segments:
        partition(data.columns, key)


def ingest_day(entry: ContractEntry, day: str, step: steps.Step) -> Ingested:
    """Check the day's records strictly and write them, normalised, to
    ``production_records``; the records file wins over ``production_inbox`` rows."""
    loaded = entry.require()
    if parse_day(day) is None:
        raise DecGuardError(f"{entry.key}: {day!r} is not a day (YYYY-MM-DD)")
    wh = step.warehouse
    path = day_file(entry.key, day)
    with tempfile.TemporaryDirectory(prefix="decguard-production-") as tmp:
        if path.is_file():
            data = load_records(path, loaded.contract.spec(), **_options(loaded))
            source, where, digest = FILE, str(path), data.hash
        else:
            files = _day_dirs(wh, INBOX, entry.key).get(day)
            if not files:
                raise DatasetError(
                    f"{entry.key}: no production records for {day}: no file {path} and no "
                    f"{INBOX} rows (contract={entry.key}, target={day}) in {wh.root}"
                )
            where = inbox_ref(entry.key, day)
            data, digest = _load_lines(
                _inbox_lines(files, where), loaded, Path(tmp), label=where, rows=True
            )
            data = dataclasses.replace(data, path=where, hash=digest)
            source = TABLE
        _check_segments(data, loaded)
        table = records_table(data, entry.key, day, step, source=source)
        wh.write(RECORDS, table, contract=entry.key, target=day, run_id=step.run_id,
                 recorded_at=step.at)  # fmt: skip
    labels = list(loaded.contract.spec().labels)
    counts = table.column("selected").value_counts().to_pylist()
    by_label = {c["values"]: c["counts"] for c in counts}
    return Ingested(
        day, source, where, digest, data, table, {label: by_label.get(label, 0) for label in labels}
    )


def records_table(
    data: RecordSet, contract: str, day: str, step: steps.Step, *, source: str
) -> pa.Table:
    """One row per normalised record (``production_records``)."""
    labels = list(data.spec.labels)
    cols: dict[str, list[Any]] = {name: [] for name in _RECORD_COLUMNS}
    for position, record in enumerate(data.records()):
        value = record["input"]
        probs = [record["probabilities"][label] for label in labels]
        cols["position"].append(position)
        cols["input_text"].append(None if value is None else input_text(value))
        cols["input_json"].append(None if value is None else to_json(value))
        cols["probs"].append(probs)
        cols["probabilities"].append(list(zip(labels, probs, strict=True)))
        cols["metadata_json"].append(to_json(record["metadata"]))
        cols["record_json"].append(_record_json(record))
        for name in _COPIED:
            cols[name].append(record[name])
    n = len(cols["position"])
    const = {
        "contract": contract,
        "target": day,
        "run_id": step.run_id,
        "recorded_at": step.at,
        "source": source,
        "source_path": data.path,
        "dataset_hash": data.hash,
        "labels": labels,
    }
    schema = TABLES[RECORDS]
    arrays = {
        f.name: pa.array([const[f.name]] * n if f.name in const else cols[f.name], type=f.type)
        for f in schema
    }
    return pa.table(arrays, schema=schema)


_COPIED = (
    "id", "timestamp", "decision", "selected", "confidence", "outcome", "outcome_correct",
    "action", "fallback", "latency_ms", "cost", "backend", "model", "model_version",
)  # fmt: skip
_RECORD_COLUMNS = (
    "position", "input_text", "input_json", "probs", "probabilities", "metadata_json",
    "record_json", *_COPIED,
)  # fmt: skip


def _record_json(record: dict[str, Any]) -> str:
    """A normalised record as one JSON object, unknown fields left out (floats exact)."""
    try:
        return orjson.dumps({k: v for k, v in record.items() if v is not None}).decode()
    except orjson.JSONEncodeError:  # integers beyond 64 bits in an input or metadata
        return to_json({k: v for k, v in record.items() if v is not None})


def stored_lines(table: pa.Table) -> Iterator[bytes]:
    """Stored records as the JSON records they were (``record_json``)."""
    for chunk in table.column("record_json").chunks:
        for text in chunk.to_pylist():
            yield text.encode()


def _stored(
    entry: ContractEntry, day: str, warehouse: Warehouse, run_id: str | None = None
) -> tuple[pa.Table, dict[str, Any]]:
    table = None if run_id is None else warehouse.read_run(RECORDS, entry.key, day, run_id)
    if table is None:
        table = warehouse.read_latest(RECORDS, entry.key, day)
    if table is None or table.num_rows == 0:
        raise DecGuardError(f"{entry.key}: no production records ingested for {day} yet")
    return table, table.slice(0, 1).to_pylist()[0]


def load_stored(
    entry: ContractEntry,
    day: str,
    warehouse: Warehouse,
    folder: Path,
    *,
    segments: bool = True,
    run_id: str | None = None,
) -> tuple[RecordSet, dict[str, Any]]:
    """A day's records as run ``run_id`` ingested them (else the newest ingestion), checked
    again under the current contract, with the source's path and hash as ingested; and the
    first stored row (source, run)."""
    loaded = entry.require()
    table, first = _stored(entry, day, warehouse, run_id)
    label = f"warehouse:{RECORDS}/{entry.key}/{day}"
    data, _ = _load_lines(stored_lines(table), loaded, folder, label=label, segments=segments)
    return dataclasses.replace(data, path=first["source_path"], hash=first["dataset_hash"]), first


# -- the baseline ---------------------------------------------------------------------------


@dataclass
class ChosenBaseline:
    rule: str  # previous | golden | file | none
    ref: str | None  # the day, target or file compared with
    reason: str
    baseline: Baseline | None = None


def _dataset_baseline(loaded: LoadedContract, data: RecordSet) -> Baseline:
    """What ``check --baseline RECORDS`` builds from a records file."""
    info = {
        "source": "dataset",
        "path": data.path,
        "hash": data.hash,
        "n_records": len(data),
        "metrics": production_metrics(data.columns, loaded.contract.evaluation),
    }
    return Baseline(info, data.columns)


def deployed_target(contract: str, warehouse: Warehouse) -> dict[str, Any] | None:
    """The newest target of the ``default`` backend whose golden requirements passed."""
    from decguard_pipeline.steps.diff import known_targets

    passing = [
        k
        for k in known_targets(contract, warehouse)
        if k["backend"] == DEFAULT_BACKEND and k["requirements_passed"]
    ]
    return passing[-1] if passing else None


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


def choose_baseline(
    entry: ContractEntry, day: str, warehouse: Warehouse, folder: Path
) -> ChosenBaseline:
    loaded = entry.require()
    rule = settings(loaded).baseline
    if rule == NONE:
        return ChosenBaseline(NONE, None, "pipeline.production.baseline is none")
    if rule == PREVIOUS:
        earlier = [d for d in stored_days(entry.key, warehouse) if d < day]
        if not earlier:
            return ChosenBaseline(PREVIOUS, None, f"no day before {day} with ingested records")
        data, _ = load_stored(entry, earlier[-1], warehouse, folder, segments=False)
        reason = "previous day" if date.fromisoformat(earlier[-1]) == _minus_one(day) else (
            "newest earlier day with ingested records"
        )  # fmt: skip
        return ChosenBaseline(PREVIOUS, earlier[-1], reason, _dataset_baseline(loaded, data))
    if rule == GOLDEN:
        target = deployed_target(entry.key, warehouse)
        if target is None:
            return ChosenBaseline(
                GOLDEN, None, "no target of the default backend whose golden requirements passed"
            )
        table = warehouse.read_run("case_results", entry.key, target["target"], target["run_id"])
        if table is None:
            raise DecGuardError(f"{entry.key}: case results of run {target['run_id']} are missing")
        ref = f"warehouse:{entry.key}/{target['target']}/{target['run_id']}"
        lines = golden_lines(table, loaded.contract.spec().name)
        data, digest = _load_lines(lines, loaded, folder, label=ref, segments=False)
        data = dataclasses.replace(data, path=ref, hash=digest)
        reason = "golden run of the deployed target (newest passing target of the default backend)"
        return ChosenBaseline(GOLDEN, target["target"], reason, _dataset_baseline(loaded, data))
    path = loaded.resolve(rule)
    return ChosenBaseline(PINNED, str(path), "pinned in pipeline.production.baseline",
                          load_baseline(loaded, path))  # fmt: skip


def _minus_one(day: str) -> date:
    return date.fromordinal(date.fromisoformat(day).toordinal() - 1)


# -- the check ------------------------------------------------------------------------------


@dataclass
class Checked:
    """What one materialisation of ``production_check`` computed and wrote."""

    day: str
    report: ProductionReport
    chosen: ChosenBaseline
    report_path: Path
    sidecar: Path
    source: str
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # table -> rows

    @property
    def document(self) -> dict[str, Any]:
        return self.report.document

    @property
    def extensions(self) -> dict[str, Any]:
        return self.report.extensions or {}

    @property
    def status(self) -> str:
        return self.report.status


def check_day(entry: ContractEntry, day: str, step: steps.Step) -> Checked:
    """DecGuard's production check of a day's ingested records against the chosen baseline:
    the report file (verified on load as ``decguard report`` would) and its sidecar under
    ``report_files``, rows in ``production_runs``, ``production_metrics``,
    ``production_drift``, ``production_segments``, ``production_extensions`` and
    ``production_checks``."""
    loaded = entry.require()
    wh = step.warehouse
    with tempfile.TemporaryDirectory(prefix="decguard-production-") as tmp:
        data, first = load_stored(entry, day, wh, Path(tmp), run_id=step.run_id)
        chosen = choose_baseline(entry, day, wh, Path(tmp))
        report = build_report(loaded, data, baseline=chosen.baseline)
        report.extensions = extension_results(loaded, report)
        stamp = step.at.strftime("%Y%m%dT%H%M%S%fZ")
        folder = wh.partition_dir("report_files", entry.key, day)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{stamp}_{step.run_id}.check.json"
        report.write(path)  # records streamed from the temporary file
    load_production_report(path)  # must verify exactly, as DecGuard reads it
    sidecar = sidecar_path(path)
    write_document(sidecar, {**report.extensions, "report": str(path)}, what="pipeline results")
    checked = Checked(day, report, chosen, path, sidecar, first["source"])
    checked.rows = check_rows_of(entry, checked, step, first)
    where = {"contract": entry.key, "target": day, "run_id": step.run_id, "recorded_at": step.at}
    for table, rows in checked.rows.items():
        wh.write(table, rows, **where)
    return checked


def _keys(entry: ContractEntry, day: str, step: steps.Step) -> dict[str, Any]:
    return {"contract": entry.key, "target": day, "run_id": step.run_id, "recorded_at": step.at}


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


def check_rows_of(
    entry: ContractEntry, checked: Checked, step: steps.Step, first: dict[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    loaded = entry.require()
    doc, ext, chosen = checked.document, checked.extensions, checked.chosen
    keys = _keys(entry, checked.day, step)
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
        "baseline": chosen.ref,
        "baseline_rule": chosen.rule,
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
        "baseline": chosen.ref,
        "baseline_rule": chosen.rule,
        "baseline_reason": chosen.reason,
        "baseline_source": None if base is None else base["source"],
        "baseline_path": None if base is None else base["path"],
        "baseline_hash": None if base is None else base["hash"],
        "baseline_n_records": None if base is None else base["n_records"],
        "contract_hash": loaded.hash,
        "report_path": str(checked.report_path),
        "report_sha256": hashlib.sha256(checked.report_path.read_bytes()).hexdigest(),
        "sidecar_path": str(checked.sidecar),
    }
    return {
        "production_runs": [run],
        "production_metrics": metric_rows,
        "production_drift": [drift],
        "production_segments": segment_rows(doc, ext, keys),
        "production_extensions": extension_rows(ext, keys),
        "production_checks": checks_rows(doc, keys, chosen.ref),
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


# -- what the asset checks report -----------------------------------------------------------


def production_gates(loaded: LoadedContract) -> list[tuple[str | None, str, str]]:
    """``(segment key or None, gate, level)`` of every check the contract configures, in
    DecGuard's order: aggregate requirements, warnings, then per segment key the segment
    requirements and warnings."""
    config = loaded.contract.production
    gates: list[tuple[str | None, str, str]] = [
        (None, g, "requirement") for g in config.requirements.configured()
    ]
    gates += [(None, g, "warning") for g in config.warnings.configured()]
    for key in config.segments:
        gates += [(key, g, "requirement") for g in config.segment_requirements.configured()]
        gates += [(key, g, "warning") for g in config.segment_warnings.configured()]
    return gates


def _badness(row: dict[str, Any]) -> float:
    value = row["value"]
    if value is None:
        return float("inf")
    return -value if row["comparison"] == ">=" else value


def aggregate_segments(rows: list[dict[str, Any]], gate: str) -> dict[str, Any]:
    """One check over every segment of a key: the worst status; value, threshold and
    metric of the worst segment; DecGuard's messages of the segments that do not pass (else
    the worst one's); ``segments`` holds every segment's row."""
    worst = max(rows, key=lambda r: (_RANK[r["status"]], _badness(r)))
    failing = [r for r in rows if r["status"] != PASS]
    return {
        **worst,
        "gate": gate,
        "status": overall_status(rows),
        "message": "; ".join(r["message"] for r in failing or [worst]),
        "segment": worst["segment_value"],
        "segments": [
            {k: r[k] for k in ("segment_value", "gate", "status", "value", "threshold", "message")}
            for r in rows
        ],
    }


def check_outcomes(
    entry: ContractEntry, day: str, warehouse: Warehouse, run_id: str | None = None
) -> dict[tuple[str | None, str, str], dict[str, Any]]:
    """The stored checks of a day by ``(segment key, gate, level)``: aggregate checks as
    stored, segment checks aggregated over the day's segment values (run ``run_id``'s rows
    when it wrote any, else the newest)."""
    rows = steps.run_rows(warehouse, "production_checks", entry.key, day, run_id)
    if rows is None:
        raise DecGuardError(f"{entry.key}: no production checks for {day} yet")
    out: dict[tuple[str | None, str, str], dict[str, Any]] = {}
    for key, gate, level in production_gates(entry.require()):
        if key is None:
            found = [r for r in rows if r["segment_key"] is None and r["gate"] == gate
                     and r["level"] == level]  # fmt: skip
            if found:
                out[(None, gate, level)] = found[0]
            continue
        picked = [
            r
            for r in rows
            if r["segment_key"] == key
            and r["level"] == level
            and r["gate"] == f"segment[{key}={r['segment_value']}].{gate}"
        ]
        if picked:
            out[(key, gate, level)] = aggregate_segments(picked, gate)
    return out


# -- for the main job and the schedule ------------------------------------------------------


def summary_row(
    contract: str, day: str, warehouse: Warehouse, run_id: str | None = None
) -> dict[str, Any] | None:
    """Status, accuracy and drift of the check of a day by run ``run_id`` (by default the
    newest check); None when there is none."""
    runs = (
        warehouse.read_latest("production_runs", contract, day)
        if run_id is None
        else warehouse.read_run("production_runs", contract, day, run_id)
    )
    if runs is None or runs.num_rows == 0:
        return None
    run = runs.to_pylist()[-1]
    drift = warehouse.read_run("production_drift", contract, day, run["run_id"])
    metrics = warehouse.read_run("production_metrics", contract, day, run["run_id"])
    values = {
        m["metric"]: m["value"]
        for m in (metrics.to_pylist() if metrics is not None else [])
        if m["segment_key"] is None
    }
    d = drift.to_pylist()[0] if drift is not None and drift.num_rows else {}
    return {
        "contract": contract,
        "day": day,
        "run_id": run["run_id"],
        "status": run["status"],
        "n_records": run["n_records"],
        "accuracy": values.get("outcomes.accuracy"),
        "confidence_tv_distance": d.get("confidence_tv_distance"),
        "baseline": run["baseline"],
        "baseline_rule": run["baseline_rule"],
    }


def checked_days(contract: str, warehouse: Warehouse) -> list[str]:
    """Days with a stored check (``production_runs`` written), oldest first."""
    return sorted(_day_dirs(warehouse, "production_runs", contract))


def record_days(contract: str, warehouse: Warehouse) -> list[str]:
    """Days with records to ingest (a file or ``production_inbox`` rows), oldest first."""
    return sorted(set(file_days(contract)) | set(inbox_days(contract, warehouse)))


def day_to_check(
    contract: str, today: date, warehouse: Warehouse, first: date
) -> tuple[str | None, str]:
    """What the daily schedule checks on ``today``: yesterday when it has records, else the
    latest earlier day with records that was never checked; None (and why) when neither."""
    yesterday = _minus_one(today.isoformat())
    if yesterday < first:
        return None, f"{yesterday} is before the first production day {first}"
    if has_records(contract, yesterday.isoformat(), warehouse):
        return yesterday.isoformat(), "yesterday"
    days = [
        d for d in record_days(contract, warehouse) if first <= date.fromisoformat(d) < yesterday
    ]
    if not days:
        return None, f"no production records for {yesterday} nor any earlier day"
    if days[-1] in checked_days(contract, warehouse):
        return None, (
            f"no production records for {yesterday}; the latest day with records, {days[-1]}, "
            "is checked already"
        )
    return days[-1], "latest day with records"

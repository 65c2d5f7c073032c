"""Checking a day (``production_check``): DecGuard's check report of the day's stored records
against the chosen baseline, written (not read back: its bytes are `check -o`'s, which the
differential tests prove), its rows stored; and what the asset checks
read back."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.gates import combine_checks
from decguard_pipeline.core.production.extensions import extension_results, sidecar_path
from decguard_pipeline.core.production.loader import release_free_memory
from decguard_pipeline.core.production.report import build_report, write_with_records
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.steps.base import Step, run_rows
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.production.baseline import ChosenBaseline, choose_baseline
from decguard_pipeline.steps.production.ingest import Ingested, load_stored, stored_file
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.production import check_rows
from decguard_pipeline.warehouse.rows.production_report import report_texts


@dataclass
class Checked:
    """What one materialisation of ``production_check`` computed and wrote (the report's
    document and extension results; its record columns are released once written)."""

    day: str
    document: dict[str, Any]
    extensions: dict[str, Any]
    chosen: ChosenBaseline
    report_path: Path
    sidecar: Path
    source: str
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # table -> rows

    @property
    def status(self) -> str:
        return str(self.document["status"])


def check_day(
    entry: ContractEntry, day: str, step: Step, ingested: Ingested | None = None
) -> Checked:
    """DecGuard's production check of a day's ingested records against the chosen baseline:
    the report file and its sidecar under ``report_files``, rows in ``production_runs``,
    ``production_metrics``, ``production_drift``, ``production_segments``,
    ``production_extensions`` and ``production_checks``. ``ingested``: what this run's
    ingestion of the day returned, whose columns are checked as they are (no read-back of
    the stored records; else they are read back and checked again under the current
    contract)."""
    loaded = entry.require()
    wh = step.warehouse
    if ingested is None:
        data, first, stored = load_stored(entry, day, wh, run_id=step.run_id)
    else:  # this run just checked and stored them: its columns are the stored records'
        stored, first = stored_file(entry, day, wh, step.run_id)
        data = ingested.take()
    with tempfile.TemporaryDirectory(prefix="decguard-production-") as tmp:
        chosen = choose_baseline(entry, day, wh, Path(tmp))
    report = build_report(loaded, data, baseline=chosen.baseline)
    extensions = extension_results(loaded, report)
    document = report.document
    # the record columns are done with: the file is written from the stored records, and
    # verifying it builds columns of its own
    chosen.baseline = None
    del data, report
    release_free_memory()
    folder = wh.files_dir(entry.key, day)
    path = folder / f"{step.at.strftime('%Y%m%dT%H%M%S%fZ')}_{step.run_id}.check.json"
    # the numbers come from the columns the records' texts are written from, and the texts
    # are orjson's bytes (tests/differential): the file is not read back to verify it
    sha256 = write_report(document, path, stored, loaded.contract.spec())
    sidecar = sidecar_path(path)
    write_document(sidecar, {**extensions, "report": str(path)}, what="pipeline results")
    checked = Checked(day, document, extensions, chosen, path, sidecar, first["source"])
    keys = _keys(entry, day, step)
    checked.rows = check_rows(
        document, extensions, keys,
        baseline=(chosen.rule, chosen.ref, chosen.reason), first=first,
        contract_hash=loaded.hash, report_path=path, report_sha256=sha256, sidecar=sidecar,
    )  # fmt: skip
    where = {"contract": entry.key, "target": day, "run_id": step.run_id, "recorded_at": step.at}
    for table, rows in checked.rows.items():
        wh.write(table, rows, **where)
    return checked


def write_report(document: dict[str, Any], path: Path, stored: Path, spec: DecisionSpec) -> str:
    """The report file, its records the stored ones as text, and its sha256."""
    return write_with_records(path, document, report_texts(stored, spec))


def _keys(entry: ContractEntry, day: str, step: Step) -> dict[str, Any]:
    return {"contract": entry.key, "target": day, "run_id": step.run_id, "recorded_at": step.at}


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


SEGMENT_FIELDS = ("segment_value", "gate", "status", "value", "threshold", "message")


def aggregate_segments(rows: list[dict[str, Any]], gate: str) -> dict[str, Any]:
    """One check over every segment of a key: the worst segment decides
    (``core.gates.combine_checks``); DecGuard's messages of the segments that do not pass
    (else the worst one's); ``segments`` holds every segment's row."""
    return combine_checks(rows, gate, parts="segments", fields=SEGMENT_FIELDS)


def check_outcomes(
    entry: ContractEntry, day: str, warehouse: Warehouse, run_id: str | None = None
) -> dict[tuple[str | None, str, str], dict[str, Any]]:
    """The stored checks of a day by ``(segment key, gate, level)`` (run ``run_id``'s rows
    when it wrote any, else the newest): :func:`gate_outcomes`."""
    rows = run_rows(warehouse, "production_checks", entry.key, day, run_id)
    if rows is None:
        raise DecGuardError(f"{entry.key}: no production checks for {day} yet")
    return gate_outcomes(rows, entry.require())


def gate_outcomes(
    rows: list[dict[str, Any]], loaded: LoadedContract
) -> dict[tuple[str | None, str, str], dict[str, Any]]:
    """A day's ``production_checks`` rows by ``(segment key, gate, level)``: aggregate
    checks as they are, segment checks aggregated over the day's segment values."""
    out: dict[tuple[str | None, str, str], dict[str, Any]] = {}
    for key, gate, level in production_gates(loaded):
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

"""Ingesting a day (``production_records``): the day's records checked strictly, as ``check``
checks a records file, and written normalised; and reading stored records back, checked again
under the current contract."""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.errors import DatasetError, DecGuardError
from decguard_pipeline.core.production.loader import RecordSet, load_records
from decguard_pipeline.core.production.segments import partition
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.production.sources import (
    FILE,
    INBOX,
    RECORDS,
    TABLE,
    day_dirs,
    day_file,
    inbox_ref,
    parse_day,
)
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.production import inbox_lines, records_table, stored_lines


def loader_options(loaded: LoadedContract, segments: bool = True) -> dict[str, Any]:
    contract = loaded.contract
    return {
        "tolerance": contract.evaluation.probability_tolerance,
        "segment_keys": tuple(contract.production.segments) if segments else (),
    }


def load_lines(
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
        data = load_records(path, loaded.contract.spec(), **loader_options(loaded, segments))
    except DatasetError as exc:
        message = str(exc).replace(str(path), label)
        if rows:
            message = message.replace(f"{label}: line ", f"{label}: row ")
            message = message.replace("(first at line ", "(first at row ")
        raise DatasetError(message) from None
    return data, "sha256:" + digest.hexdigest()


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


def ingest_day(entry: ContractEntry, day: str, step: Step) -> Ingested:
    """Check the day's records strictly and write them, normalised, to
    ``production_records``; the records file wins over ``production_inbox`` rows."""
    loaded = entry.require()
    if parse_day(day) is None:
        raise DecGuardError(f"{entry.key}: {day!r} is not a day (YYYY-MM-DD)")
    wh = step.warehouse
    path = day_file(entry.key, day)
    with tempfile.TemporaryDirectory(prefix="decguard-production-") as tmp:
        if path.is_file():
            data = load_records(path, loaded.contract.spec(), **loader_options(loaded))
            source, where, digest = FILE, str(path), data.hash
        else:
            files = day_dirs(wh, INBOX, entry.key).get(day)
            if not files:
                raise DatasetError(
                    f"{entry.key}: no production records for {day}: no file {path} and no "
                    f"{INBOX} rows (contract={entry.key}, target={day}) in {wh.root}"
                )
            where = inbox_ref(entry.key, day)
            data, digest = load_lines(
                inbox_lines(files, where), loaded, Path(tmp), label=where, rows=True
            )
            data = dataclasses.replace(data, path=where, hash=digest)
            source = TABLE
        _check_segments(data, loaded)
        table = records_table(data, contract=entry.key, day=day, run_id=step.run_id,
                              recorded_at=step.at, source=source)  # fmt: skip
        wh.write(RECORDS, table, contract=entry.key, target=day, run_id=step.run_id,
                 recorded_at=step.at)  # fmt: skip
    labels = list(loaded.contract.spec().labels)
    counts = table.column("selected").value_counts().to_pylist()
    by_label = {c["values"]: c["counts"] for c in counts}
    return Ingested(
        day, source, where, digest, data, table, {label: by_label.get(label, 0) for label in labels}
    )


def stored_table(
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
    table, first = stored_table(entry, day, warehouse, run_id)
    label = f"warehouse:{RECORDS}/{entry.key}/{day}"
    data, _ = load_lines(stored_lines(table), loaded, folder, label=label, segments=segments)
    return dataclasses.replace(data, path=first["source_path"], hash=first["dataset_hash"]), first

"""Ingesting a day (``production_records``): the day's records checked strictly, as ``check``
checks a records file, and written normalised; and reading stored records back, checked again
under the current contract."""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.dataset import require_file
from decguard_pipeline.core.errors import DatasetError, DecGuardError
from decguard_pipeline.core.production.loader import WHAT, RecordSet, load_records, load_stretches
from decguard_pipeline.core.production.segments import partition
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.production.sources import (
    FILE,
    INBOX,
    RECORDS,
    TABLE,
    day_file,
    has_inbox,
    inbox_ref,
    parse_day,
)
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.production import write_inbox_lines
from decguard_pipeline.warehouse.rows.production_records import (
    read_batches,
    stored_items,
    stored_stretches,
    threaded_writer,
)


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
    data: RecordSet | None  # None once handed to this run's check (:meth:`take`)
    table: pa.Table  # the first rows written to production_records (what the UI shows)
    label_counts: dict[str, int] = field(default_factory=dict)
    n: int = 0
    n_outcomes: int = 0
    n_correctness: int = 0

    def take(self) -> RecordSet:
        """The checked records, handed once to this run's check of the day, which releases
        their columns when its numbers are computed (ten million records held once)."""
        data, self.data = self.data, None
        if data is None:
            raise DecGuardError(f"the records of {self.day} were already handed to a check")
        return data


def _check_segments(data: RecordSet, loaded: LoadedContract) -> None:
    """A segment value DecGuard cannot group by fails ``check``: fail the ingestion too."""
    for key in loaded.contract.production.segments:
        partition(data.columns, key)


def file_digest(path: Path) -> str:
    """``sha256:`` of a file's bytes (hashing releases the GIL: it runs beside the load); a
    file only (the load refuses anything else, and a device would be hashed for ever)."""
    require_file(path, WHAT)
    with path.open("rb") as stream:
        return "sha256:" + hashlib.file_digest(stream, "sha256").hexdigest()


def ingest_day(entry: ContractEntry, day: str, step: Step) -> Ingested:
    """Check the day's records strictly and write them, normalised, to
    ``production_records``; the records file wins over ``production_inbox`` rows."""
    if parse_day(day) is None:
        raise DecGuardError(f"{entry.key}: {day!r} is not a day (YYYY-MM-DD)")
    wh = step.warehouse
    path = day_file(entry.key, day)
    if path.is_file():
        return _ingest(entry, day, step, path, FILE, str(path))
    if not has_inbox(wh, entry.key, day):
        raise DatasetError(
            f"{entry.key}: no production records for {day}: no file {path} and no "
            f"{INBOX} rows (contract={entry.key}, target={day}) in {wh.root}"
        )
    where = inbox_ref(entry.key, day)
    with tempfile.TemporaryDirectory(prefix="decguard-production-") as tmp:
        lines = Path(tmp) / "inbox.jsonl"
        with wh.bulk():  # a day's records: every core
            rows = wh.rows(
                INBOX,
                "contract = $c AND target = $d",
                {"c": entry.key, "d": day},
                order="recorded_at, run_id, position",  # batches in write order
            )
        write_inbox_lines(rows, where, lines)
        try:
            return _ingest(entry, day, step, lines, TABLE, where)
        except DatasetError as exc:
            raise DatasetError(_as_rows(str(exc), lines, where)) from None


def _as_rows(message: str, path: Path, label: str) -> str:
    """A message about the inbox's records as JSON lines, naming the inbox and its rows."""
    message = message.replace(str(path), label)
    message = message.replace(f"{label}: line ", f"{label}: row ")
    return message.replace("(first at line ", "(first at row ")


def _ingest(
    entry: ContractEntry, day: str, step: Step, path: Path, source: str, where: str
) -> Ingested:
    """Load ``path`` as ``check`` loads a records file, each accepted stretch written to
    ``production_records`` as it comes; nothing is published unless every record holds."""
    loaded = entry.require()
    spec = loaded.contract.spec()
    keys = {"contract": entry.key, "target": day, "run_id": step.run_id,
            "recorded_at": step.at, "source": source, "source_path": where}  # fmt: skip
    wh = step.warehouse
    with (
        ThreadPoolExecutor(1) as hasher,
        wh.writing(
            RECORDS,
            contract=entry.key,
            target=day,
            run_id=step.run_id,
            recorded_at=step.at,
        ) as append,
    ):
        digest = hasher.submit(file_digest, path)
        with threaded_writer(spec, keys, digest, append) as writer:
            data = load_records(path, spec, **loader_options(loaded), sink=writer, hashed=digest)
            _check_segments(data, loaded)
    data = dataclasses.replace(data, path=where)
    counts = np.bincount(data.columns.selected, minlength=len(spec.labels))
    by_label = {label: int(count) for label, count in zip(spec.labels, counts, strict=False)}
    assert writer.shown is not None
    return Ingested(
        day, source, where, data.hash, data, writer.shown, by_label,
        n=len(data), n_outcomes=data.n_outcomes, n_correctness=data.n_correctness,
    )  # fmt: skip


def stored_file(
    entry: ContractEntry, day: str, warehouse: Warehouse, run_id: str | None = None
) -> tuple[Path, dict[str, Any]]:
    """The ``production_records`` of run ``run_id`` (else of the newest ingestion) as a
    local Parquet file, and its first row's source, path, hash and run."""
    path = None if run_id is None else warehouse.local_copy(RECORDS, entry.key, day, run_id)
    if path is None:
        newest = warehouse.newest_run(RECORDS, entry.key, day)
        path = None if newest is None else warehouse.local_copy(RECORDS, entry.key, day, newest)
    first = next(read_batches(path, list(_FIRST), 1), None) if path is not None else None
    if path is None or first is None or not first.num_rows:
        raise DecGuardError(f"{entry.key}: no production records ingested for {day} yet")
    return path, first.to_pylist()[0]


_FIRST = ("source", "source_path", "dataset_hash", "run_id")


def load_stored(
    entry: ContractEntry,
    day: str,
    warehouse: Warehouse,
    *,
    segments: bool = True,
    run_id: str | None = None,
) -> tuple[RecordSet, dict[str, Any], Path]:
    """A day's records as run ``run_id`` ingested them (else the newest ingestion), checked
    again under the current contract, column-wise (record by record where the columns
    cannot tell), with the source's path and hash as ingested; the first stored row
    (source, run) and the stored file."""
    loaded = entry.require()
    path, first = stored_file(entry, day, warehouse, run_id)
    options = loader_options(loaded, segments)
    data = load_stretches(
        stored_stretches(path, options["segment_keys"]), loaded.contract.spec(),
        **options, path=f"warehouse:{RECORDS}/{entry.key}/{day}", hash=first["dataset_hash"],
        items=lambda: stored_items(path),
    )  # fmt: skip
    return dataclasses.replace(data, path=first["source_path"]), first, path

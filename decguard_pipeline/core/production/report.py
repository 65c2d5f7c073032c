"""The production check report (``check_version`` 0.1, spec §11.5).

A report is a JSON-ready dict in DecGuard's field order (``document``, everything but the
records) plus an iterable of the normalised records, streamed into ``records`` when the
report is written: a check of ten million records never holds them as one object.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from decguard_pipeline.core.atomic_file import atomic_output
from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.gates import EXIT_CODES, overall_status
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.production.checks import aggregate_checks
from decguard_pipeline.core.production.columns import Columns
from decguard_pipeline.core.production.drift import compute_drift
from decguard_pipeline.core.production.loader import RecordSet, release_free_memory
from decguard_pipeline.core.production.record_text import string_bytes
from decguard_pipeline.core.production.segments import measure
from decguard_pipeline.core.report.golden import contract_section
from decguard_pipeline.core.report.jsonio import dumps, print_document, write_document
from decguard_pipeline.core.report.write_behind import WriteBehind
from decguard_pipeline.core.report.written_pages import WrittenPages

CHECK_VERSION = "0.1"


@dataclass
class Baseline:
    """What a check compares against: DecGuard's ``baseline`` section, and the baseline's
    columns for the extension drift measures."""

    info: dict[str, Any]
    columns: Columns


@dataclass
class ProductionReport:
    document: dict[str, Any]  # every field but "records", in DecGuard's order
    columns: Columns
    records: Callable[[], Iterable[dict[str, Any]]]  # streams the normalised records
    baseline: Baseline | None = None
    extensions: dict[str, Any] | None = field(default=None)
    # metrics per model_version present (in code order of columns.versions), for extensions
    by_version: list[dict[str, Any]] | None = field(default=None)

    @property
    def status(self) -> str:
        return str(self.document["status"])

    def full(self) -> dict[str, Any]:
        """The whole report as one dict (small reports, tests)."""
        return {**self.document, "records": list(self.records())}

    def write(self, path: str | Path) -> None:
        write_document(
            path, self.document, stream_key="records", items=self.records(),
            what="production report",
        )  # fmt: skip

    def print_json(self) -> None:
        print_document(self.document, stream_key="records", items=self.records())


_RECORDS_MARK = "__decguard_records_here__"


SEPARATOR = ",\n    "  # before each record of a report's ``records`` (the first: "[\n    ")


def write_with_records(
    path: str | Path,
    document: dict[str, Any],
    texts: Iterable[pa.Array | pa.ChunkedArray],
) -> str:
    """``document`` (indented as orjson indents it) with its ``records`` list made of
    ``texts``, each the record's indented JSON after :data:`SEPARATOR`
    (``record_text.record_texts(..., indented=True, prefix=SEPARATOR)``): each chunk is
    written and hashed on a thread of its own while the next batch is made (``write_behind``).
    The same bytes as :meth:`Report.write`. Returns the sha256 of the bytes written."""
    whole = dumps({**document, "records": _RECORDS_MARK}).encode()
    at = whole.index(f'"{_RECORDS_MARK}"'.encode())
    digest = hashlib.sha256()
    try:
        with atomic_output(path) as stream:
            pages = WrittenPages(stream)

            def written(data: Any) -> None:
                digest.update(data)
                pages.wrote(len(data))

            with WriteBehind(stream, written) as out:
                out.put(whole[:at])
                first = True
                for batch in texts:
                    chunks = batch.chunks if isinstance(batch, pa.ChunkedArray) else [batch]
                    for chunk in chunks:
                        if not len(chunk):
                            continue
                        data = string_bytes(chunk)
                        # the first record has no comma before it
                        out.put(b"[\n" + bytes(data[2:]) if first else data)
                        first = False
                out.put(b"[]" if first else b"\n  ]")
                out.put(whole[at + len(_RECORDS_MARK) + 2 :] + b"\n")
    except OSError as exc:
        raise ReportError(f"{path}: cannot write production report: {exc.strerror or exc}") from exc
    return digest.hexdigest()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def version_partition(columns: Columns) -> tuple[np.ndarray, int]:
    """Each record's model_version as an index into the versions present."""
    book = columns.versions
    present = np.flatnonzero(np.bincount(columns.model_version, minlength=len(book.values)))
    lookup = np.zeros(max(len(book.values), 1), dtype=np.int32)
    lookup[present] = np.arange(len(present))
    return lookup[columns.model_version], len(present)


def evaluate(
    loaded: LoadedContract, columns: Columns, baseline_metrics: dict[str, Any] | None
) -> dict[str, Any]:
    """metrics, drift, segments, checks, status and exit code of a record set (and, for
    the extensions, the metrics per model_version)."""
    contract = loaded.contract
    versions = version_partition(columns)
    metrics, later, (by_version,) = measure(
        columns, contract.production, contract.evaluation, [versions]
    )
    drift = compute_drift(metrics, baseline_metrics)
    segments = later()
    release_free_memory()
    checks = aggregate_checks(contract.production, metrics, drift)
    checks += [check for segment in segments for check in segment["checks"]]
    status = overall_status(checks)
    return {
        "metrics": metrics,
        "drift": drift,
        "segments": segments,
        "checks": checks,
        "status": status,
        "exit_code": EXIT_CODES[status],
        "by_version": by_version,
    }


def build_report(
    loaded: LoadedContract,
    data: RecordSet,
    *,
    baseline: Baseline | None = None,
    created_at: str | None = None,
) -> ProductionReport:
    """Evaluate a record set against the contract's production section."""
    contract = loaded.contract
    result = evaluate(loaded, data.columns, baseline.info["metrics"] if baseline else None)
    document = {
        "check_version": CHECK_VERSION,
        "decguard_version": PRODUCER_VERSION,
        "created_at": created_at or now_iso(),
        "status": result["status"],
        "exit_code": result["exit_code"],
        "contract": contract_section(loaded),
        "evaluation": contract.evaluation.model_dump(),
        "config": contract.production.model_dump(mode="json"),
        "dataset": {
            "path": data.path,
            "hash": data.hash,
            "n_records": len(data),
            "n_outcomes": data.n_outcomes,
            "n_correctness": data.n_correctness,
        },
        "baseline": None if baseline is None else baseline.info,
        "metrics": result["metrics"],
        "drift": result["drift"],
        "segments": result["segments"],
        "checks": result["checks"],
        "records": None,  # streamed when written
    }
    report = ProductionReport(document, data.columns, data.records, baseline)
    report.by_version = result["by_version"]
    return report


def records_of(items: list[dict[str, Any]]) -> Callable[[], Iterator[dict[str, Any]]]:
    return lambda: iter(items)

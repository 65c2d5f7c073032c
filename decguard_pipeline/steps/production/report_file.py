"""``check -o``: the report file written as the pipeline writes a day's.

Encoding a report one record at a time was 72 s of CPU of the 78 s ``check -o`` took on ten
million records. Here the loader's accepted stretches are kept as ``production_records`` rows in a
temporary Parquet file beside the report (built and written on two threads while the loader
checks the next stretches, as an ingestion does), and the report's records are then
assembled column-wise from it (``check.write_report``, the pipeline's writer: the same bytes,
which the differential tests compare with the record-by-record writer). Where the file cannot
be kept (the report's folder refuses it) the report is written record by record as before.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.production.check import run_check
from decguard_pipeline.core.production.report import ProductionReport
from decguard_pipeline.steps.production.check import write_report
from decguard_pipeline.warehouse.rows.production_records import (
    PARQUET,
    RECORDS,
    threaded_writer,
)
from decguard_pipeline.warehouse.schema import TABLES

if TYPE_CHECKING:
    from decguard_pipeline.core.calibration.artifact import LoadedCalibrator


def check_to_file(
    loaded: LoadedContract,
    dataset: Path,
    baseline: Path | None,
    output: Path,
    calibrator: LoadedCalibrator | None = None,
) -> ProductionReport:
    """``run_check`` of ``dataset`` with its report written to ``output``."""
    spec = loaded.contract.spec()
    # beside the report (not a RAM-backed /tmp), in its nearest existing folder: the folders
    # the report needs are made only when it is written, after the records are checked
    near = next((d for d in (output.parent, *output.parent.parents) if d.is_dir()), Path("."))
    try:
        folder = tempfile.TemporaryDirectory(prefix=".decguard-check-", dir=near)
    except OSError:  # the report's own write says why, after the records are checked
        report = run_check(loaded, dataset=dataset, baseline=baseline, calibrator=calibrator)
        report.write(output)
        return report
    keys = {"contract": "", "target": "", "run_id": "", "recorded_at": datetime.now(UTC),
            "source": "file", "source_path": str(dataset), "dataset_hash": ""}  # fmt: skip
    with folder as tmp:
        rows = Path(tmp) / "records.parquet"
        with (
            pq.ParquetWriter(rows, TABLES[RECORDS], compression="zstd", **PARQUET) as out,
            threaded_writer(spec, keys, None, out.write_table) as sink,
        ):
            report = run_check(
                loaded, dataset=dataset, baseline=baseline, sink=sink, calibrator=calibrator
            )
        if sink.count == report.document["dataset"]["n_records"]:
            write_report(report.document, output, rows, spec)
        else:  # not every record reached the sink: never a report missing one
            report.write(output)
    return report

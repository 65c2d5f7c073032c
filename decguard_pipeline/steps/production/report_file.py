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

import contextlib
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.contract.decision import DecisionSpec
from decguard_pipeline.core.production.check import run_check
from decguard_pipeline.core.production.report import ProductionReport
from decguard_pipeline.steps.production.check import write_report
from decguard_pipeline.warehouse.rows.production_records import PARQUET, RECORDS, RecordsWriter
from decguard_pipeline.warehouse.schema import TABLES


@contextlib.contextmanager
def kept_rows(spec: DecisionSpec, path: Path, source: str) -> Iterator[RecordsWriter]:
    """A loader sink keeping every accepted record as a ``production_records`` row in the
    Parquet file ``path`` (complete once the block ends without error)."""
    keys = {"contract": "", "target": "", "run_id": "", "recorded_at": datetime.now(UTC),
            "source": "file", "source_path": source, "dataset_hash": ""}  # fmt: skip
    with (
        ThreadPoolExecutor(1) as building,
        ThreadPoolExecutor(1) as writing,
        pq.ParquetWriter(path, TABLES[RECORDS], compression="zstd", **PARQUET) as out,
    ):
        writer = RecordsWriter(spec, keys, None, out.write_table, (building, writing))
        try:
            yield writer
            writer.finish()
        except BaseException:
            writer.abandon()
            raise


def check_to_file(
    loaded: LoadedContract, dataset: Path, baseline: Path | None, output: Path
) -> ProductionReport:
    """``run_check`` of ``dataset`` with its report written to ``output``."""
    spec = loaded.contract.spec()
    # beside the report (not a RAM-backed /tmp), in its nearest existing folder: the folders
    # the report needs are made only when it is written, after the records are checked
    near = next((d for d in (output.parent, *output.parent.parents) if d.is_dir()), Path("."))
    try:
        folder = tempfile.TemporaryDirectory(prefix=".decguard-check-", dir=near)
    except OSError:  # the report's own write says why, after the records are checked
        report = run_check(loaded, dataset=dataset, baseline=baseline)
        report.write(output)
        return report
    with folder as tmp:
        rows = Path(tmp) / "records.parquet"
        with kept_rows(spec, rows, str(dataset)) as sink:
            report = run_check(loaded, dataset=dataset, baseline=baseline, sink=sink)
        if sink.count == report.document["dataset"]["n_records"]:
            write_report(report.document, output, rows, spec)
        else:  # not every record reached the sink: never a report missing one
            report.write(output)
    return report

"""``check``: production records against a contract's post-deployment gates (spec §11).

No backend is called. The records come from a ``.jsonl``/``.json`` file or an Arrow table;
the optional baseline is another records file or a stored check report (verified, then its
records re-checked against the current contract).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa

from decguard_pipeline.core.contract import LoadedContract, load_contract
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.json_limits import (
    first_significant,
    open_regular,
    read_bounded,
    too_deep,
)
from decguard_pipeline.core.production.loader import (
    RecordSet,
    RecordSink,
    load_records,
    load_table,
)
from decguard_pipeline.core.production.metrics import production_metrics
from decguard_pipeline.core.production.report import Baseline, ProductionReport, build_report
from decguard_pipeline.core.production.verify import load_production_report, record_columns

if TYPE_CHECKING:
    from decguard_pipeline.core.calibration.artifact import LoadedCalibrator


def looks_like_report(path: Path) -> bool:
    """DecGuard's test: a ``.json`` file holding an object with a ``check_version`` key.
    Decided without parsing when it can be: a records array is not a report; an object too
    large or too deep to parse is one, and so is a ``.json`` path that is not a regular file
    (the report loader then says why it cannot be read)."""
    if path.suffix.lower() != ".json":
        return False
    try:
        stream = open_regular(path, "production report")
    except ReportError:
        return True
    except OSError:
        return False
    with stream:
        head = stream.read(1 << 16)
        first = first_significant(head)
        if first is not None and first != ord("{"):
            return False
        try:
            stream.seek(0)
            raw = read_bounded(stream, path, "production report")
        except ReportError:
            return True
        except OSError:
            return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if too_deep(raw) is not None:
        return True
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            value = json.loads(raw.decode("utf-8"))
        except ValueError:
            return False
    return isinstance(value, dict) and "check_version" in value


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        raise ReportError(f"{path}: cannot read baseline report: {exc.strerror or exc}") from exc
    return "sha256:" + digest.hexdigest()


def load_baseline(loaded: LoadedContract, path: str | Path) -> Baseline:
    """The baseline section (metrics under the current evaluation) and its columns."""
    contract = loaded.contract
    spec = contract.spec()
    evaluation = contract.evaluation
    path = Path(path)
    if looks_like_report(path):
        stored = load_production_report(path)
        theirs = stored.spec
        if (theirs.name, theirs.type, theirs.labels) != (spec.name, spec.type, spec.labels):
            raise ReportError(
                f"baseline report {path} is for {theirs.name!r} ({theirs.type}, "
                f"{list(theirs.labels)}), not {spec.name!r} ({spec.type}, {list(spec.labels)})"
            )
        columns = record_columns(
            stored.records, spec, evaluation.probability_tolerance, (), source=str(path)
        )
        source, digest = "report", _file_hash(path)
    else:
        data = load_records(path, spec, tolerance=evaluation.probability_tolerance)
        columns, source, digest = data.columns, "dataset", data.hash
    info = {
        "source": source,
        "path": str(path),
        "hash": digest,
        "n_records": len(columns),
        "metrics": production_metrics(columns, evaluation),
    }
    return Baseline(info, columns)


def load_dataset(
    loaded: LoadedContract,
    dataset: str | Path | pa.Table,
    *,
    path: str | None = None,
    hash: str | None = None,
    sink: RecordSink | None = None,
) -> RecordSet:
    contract = loaded.contract
    options: dict[str, Any] = {
        "tolerance": contract.evaluation.probability_tolerance,
        "segment_keys": contract.production.segments,
    }
    if isinstance(dataset, pa.Table):
        return load_table(dataset, contract.spec(), path=path or "<table>", hash=hash, **options)
    return load_records(dataset, contract.spec(), sink=sink, **options)


def run_check(
    contract: LoadedContract | str | Path,
    *,
    dataset: str | Path | pa.Table,
    baseline: str | Path | None = None,
    dataset_path: str | None = None,
    dataset_hash: str | None = None,
    sink: RecordSink | None = None,
    calibrator: LoadedCalibrator | None = None,
) -> ProductionReport:
    """Check production records (a file, or an Arrow table named ``dataset_path``) against the
    contract, optionally against a baseline; extension results are attached. ``sink`` sees
    every record of a records file as it is accepted (``loader.load_records``); with
    ``calibrator``, the records re-decided on calibrated probabilities are the extension
    section ``calibrated`` (``calibrated.py``)."""
    from decguard_pipeline.core.production.extensions import extension_results

    loaded = contract if isinstance(contract, LoadedContract) else load_contract(contract)
    data = load_dataset(loaded, dataset, path=dataset_path, hash=dataset_hash, sink=sink)
    base = load_baseline(loaded, baseline) if baseline is not None else None
    report = build_report(loaded, data, baseline=base)
    report.extensions = extension_results(loaded, report)
    if calibrator is not None:
        from decguard_pipeline.core.production.calibrated import SECTION, calibrated_check

        report.extensions[SECTION] = calibrated_check(report.records(), calibrator, loaded.contract)
    return report

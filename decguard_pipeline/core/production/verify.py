"""Load a stored check report and verify it exactly as DecGuard does.

The schema is checked first (all problems listed, DecGuard's ``location: message`` lines);
then, in DecGuard's order, the records (unique ids, each valid under the report's own
contract and tolerance, stored in normalised form), the dataset counts, and the metrics,
drift, segments, checks, status and exit code recomputed from the records, which must equal
the stored ones. Any difference means the file was edited or corrupted: ``ReportError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from pydantic import ValidationError

from decguard_pipeline.core import json_exact
from decguard_pipeline.core.contract import Evaluation, Production
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.errors import DatasetError, ReportError
from decguard_pipeline.core.gates import EXIT_CODES, overall_status
from decguard_pipeline.core.json_limits import read_document, structure_problem
from decguard_pipeline.core.production import schema
from decguard_pipeline.core.production.checks import aggregate_checks
from decguard_pipeline.core.production.columns import Columns, ColumnsBuilder
from decguard_pipeline.core.production.drift import compute_drift
from decguard_pipeline.core.production.records import (
    RECORD_KEYS,
    Item,
    check_items,
    plain_record,
)
from decguard_pipeline.core.production.report import CHECK_VERSION
from decguard_pipeline.core.production.segments import measure
from decguard_pipeline.core.validation import format_errors


class Invalid(Exception):
    """A semantic inconsistency, reported as ``(root): <message>``."""


@dataclass
class StoredReport:
    """A verified report: its document (records apart), records and columns."""

    path: Path
    document: dict[str, Any]
    records: list[dict[str, Any]]
    columns: Columns

    @property
    def spec(self) -> DecisionSpec:
        c = self.document["contract"]
        return DecisionSpec(c["name"], c["type"], tuple(c["labels"]))


def _fail(path: Path, lines: str) -> ReportError:
    return ReportError(f"{path}: not a DecGuard production report {CHECK_VERSION}:\n{lines}")


def _plain_stored(record: Any, labels: frozenset[str]) -> bool:
    """A stored record with every field of the expected JSON type (no coercion applies)."""
    return (
        type(record) is dict
        and record.keys() <= RECORD_KEYS
        and "id" in record
        and "confidence" in record
        and plain_record(record, 0, labels) is not None
    )


def _structure(path: Path, raw: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The validated header (as plain values) and records, or DecGuard's schema errors."""
    try:
        data = json_exact.loads(raw)  # huge integers go to the full schema, exact
    except orjson.JSONDecodeError:
        data = None
    header: schema.ReportHeader | None = None
    if isinstance(data, dict) and isinstance(data.get("records"), list):
        try:
            fields = {k: v for k, v in data.items() if k != "records"}
            header = schema.ReportHeader.model_validate(fields)
        except ValidationError:
            header = None
    if header is not None:
        labels = frozenset(header.contract.labels)
        records = data["records"]  # type: ignore[index]
        if all(_plain_stored(r, labels) for r in records):
            return header.model_dump(mode="json"), records
    # something is not plain: the full schema explains it (or coerces it) as DecGuard does
    try:
        model = schema.ProductionReport.model_validate_json(raw)
    except ValidationError as exc:
        raise _fail(path, format_errors(exc)) from exc
    document = model.model_dump(mode="json", exclude={"records"})
    return document, [record.model_dump(mode="json") for record in model.records]


def _first_problem(
    records: list[dict[str, Any]], spec: DecisionSpec, tolerance: float, builder: ColumnsBuilder
) -> None:
    # segment values are noted here but, as in DecGuard, only rejected when segments are built
    """DecGuard's per-record checks in its order: repeated id, contract invariants, then
    normalised form; the first failing record decides the message."""
    seen: set[str] = set()
    duplicate = None
    for i, record in enumerate(records):
        if record["id"] in seen:
            duplicate = i
            break
        seen.add(record["id"])
    items = [Item(r, i + 1) for i, r in enumerate(records)]
    checked = check_items(
        items, spec, tolerance, builder.keys, builder.versions, builder.segment_values
    )
    bad = checked.first_bad
    unnormalised = next(
        (
            i
            for i, r in enumerate(records)
            if r.get("outcome") is not None and r.get("outcome_correct") is None
        ),
        None,
    )
    problems = []
    if duplicate is not None:
        record_id = records[duplicate]["id"]
        problems.append((duplicate, 0, f"duplicate production record id {record_id!r}"))
    if bad is not None:
        index, problem = bad
        problems.append((index, 1, f"records[{records[index]['id']}]: {problem}"))
    if unnormalised is not None:
        record_id = records[unnormalised]["id"]
        problems.append((unnormalised, 2, f"record {record_id!r} is not canonically normalized"))
    if problems:
        raise Invalid(min(problems)[2])
    assert checked.batch is not None
    builder.add(checked.batch)


def record_columns(
    records: list[dict[str, Any]],
    spec: DecisionSpec,
    tolerance: float,
    segment_keys: tuple[str, ...],
    *,
    source: str,
) -> Columns:
    """Columns of stored (normalised) records checked against a contract; a problem is
    raised as ``{source}: records[<id>]: <message>``."""
    builder = ColumnsBuilder(spec, segment_keys)
    items = [Item(r, i + 1) for i, r in enumerate(records)]
    checked = check_items(
        items, spec, tolerance, segment_keys, builder.versions, builder.segment_values
    )
    if checked.first_bad is not None:
        index, problem = checked.first_bad
        raise DatasetError(f"{source}: records[{records[index]['id']}]: {problem}")
    if checked.batch is not None:
        builder.add(checked.batch)
    return builder.build()


def _recompute(document: dict[str, Any], records: list[dict[str, Any]]) -> Columns:
    contract = document["contract"]
    spec = DecisionSpec(contract["name"], contract["type"], tuple(contract["labels"]))
    evaluation = Evaluation.model_validate(document["evaluation"])
    config = Production.model_validate(document["config"])
    if not records:
        raise Invalid("production report contains no records")
    builder = ColumnsBuilder(spec, config.segments)
    _first_problem(records, spec, evaluation.probability_tolerance, builder)
    columns = builder.build()
    compare(document, columns)
    return columns


def compare(document: dict[str, Any], columns: Columns) -> None:
    """Everything a report states about its records, recomputed from their columns: raises
    :class:`Invalid` naming the first section that differs, in DecGuard's order."""
    evaluation = Evaluation.model_validate(document["evaluation"])
    config = Production.model_validate(document["config"])
    counts = (
        len(columns),
        int(np.count_nonzero(columns.outcome >= 0)),
        int(np.count_nonzero(columns.correct >= 0)),
    )
    dataset = document["dataset"]
    if counts != (dataset["n_records"], dataset["n_outcomes"], dataset["n_correctness"]):
        raise Invalid("dataset counts do not match stored production records")
    metrics, segments_of, _ = measure(columns, config, evaluation)
    if metrics != document["metrics"]:
        raise Invalid("metrics do not match stored production records")
    baseline = document["baseline"]
    if baseline is not None and (
        baseline["n_records"] <= 0
        or baseline["n_records"] != baseline["metrics"]["counts"]["total"]
    ):
        raise Invalid("baseline record count does not match baseline metrics")
    drift = compute_drift(metrics, None if baseline is None else baseline["metrics"])
    if drift != document["drift"]:
        raise Invalid("drift does not match current and baseline metrics")
    segments = segments_of()
    if segments != document["segments"]:
        raise Invalid("segments do not match stored production records")
    checks = aggregate_checks(config, metrics, drift)
    checks += [check for segment in segments for check in segment["checks"]]
    if checks != document["checks"]:
        raise Invalid("checks do not match metrics and production configuration")
    status = overall_status(checks)
    if document["status"] != status or document["exit_code"] != EXIT_CODES[status]:
        raise Invalid("status/exit_code do not match stored checks")


def load_production_report(path: str | Path) -> StoredReport:
    """Read, verify and return a stored check report. Size, top level and nesting are
    checked before anything is parsed (``json_limits``)."""
    path = Path(path)
    try:
        raw = read_document(path, "production report")
    except OSError as exc:
        raise ReportError(f"{path}: cannot read production report: {exc.strerror or exc}") from exc
    problem = structure_problem(raw)
    if problem is not None:
        raise _fail(path, f"  {problem}")
    document, records = _structure(path, raw)
    try:
        columns = _recompute(document, records)
    except Invalid as exc:
        raise _fail(path, f"  (root): {exc}") from exc
    return StoredReport(path, document, records, columns)

"""Load a stored test/fuzz report and verify it exactly as DecGuard does.

Every result is re-validated with the report's own probability tolerance; metrics, failures,
property comparisons, checks, status and exit code are recomputed and must equal the stored
values bit for bit. Any difference means the file was edited or corrupted: ``ReportError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from pydantic import ValidationError

from decguard_pipeline.core import json_exact
from decguard_pipeline.core.collector import gc_paused, hand_off
from decguard_pipeline.core.contract import Evaluation, Gates
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.json_limits import (
    PARSER_DEPTH,
    ReadAhead,
    check_utf8,
    read_document,
    read_writable,
    structure_problem,
)
from decguard_pipeline.core.properties import typed_section
from decguard_pipeline.core.report import halves, typed_records
from decguard_pipeline.core.report.golden import (
    Report,
)
from decguard_pipeline.core.report.schema import ReportDocument, ReportModel
from decguard_pipeline.core.report.semantics import Invalid, assembled, fail
from decguard_pipeline.core.report.typed_records import stored_tolerance
from decguard_pipeline.core.result_records import results_hold
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.core.secrets import redact
from decguard_pipeline.core.validation import format_errors

RECORD_KEYS = frozenset({"case_id", "input", "expected", "metadata", "result", "error"})
RESULT_KEYS = frozenset(
    {"case_id", "decision", "decision_type", "labels", "probabilities", "selected", "confidence",
     "backend", "provider", "model", "model_version", "latency_ms", "metadata"}
)  # fmt: skip
RESULT_REQUIRED = RESULT_KEYS - {"model", "model_version", "metadata"}


def _record_ok(record: Any) -> bool:
    """True when a stored case record is plainly well-formed; the result's invariants are
    checked for all records at once by :func:`_results_hold` (pydantic explains failures)."""
    if type(record) is not dict or not record.keys() <= RECORD_KEYS:
        return False
    if type(record.get("case_id")) is not str or type(record.get("input")) not in (str, dict):
        return False
    expected = record.get("expected")
    if expected is not None and type(expected) is not str:
        return False
    if type(record.get("metadata", {})) is not dict:
        return False
    result, error = record.get("result"), record.get("error")
    if (result is None) == (error is None):
        return False
    if error is not None:
        return (
            type(error) is dict
            and error.keys() == {"kind", "message"}
            and type(error["kind"]) is str
            and type(error["message"]) is str
        )
    if type(result) is not dict or not (RESULT_REQUIRED <= result.keys() <= RESULT_KEYS):
        return False
    if result["case_id"] != record["case_id"]:
        return False
    if result["decision_type"] not in ("choice", "noul", "score"):
        return False
    for key in ("case_id", "decision", "selected", "backend", "provider"):
        if type(result[key]) is not str:
            return False
    for key in ("model", "model_version"):
        if result.get(key) is not None and type(result[key]) is not str:
            return False
    if type(result.get("metadata", {})) is not dict:
        return False
    labels, probabilities = result["labels"], result["probabilities"]
    if type(labels) is not list or not all(type(x) is str for x in labels):
        return False
    if type(probabilities) is not dict:
        return False
    for value in (result["confidence"], result["latency_ms"]):
        if type(value) not in (float, int):
            return False
    result["confidence"] = float(result["confidence"])
    result["latency_ms"] = float(result["latency_ms"])
    return True


def _results_hold(records: list[dict[str, Any]], tolerance: float) -> bool:
    """Every stored result's invariants (see schema.check_result_invariants), checked for all
    records at once (schema.results_hold)."""
    return results_hold((r["result"] for r in records if r.get("result") is not None), tolerance)


def _validate_strictly(path: Path, raw: bytes, tolerance: float) -> ReportDocument:
    """The whole report through DecGuard's structural schema, in JSON mode, so that every
    problem is described exactly as DecGuard describes it (JSON-mode wording, all fields in
    document order, at most 20 lines). Only reports the fast path rejects come here."""
    try:
        return ReportDocument.model_validate_json(raw, context={"probability_tolerance": tolerance})
    except ValidationError as exc:
        raise fail(path, format_errors(exc)) from exc


def _lenient_json(raw: bytes) -> Any:
    """The document as Python's json reads it (NaN and Infinity allowed), or None."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def columns_from_records(
    spec: DecisionSpec, backend: str, provider: str, records: list[dict[str, Any]]
) -> CaseResults:
    """Columnar results from validated report records (in canonical label order)."""
    n, k = len(records), len(spec.labels)
    index = {label: i for i, label in enumerate(spec.labels)}
    probs = np.full((n, k), np.nan)
    selected = np.full(n, -1, dtype=np.int64)
    confidence = np.full(n, np.nan)
    latency = np.full(n, np.nan)
    model: list[str | None] = [None] * n
    version: list[str | None] = [None] * n
    meta: list[dict[str, Any]] = [{}] * n
    kinds: list[str | None] = [None] * n
    messages: list[str | None] = [None] * n
    for i, record in enumerate(records):
        result = record.get("result")
        if result is None:
            kinds[i] = record["error"]["kind"]
            messages[i] = record["error"]["message"]
            continue
        probs[i] = [float(v) for v in result["probabilities"].values()]
        selected[i] = index[result["selected"]]
        confidence[i] = result["confidence"]
        latency[i] = result["latency_ms"]
        model[i] = result.get("model")
        version[i] = result.get("model_version")
        meta[i] = redact(result.get("metadata", {}))
    return CaseResults(
        spec=spec,
        backend=backend,
        provider=provider,
        case_ids=[r["case_id"] for r in records],
        inputs=[r["input"] for r in records],
        expected=[r.get("expected") for r in records],
        metadata=[r.get("metadata", {}) for r in records],
        probs=probs,
        selected=selected,
        confidence=confidence,
        latency_ms=latency,
        model=model,
        model_version=version,
        result_metadata=meta,
        error_kind=kinds,
        error_message=messages,
    )


def _checked_columns(header: ReportModel, records: list[dict[str, Any]]) -> CaseResults:
    """Each record against the report's decision and backend, then the results as columns."""
    c = header.contract
    spec = DecisionSpec(c.name, c.type, tuple(c.labels))
    if not records:
        raise Invalid("report contains no case results")
    context = (c.name, c.type, tuple(c.labels), header.backend.name, header.backend.provider)
    seen: set[str] = set()
    for record in records:
        case_id = record["case_id"]
        if case_id in seen:
            raise Invalid(f"duplicate case id {case_id!r}")
        seen.add(case_id)
        expected = record.get("expected")
        if expected is not None and expected not in spec.labels:
            raise Invalid(f"case {case_id!r}: expected {expected!r} is not a report label")
        result = record.get("result")
        if result is not None:
            actual = (
                result["decision"],
                result["decision_type"],
                tuple(result["labels"]),
                result["backend"],
                result["provider"],
            )
            if actual != context:
                raise Invalid(
                    f"result {result['case_id']!r} does not match the report decision/backend "
                    "context"
                )
    return columns_from_records(spec, header.backend.name, header.backend.provider, records)


def load_report(
    path: str | Path,
    *,
    split: bool = False,
    read_ahead: ReadAhead | None = None,
    ahead: halves.Ahead | None = None,
) -> Report:
    """Read, verify and return a stored test/fuzz report; ReportError when it does not hold.
    Size is checked before anything is parsed; top level and nesting before anything but
    msgspec's typed decoding, which gives the values to measure the nesting with (else
    ``json_limits`` measures the bytes). ``split``: a big properties section may be decoded
    and checked by a forked child and this process, a part each (``halves``), where forking
    is safe (a command's process). ``read_ahead``: the report's bytes, being read already
    (its errors are this function's). ``ahead``: the report split, or found not to split,
    before this module was imported (``halves.split_ahead``, of ``read_ahead``), in place
    of ``split``."""
    path = Path(path)
    try:
        return _load_report(path, split, read_ahead, ahead)
    finally:
        if ahead is not None and ahead.split is not None:
            ahead.split[1].close()  # reaped here when the load stopped before it


def _load_report(
    path: Path, split: bool, read_ahead: ReadAhead | None, ahead: halves.Ahead | None
) -> Report:
    try:
        if read_ahead is not None:
            raw: bytes | halves.Writable = read_ahead.result()
        elif split:
            raw = read_writable(path, "report")
        else:
            raw = read_document(path, "report")
        # after the read: its thread is done
        split = split and ahead is None and halves.can_fork()
        check_utf8(raw)
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read report: {exc}") from exc
    # a big report is millions of acyclic objects, which collections would only walk, again
    # and again: paused while it is parsed and checked, then settled in the oldest generation
    with gc_paused(settle=True):
        typed = None
        if ahead is not None:
            typed = _load_halves(path, raw, ahead.split)
        elif split:
            typed = _load_halves(path, raw, halves.decode(raw))
        if typed is None:
            typed = _load_typed(path, raw)  # checks the nesting itself, from the values
        if typed is not None:
            return typed
        raw = bytes(raw)  # the readers below read bytes
        problem = structure_problem(raw)
        if problem is not None:
            raise fail(path, f"  {problem}")
        return _load(path, raw)


def _load(path: Path, raw: bytes) -> Report:
    try:
        data = json_exact.loads(raw)
    except orjson.JSONDecodeError:  # invalid, or NaN/Infinity/huge ints that orjson refuses
        data = None
    tolerance = stored_tolerance(data if data is not None else _lenient_json(raw))
    header: ReportModel | None = None
    records: list[Any] = []
    if isinstance(data, dict):
        # fast path: plain dict checks per record; pydantic only for the small header
        try:
            header = ReportModel.model_validate(data, context={"probability_tolerance": tolerance})
        except ValidationError:
            header = None
        records = data["results"] if header is not None else []
        if header is not None and not (
            all(_record_ok(r) for r in records) and _results_hold(records, tolerance)
        ):
            header = None
    plain_json = data is not None
    if header is None:
        data, records = None, []  # freed before pydantic parses the document again
        document = _validate_strictly(path, raw, tolerance)
        header = document
        records = [record.model_dump(mode="json") for record in document.results]
    # orjson refuses NaN and Infinity: when it read the file, the properties section is
    # plain JSON and may take the fast path
    return _assembled(path, header, lambda: _checked_columns(header, records), plain_json)


def _assembled(
    path: Path,
    header: ReportModel,
    columns: Callable[[], Any],
    plain_json: bool,
    *,
    typed: typed_section.TypedSection[Any] | None = None,
    held: typed_section.Held | None = None,
    later: halves.OtherHalf | None = None,
) -> Report:
    """``semantics.assembled`` of a validated header and its results (``columns``).
    ``typed``: the properties section's pairs and skips as typed records (the section is
    then the schema's normalised form already: ``typed_section.checked``) and ``held`` what
    ``typed_section.pairs_hold`` found of its pairs; ``later``: the pairs after them,
    decoded and checked by a child."""

    def section_checks(section: dict[str, Any], results: CaseResults) -> list[dict[str, Any]]:
        # imported here: golden-only reports never load the property machinery
        from decguard_pipeline.core.properties.report import verify_section

        return verify_section(
            section,
            results,
            header.mode,
            tolerance=header.evaluation.probability_tolerance,
            plain_json=plain_json,
            typed=typed,
            held=held,
            later=later,
        )

    doc = header.model_dump(mode="json", exclude={"results", "properties"})
    # the pairs held: their dicts are made when something reads the document
    pending = None if typed is None else typed_section.TypedPairs(typed.pairs, later)
    return assembled(path, header, doc, header.properties, columns, section_checks, pending)


def _load_halves(path: Path, raw: halves.Writable, split: halves.Split | None) -> Report | None:
    """``_load_typed`` with the later pairs of a big properties section decoded and checked
    by a forked child (``halves``); None when the report was not split, or does not plainly
    hold (the whole report is then loaded in one process)."""
    if split is None:
        return None
    decoded, later = split
    try:
        return _load_typed(path, raw, decoded=decoded, later=later)
    except typed_section.SplitRefused:
        return None
    finally:
        later.close()


def _load_typed(
    path: Path,
    raw: bytes | halves.Writable,
    *,
    decoded: typed_records.Decoded | None = None,
    later: halves.OtherHalf | None = None,
) -> Report | None:
    """The report through msgspec's typed records and column-wise checks
    (``typed_records``); None when they do not plainly hold, for the paths below to find
    and word the problem. What they accept, those paths accept too, with the same columns.
    ``decoded`` and ``later``: ``raw`` decoded but for its later pairs, which a child
    decoded and checks (``halves``); SplitRefused when anything about the pairs does not
    plainly hold."""
    decoded = decoded or typed_records.decode(raw)
    if decoded is None:
        return None
    data, records, shallow = decoded
    section = data.get("properties")
    # the nesting, from the values' types or the values instead of the bytes
    if not typed_records.nested_within(decoded, PARSER_DEPTH):
        return None
    if section is not None and not typed_section.nested_within(
        section, PARSER_DEPTH, shallow=shallow
    ):
        return None
    tolerance = stored_tolerance(data)
    if section is not None:
        data["properties"] = typed_section.checked(section)
        if data["properties"] is None:
            return None
    try:
        header = ReportModel.model_validate(data, context={"probability_tolerance": tolerance})
    except ValidationError:
        return None
    c = header.contract
    spec = DecisionSpec(c.name, c.type, tuple(c.labels))
    key = (spec, header.backend.name, header.backend.provider)
    rules = later.rules if later is not None else None
    if rules is not None and rules.key != key:
        raise typed_section.SplitRefused  # the child was sent rules for another header
    # the columns the child was sent were made from these records for this very header
    results = (
        rules.results if rules is not None else typed_records.columns(*key, records, tolerance)
    )
    if results is None:
        return None
    if later is not None and section is not None:  # and against the results, meanwhile
        from decguard_pipeline.core.contract.properties import Properties
        from decguard_pipeline.core.properties.limits import limits_of
        from decguard_pipeline.core.properties.pairs import OriginalColumns

        enabled = Properties.model_validate(data["properties"]["config"]).enabled()
        limits = {name: limits_of(config) for name, config in enabled.items()}
        if rules is None:
            later.send(limits, OriginalColumns.of(results))
        elif rules.limits != limits:
            raise typed_section.SplitRefused
    held = None
    if section is not None:  # with a child, once it has been sent all it needs (above)
        held = typed_section.pairs_hold(section.pairs, None, tolerance)
        if held is None:
            return None
    hand_off(records)  # in a command, freed with the process (100k structs: ~70 ms)
    del data, records, decoded
    # the properties section is the schema's normalised form already, its pairs typed
    return _assembled(
        path, header, lambda: results, plain_json=True, typed=section, held=held, later=later
    )


def evaluation_gates(doc: dict[str, Any]) -> tuple[Evaluation, Gates, Gates]:
    return (
        Evaluation.model_validate(doc["evaluation"]),
        Gates.model_validate(doc["requirements"]),
        Gates.model_validate(doc["warnings"]),
    )

"""The test/fuzz report (``report_version`` 0.1): construction from case results.

The report is a plain JSON-ready dict (``Report.document``, everything but ``results``) plus
the columnar results, streamed into ``results`` when written.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.gates import EXIT_CODES, overall_status
from decguard_pipeline.core.golden.gates import golden_checks
from decguard_pipeline.core.golden.metrics import gate_values, golden_metrics
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.results import CaseResults

if TYPE_CHECKING:  # the loader (YAML, the whole contract) only where a contract is run, and
    # the settings' models only where they are validated: ``report`` reads them as structs
    from decguard_pipeline.core.contract import Evaluation, Gates, LoadedContract

REPORT_VERSION = "0.1"
MODES = ("test", "fuzz", "all")


class PendingPairs(Protocol):
    """A loaded properties section's pairs not yet made into the schema's dicts
    (``typed_section.TypedPairs``)."""

    def dicts(self) -> list[dict[str, Any]]: ...

    def failed_dicts(self) -> list[dict[str, Any]]: ...


@dataclass
class Report:
    # every field except "results", in DecGuard's order (read it through ``document``)
    stored: dict[str, Any]
    results: CaseResults
    # sidecar sections computed with this run (never part of DecGuard's document)
    extensions: dict[str, Any] = field(default_factory=dict)
    # documents the run made besides its report (a fitted calibrator.json)
    products: dict[str, Any] = field(default_factory=dict)
    # a loaded report's property pairs, made into ``stored``'s dicts when ``document`` is
    # first read: a command that prints only the text never makes the 50k dicts
    pending: PendingPairs | None = field(default=None, repr=False, compare=False)

    @property
    def document(self) -> dict[str, Any]:
        if self.pending is not None:
            self.stored["properties"]["pairs"] = self.pending.dicts()
            self.pending = None
        return self.stored

    def __getstate__(self) -> dict[str, Any]:
        """Pickled or copied with its pairs made (typed records stay in this process)."""
        self.document  # noqa: B018 (makes the pending pairs)
        return dict(self.__dict__)

    @property
    def checks(self) -> list[dict[str, Any]]:
        checks: list[dict[str, Any]] = self.stored["checks"]
        return checks

    def text_document(self) -> dict[str, Any]:
        """The document as its text reads it: the whole ``document``, or while its pairs
        are pending, the document with only the failed pairs (the only ones shown)."""
        if self.pending is None:
            return self.stored
        section = {**self.stored["properties"], "pairs": self.pending.failed_dicts()}
        return {**self.stored, "properties": section}

    @property
    def status(self) -> str:
        return str(self.stored["status"])

    @property
    def mode(self) -> str:
        return str(self.stored["mode"])

    def full(self) -> dict[str, Any]:
        """The whole report as one dict (small reports, tests)."""
        doc = dict(self.document)
        doc["results"] = list(result_records(self.results))
        return doc


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# lists inside a report written a batch of records at a time (see jsonio.write_document)
CHUNKED_LISTS = (("properties", "pairs"),)


def result_records(results: CaseResults) -> Iterator[dict[str, Any]]:
    """The report's ``results`` entries, in dataset order."""
    spec = results.spec
    labels = list(spec.labels)
    name, kind, backend, provider = spec.name, spec.type, results.backend, results.provider
    ids = results.result_ids or results.case_ids
    probs = results.probs.tolist()
    selected = results.selected.tolist()
    confidence = results.confidence.tolist()
    latency = results.latency_ms.tolist()
    model, version, result_meta = results.model, results.model_version, results.result_metadata
    inputs, expected, metadata = results.inputs, results.expected, results.metadata
    for i, case_id in enumerate(results.case_ids):
        chosen = selected[i]
        if chosen >= 0:
            result: dict[str, Any] | None = {
                "case_id": ids[i],
                "decision": name,
                "decision_type": kind,
                "labels": labels,
                "probabilities": dict(zip(labels, probs[i], strict=True)),
                "selected": labels[chosen],
                "confidence": confidence[i],
                "backend": backend,
                "provider": provider,
                "model": model[i],
                "model_version": version[i],
                "latency_ms": latency[i],
                "metadata": result_meta[i],
            }
            error = None
        else:
            result = None
            error = {"kind": results.error_kind[i], "message": results.error_message[i]}
        yield {
            "case_id": case_id,
            "input": inputs[i],
            "expected": expected[i],
            "metadata": metadata[i],
            "result": result,
            "error": error,
        }


def failures(results: CaseResults) -> list[dict[str, Any]]:
    """Errored cases and labeled mistakes, in dataset order."""
    labels = results.labels
    exp = results.expected_index
    wrong = results.ok & (exp >= 0) & (results.selected != exp)
    rows = np.flatnonzero(~results.ok | wrong)
    selected = results.selected[rows].tolist()
    confidence = results.confidence[rows].tolist()
    ids, inputs, expected = results.case_ids, results.inputs, results.expected
    out = []
    for i, chosen, conf in zip(rows.tolist(), selected, confidence, strict=True):
        errored = chosen < 0
        out.append(
            {
                "case_id": ids[i],
                "kind": "error" if errored else "mismatch",
                "input": inputs[i],
                "expected": expected[i],
                "selected": None if errored else labels[chosen],
                "confidence": None if errored else conf,
                "error": f"{results.error_kind[i]}: {results.error_message[i]}"
                if errored
                else None,
            }
        )
    return out


def metrics_for(results: CaseResults, evaluation: Evaluation) -> dict[str, Any]:
    return golden_metrics(
        results,
        calibration_bins=evaluation.calibration_bins,
        confidence_threshold=evaluation.confidence_threshold,
    )


def checks_for(
    mode: str,
    requirements: Gates,
    warnings: Gates,
    metrics: dict[str, Any],
    property_checks: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    checks = golden_checks(requirements, warnings, gate_values(metrics)) if mode != "fuzz" else []
    return checks + (property_checks or [])


def build_report(
    loaded: LoadedContract,
    dataset: dict[str, Any],
    backend: dict[str, Any],
    results: CaseResults,
    *,
    health: dict[str, str] | None = None,
    mode: str = "test",
    properties: dict[str, Any] | None = None,
    property_checks: list[dict[str, Any]] | None = None,
    created_at: str | None = None,
) -> Report:
    """Evaluate results against a contract; pure apart from the timestamp."""
    contract = loaded.contract
    with gc_paused():  # a failure dict per mistake, 60k of them in a large run
        metrics = metrics_for(results, contract.evaluation)
        failed = failures(results)
    checks = checks_for(mode, contract.requirements, contract.warnings, metrics, property_checks)
    status = overall_status(checks)
    document: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "decguard_version": PRODUCER_VERSION,
        "created_at": created_at or now_iso(),
        "mode": mode,
        "status": status,
        "exit_code": EXIT_CODES[status],
        "contract": contract_section(loaded),
        "dataset": dataset,
        "backend": backend,
        "health": health,
        "evaluation": contract.evaluation.model_dump(),
        "requirements": contract.requirements.model_dump(),
        "warnings": contract.warnings.model_dump(),
        "metrics": metrics,
        "checks": checks,
        "failures": failed,
        "results": None,  # streamed from the columns when written
        "properties": properties,
    }
    return Report(document, results)


def with_property_results(
    report: Report,
    loaded: LoadedContract,
    properties: dict[str, Any] | None = None,
    property_checks: list[dict[str, Any]] | None = None,
) -> Report:
    """A copy of a ``test`` report, made now, as :func:`build_report` would make it from the
    same results: in mode ``all`` with the ``properties`` section and ``property_checks``
    when given, else as it is. The metrics and failures are the report's own (not computed
    again); the checks, status and exit code are those of the mode. The copy's extensions
    and products are its own, so adding to them leaves ``report`` as it was."""
    contract = loaded.contract
    document = dict(report.document)
    document["created_at"] = now_iso()
    if properties is not None:
        checks = checks_for("all", contract.requirements, contract.warnings,
                            document["metrics"], property_checks)  # fmt: skip
        status = overall_status(checks)
        document.update(mode="all", status=status, exit_code=EXIT_CODES[status], checks=checks,
                        properties=properties)  # fmt: skip
    return Report(document, report.results, dict(report.extensions), dict(report.products))


def contract_section(loaded: LoadedContract) -> dict[str, Any]:
    """The ``contract`` section of a report: which decision, which file, which version."""
    spec = loaded.contract.spec()
    return {
        "name": spec.name,
        "type": spec.type,
        "labels": list(spec.labels),
        "schema_version": loaded.contract.schema_version,
        "hash": loaded.hash,
        "path": str(loaded.path),
    }


def dataset_info(path: str, hash_: str, n_cases: int, n_labeled: int) -> dict[str, Any]:
    return {"path": path, "hash": hash_, "n_cases": n_cases, "n_labeled": n_labeled}

"""The semantic rules of a stored report whose header and results are read: the counts,
metrics, failures, properties section, checks, status and exit code recomputed and found
equal to the stored ones, a difference worded as DecGuard words it.

Free of pydantic: the header may be the schema's model (``verify``) or its structs
(``header_structs``, ``report``'s way for a big report), which carry the same attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.gates import EXIT_CODES, overall_status
from decguard_pipeline.core.report.golden import (
    REPORT_VERSION,
    Report,
    checks_for,
    failures,
    metrics_for,
)
from decguard_pipeline.core.results import CaseResults

# the properties section and the results -> the property checks, or ValueError
SectionChecks = Callable[[dict[str, Any], CaseResults], list[dict[str, Any]]]


class Invalid(Exception):
    """A semantic inconsistency, reported as ``(root): <message>`` unless ``lines`` (already
    located, like a schema error) are given."""

    def __init__(self, message: str, lines: str | None = None) -> None:
        super().__init__(message)
        self.lines = lines or f"  (root): {message}"


def fail(path: Path, lines: str) -> ReportError:
    """The error of a report that does not hold, with DecGuard's location ``lines``."""
    return ReportError(f"{path}: not a DecGuard {REPORT_VERSION} report:\n{lines}")


def assembled(
    path: Path,
    header: Any,
    doc: dict[str, Any],
    properties: dict[str, Any] | None,
    columns: Callable[[], CaseResults],
    section_checks: SectionChecks,
    pending: Any = None,
) -> Report:
    """The report of a validated header (``doc``: its normalised dict), properties section
    and results (``columns``, checked when called): the mode and every semantic rule
    checked, a failure worded as DecGuard words it. ``pending``: the section's typed pairs,
    whose dicts are made when something reads the document."""
    try:
        if (header.mode == "test") != (properties is None):
            raise Invalid("'properties' must be present exactly in 'fuzz' and 'all' reports")
        results = _checked(header, doc, properties, columns(), section_checks)
    except Invalid as exc:
        raise fail(path, exc.lines) from exc
    doc["results"] = None
    doc["properties"] = properties
    return Report(doc, results, pending=pending)


def _checked(
    header: Any,
    doc: dict[str, Any],
    properties: dict[str, Any] | None,
    results: CaseResults,
    section_checks: SectionChecks,
) -> CaseResults:
    n_labeled = len(results.expected) - results.expected.count(None)
    if (header.dataset.n_cases, header.dataset.n_labeled) != (len(results), n_labeled):
        raise Invalid("dataset counts do not match stored case results")
    metrics = metrics_for(results, header.evaluation)
    if metrics != doc["metrics"]:
        raise Invalid("metrics do not match stored case results")
    if failures(results) != doc["failures"]:
        raise Invalid("failures do not match stored case results")
    property_checks: list[dict[str, Any]] | None = None
    if properties is not None:
        try:
            property_checks = section_checks(properties, results)
        except ValueError as exc:  # a malformed section says where (``lines``)
            raise Invalid(str(exc), getattr(exc, "lines", None)) from exc
    checks = checks_for(header.mode, header.requirements, header.warnings, metrics, property_checks)
    if checks != doc["checks"]:
        raise Invalid("checks do not match stored metrics and configuration")
    status = overall_status(checks)
    if header.status != status or header.exit_code != EXIT_CODES[status]:
        raise Invalid("status/exit_code do not match stored checks")
    return results

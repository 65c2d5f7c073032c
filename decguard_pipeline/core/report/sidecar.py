"""The sidecar: ``<report stem>.pipeline.json`` next to a DecGuard document written with -o.

DecGuard's own files stay exactly DecGuard's (the reference verifies them); what this project's
extensions add (guard metrics, property intervals, golden intervals, diff statistics,
production drift) goes here. One sidecar per report: an extension writing a section for the
same report of the same run (same ``report`` name and ``created_at``) adds it to the existing
document instead of replacing it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.gates import EXIT_CODES, overall_status
from decguard_pipeline.core.json_limits import open_regular, read_bounded
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.report.jsonio import write_document

SIDECAR_VERSION = "0.1"
SIDECAR_SUFFIX = ".pipeline.json"


# what a sidecar document says about itself; every other key is a section
HEADER = ("sidecar_version", "decguard_version", "created_at", "report", "contract", "status",
          "exit_code")  # fmt: skip


def sections_of(document: dict[str, Any]) -> dict[str, Any]:
    """The sections of a sidecar document (its header left out)."""
    return {k: v for k, v in document.items() if k not in HEADER}


def sidecar_path(report_path: str | Path) -> Path:
    """``out/report.json`` -> ``out/report.pipeline.json``."""
    path = Path(report_path)
    return path.with_name(path.stem + SIDECAR_SUFFIX)


def contract_summary(report: dict[str, Any]) -> dict[str, Any]:
    """Which contract a DecGuard report (or check report) was made against."""
    contract = report["contract"]
    return {k: contract[k] for k in ("name", "type", "labels", "hash", "path") if k in contract}


def _same_run(path: Path, report_name: str, created_at: str) -> dict[str, Any] | None:
    try:
        # bounded, and regular files only: not one this process could have written otherwise
        with open_regular(path, "sidecar") as stream:
            existing = orjson.loads(read_bounded(stream, path, "sidecar"))
    except (OSError, ReportError, orjson.JSONDecodeError):
        return None
    if (
        isinstance(existing, dict)
        and existing.get("report") == report_name
        and existing.get("created_at") == created_at
    ):
        return existing
    return None


def write_section(
    report_path: str | Path,
    report: dict[str, Any],
    name: str,
    section: dict[str, Any],
    *,
    status: str | None = None,
) -> Path:
    """Put ``section`` under ``name`` in the sidecar of the report at ``report_path``.
    ``status``: the verdict of the section's own gates (calibration); the document's
    ``status`` and ``exit_code`` become the worse of theirs and it, so they stay what the
    command exits with."""
    report_path = Path(report_path)
    path = sidecar_path(report_path)
    document = _same_run(path, report_path.name, report["created_at"])
    if document is None:
        document = {
            "sidecar_version": SIDECAR_VERSION,
            "decguard_version": PRODUCER_VERSION,
            "created_at": report["created_at"],
            "report": report_path.name,
            "contract": contract_summary(report),
            "status": report["status"],
            "exit_code": report["exit_code"],
        }
    document[name] = section
    if status is not None:
        worst = overall_status([{"status": document["status"]}, {"status": status}])
        document["status"], document["exit_code"] = worst, EXIT_CODES[worst]
    write_document(path, document, what="pipeline results")
    return path

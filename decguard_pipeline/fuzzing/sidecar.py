"""Write the fuzz extension (section ``properties``) into ``<report stem>.pipeline.json``.

The sidecar is shared by this project's extensions: when another extension already wrote it
for the same report in the same run (same ``report`` name and ``created_at``), the section is
added to that document; otherwise a document with just this section is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from decguard_pipeline import PRODUCER_VERSION
from decguard_pipeline.core.report.jsonio import write_document

SIDECAR_VERSION = "0.1"
SIDECAR_SUFFIX = ".pipeline.json"
SECTION = "properties"


def sidecar_path(report_path: str | Path) -> Path:
    """``out/fuzz.json`` -> ``out/fuzz.pipeline.json``."""
    path = Path(report_path)
    return path.with_name(path.stem + SIDECAR_SUFFIX)


def _same_run(path: Path, report_name: str, created_at: str) -> dict[str, Any] | None:
    try:
        existing = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if (
        isinstance(existing, dict)
        and existing.get("report") == report_name
        and existing.get("created_at") == created_at
    ):
        return existing
    return None


def sidecar_document(
    report: dict[str, Any], section: dict[str, Any], report_name: str | None
) -> dict[str, Any]:
    """A sidecar holding only the ``properties`` section, for the DecGuard ``report``."""
    contract = report["contract"]
    return {
        "sidecar_version": SIDECAR_VERSION,
        "decguard_version": PRODUCER_VERSION,
        "created_at": report["created_at"],
        "report": report_name,
        "contract": {
            "name": contract["name"],
            "type": contract["type"],
            "labels": list(contract["labels"]),
            "hash": contract["hash"],
            "path": contract["path"],
        },
        "status": report["status"],
        "exit_code": report["exit_code"],
        SECTION: section,
    }


def write_properties_sidecar(
    report_path: str | Path, report: dict[str, Any], section: dict[str, Any]
) -> Path:
    """Put ``section`` in the sidecar next to ``report_path``; returns the sidecar's path."""
    report_path = Path(report_path)
    path = sidecar_path(report_path)
    document = _same_run(path, report_path.name, report["created_at"])
    if document is None:
        document = sidecar_document(report, section, report_path.name)
    else:
        document[SECTION] = section
    write_document(path, document, what="pipeline results")
    return path

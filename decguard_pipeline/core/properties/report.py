"""The ``properties`` section of a report: verification on load (implemented with issue 5)."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.results import CaseResults


def verify_section(
    section: dict[str, Any], results: CaseResults, mode: str
) -> list[dict[str, Any]]:
    """Recompute and check a stored properties section; returns the property checks.

    Raises ValueError (reported as ``(root): <message>``) when anything does not match."""
    raise ValueError("property sections cannot be verified by this build yet")

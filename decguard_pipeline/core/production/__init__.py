"""Production checks (``check``, spec §11): records collected after deployment, checked
against a contract's post-deployment gates, a baseline and metadata segments.

Entry points (imported lazily, so the contract models can import :mod:`.settings`):
:func:`run_check` (a records file or an Arrow table, optional baseline) returning a
:class:`ProductionReport`; :func:`load_records` / :func:`load_table` for the columns alone;
:func:`load_production_report` to read and verify a stored report.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "run_check": "check",
    "load_baseline": "check",
    "load_records": "loader",
    "load_table": "loader",
    "RecordSet": "loader",
    "ProductionReport": "report",
    "build_report": "report",
    "load_production_report": "verify",
    "StoredReport": "verify",
    "production_metrics": "metrics",
    "render_check": "render",
    "extension_results": "extensions",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)

"""The Dagster code location: one ``DecisionContract`` component per contract (one asset group
each), explicit lists, no magic."""

from __future__ import annotations

import warnings
from typing import Any

import dagster as dg

from decguard_pipeline.defs.component import DecisionContract
from decguard_pipeline.defs.huge_pages import no_huge_pages
from decguard_pipeline.defs.instance import dead_runs_sensor
from decguard_pipeline.defs.jobs import evaluate_job
from decguard_pipeline.defs.maintenance import with_maintenance
from decguard_pipeline.defs.sensors import model_versions_sensor
from decguard_pipeline.steps.contracts import ContractEntry, discover_contracts

# Partitioned asset checks are a preview API in Dagster 1.13 (pinned exactly in pyproject).
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
warnings.filterwarnings("ignore", category=dg.BetaWarning)


def build_definitions(
    entries: list[ContractEntry] | None = None, *, warehouse_root: str | None = None
) -> dg.Definitions:
    """One ``DecisionContract`` component per contract (defs/component.py), as any Dagster
    project would add it, and what spans the contracts: one ``model_versions`` sensor over
    all of them and the ``dead_runs`` sensor."""
    no_huge_pages()  # the processes that load the code location run its jobs (defs/huge_pages)
    entries = discover_contracts() if entries is None else entries
    # empty: the resource's Warehouse finds it (warehouse/store.default_root)
    root = warehouse_root or ""
    jobs = {e.key: evaluate_job(e) for e in entries if e.ok}
    parts = [
        DecisionContract(contract=str(e.path), warehouse=root, sensor=False).definitions_for(
            e, jobs.get(e.key)
        )
        for e in entries
    ]
    sensors = [model_versions_sensor(entries, list(jobs.values()))] if jobs else []
    shared = dg.Definitions(
        sensors=[*sensors, dead_runs_sensor()],
        executor=dg.in_process_executor,
    )
    return dg.Definitions.merge(*parts, shared)


def __getattr__(name: str) -> Any:
    """``defs``, the code location's definitions, built on first access (PEP 562): Dagster's
    loaders (``dagster dev``, ``dg``, the code server) read it, while ``evaluate``,
    which builds its own for the contracts it found, imports this module without building
    them twice (~75 ms)."""
    if name == "defs":
        globals()["defs"] = built = with_maintenance(build_definitions())
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """``defs`` too, so that Dagster's autodiscovery (``inspect.getmembers``) finds it."""
    return sorted({*globals(), "defs"})

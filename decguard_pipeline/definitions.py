"""The Dagster code location: one asset group per contract, explicit lists, no magic."""

from __future__ import annotations

import warnings
from typing import Any

import dagster as dg

from decguard_pipeline.core.huge_pages import no_huge_pages
from decguard_pipeline.defs.assets import features
from decguard_pipeline.defs.assets import verdict as verdict_assets
from decguard_pipeline.defs.assets.evaluation import evaluation_asset
from decguard_pipeline.defs.assets.golden import contract_assets
from decguard_pipeline.defs.assets.golden import parts as golden_parts
from decguard_pipeline.defs.instance import dead_runs_sensor
from decguard_pipeline.defs.jobs import evaluate_job
from decguard_pipeline.defs.maintenance import with_maintenance
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.defs.schedules import nightly_schedule
from decguard_pipeline.defs.sensors import model_versions_sensor
from decguard_pipeline.steps.contracts import ContractEntry, discover_contracts

# Partitioned asset checks are a preview API in Dagster 1.13 (pinned exactly in pyproject).
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
warnings.filterwarnings("ignore", category=dg.BetaWarning)


def contract_assets_of(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    """A contract's group: its inputs (one step), the evaluation of a target (one step: the
    golden parts, every feature's parts, then the verdict and the approval after all of
    them), the scoreboard, and the features' assets with steps of their own."""
    if not entry.ok:
        return contract_assets(entry)
    evaluated = [*golden_parts(entry), *features.parts(entry)]
    verdict = verdict_assets.parts(entry, [p.name for p in evaluated])
    return [
        *contract_assets(entry),
        evaluation_asset(entry, [*evaluated, *verdict]),
        *verdict_assets.scoreboard_assets(entry),
        *features.assets(entry),
    ]


def build_definitions(
    entries: list[ContractEntry] | None = None, *, warehouse_root: str | None = None
) -> dg.Definitions:
    no_huge_pages()  # the processes that load the code location run its jobs (core/huge_pages)
    entries = discover_contracts() if entries is None else entries
    ok = [e for e in entries if e.ok]
    jobs = {e.key: evaluate_job(e) for e in ok}
    extra = features.extras(entries, jobs)
    return dg.Definitions(
        assets=[a for e in entries for a in contract_assets_of(e)],
        asset_checks=[c for e in entries for c in features.checks(e)],
        jobs=[*jobs.values(), *extra["jobs"]],
        schedules=[*(nightly_schedule(e, jobs[e.key]) for e in ok), *extra["schedules"]],
        sensors=[
            *([model_versions_sensor(entries, list(jobs.values()))] if jobs else []),
            *extra["sensors"],
            dead_runs_sensor(),
        ],
        resources={
            # empty: the resource's Warehouse finds it (warehouse/store.default_root)
            "warehouse": WarehouseResource(root=warehouse_root or "")
        },
        executor=dg.in_process_executor,
    )


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

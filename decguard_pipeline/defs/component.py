"""``decguard_pipeline.DecisionContract``: a DecGuard decision contract as a Dagster component.

Any Dagster project adds a contract with ``dg scaffold defs decguard_pipeline.DecisionContract
<name>`` and a ``defs.yaml`` naming the contract file (docs/dagster-component.md)::

    type: decguard_pipeline.DecisionContract
    attributes:
      contract: decguard.yaml        # relative to this defs.yaml's folder
      warehouse: /data/decguard      # optional: default $DECGUARD_WAREHOUSE or data/warehouse

It builds the contract's asset group (its inputs, the evaluation of a target, the
scoreboard, every feature's assets), its checks, its ``evaluate_<contract>`` job and
schedules, the ``model_versions_<contract>`` sensor that registers the contract's targets
and requests their runs, and the ``warehouse`` resource. This project's own code location
(``definitions.py``) is one such component per discovered contract, with the one
``model_versions`` sensor over all of them instead of one per contract.

The component type is registered through the ``dagster_dg_cli.registry_modules`` entry point
(pyproject.toml): ``decguard_pipeline.DecisionContract`` is this class."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import dagster as dg

from decguard_pipeline.defs.assets import features
from decguard_pipeline.defs.assets import verdict as verdict_assets
from decguard_pipeline.defs.assets.evaluation import evaluation_asset
from decguard_pipeline.defs.assets.golden import contract_assets
from decguard_pipeline.defs.assets.golden import parts as golden_parts
from decguard_pipeline.defs.jobs import evaluate_job
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.defs.schedules import nightly_schedule
from decguard_pipeline.defs.sensors import model_versions_sensor
from decguard_pipeline.steps.contracts import ContractEntry, discover_contracts


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


@cache
def warehouse_resource(root: str) -> WarehouseResource:
    """One resource object per warehouse root: the definitions of several contracts on one
    warehouse merge (``Definitions.merge`` accepts a resource key only on the same object)."""
    return WarehouseResource(root=root)


def contract_definitions(
    entry: ContractEntry,
    *,
    warehouse_root: str = "",
    sensor: bool = True,
    job: dg.JobDefinition | None = None,
) -> dg.Definitions:
    """Everything of one contract (see the module); ``sensor``: its own model-versions
    sensor (a code location with one sensor over all its contracts leaves it out); ``job``:
    its ``evaluate_<contract>`` job when the caller built it already (that sensor's)."""
    if job is None and entry.ok:
        job = evaluate_job(entry)
    jobs = {} if job is None else {entry.key: job}
    own_sensor = (
        [model_versions_sensor([entry], [job], name=f"model_versions_{entry.key}")]
        if job is not None and sensor
        else []
    )
    extra = features.extras([entry], jobs)
    return dg.Definitions(
        assets=contract_assets_of(entry),
        asset_checks=features.checks(entry),
        jobs=[*jobs.values(), *extra["jobs"]],
        schedules=[*([nightly_schedule(entry, job)] if job else []), *extra["schedules"]],
        sensors=[*own_sensor, *extra["sensors"]],
        resources={"warehouse": warehouse_resource(warehouse_root)},
        executor=dg.in_process_executor,
    )


class DecisionContract(dg.Component, dg.Model, dg.Resolvable):
    """A DecGuard decision contract (``decguard.yaml``) evaluated by Dagster: the contract's
    asset group, gate checks, ``evaluate_<contract>`` job, schedules and model-versions
    sensor, writing to a decguard_pipeline warehouse."""

    contract: str
    """The contract file (``decguard.yaml``), relative to the folder of this ``defs.yaml``."""
    warehouse: str = ""
    """Warehouse folder or ``s3://`` prefix; empty: ``$DECGUARD_WAREHOUSE``, else
    ``data/warehouse`` of the project."""
    sensor: bool = True
    """Include the ``model_versions_<contract>`` sensor."""

    def contract_path(self, folder: Path) -> Path:
        path = Path(self.contract).expanduser()
        return path if path.is_absolute() else folder / path

    def definitions_for(
        self, entry: ContractEntry, job: dg.JobDefinition | None = None
    ) -> dg.Definitions:
        """The definitions of the contract ``entry`` (loaded from :attr:`contract`)."""
        return contract_definitions(
            entry, warehouse_root=self.warehouse, sensor=self.sensor, job=job
        )

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        path = self.contract_path(Path(context.path))
        if not path.is_file():
            raise FileNotFoundError(f"{context.path}: contract: {path} is not a file")
        (entry,) = discover_contracts(str(path))
        return self.definitions_for(entry)

"""A target's verdict, its promotion and the contract's scoreboard.

Gates decide promotion, not record-keeping: every evaluated target gets its metrics, report,
diff and guard/property results whatever its gates say (the gate checks do not block them),
and then

* ``verdict`` (per target, always materialised): PASS / WARN / FAIL over every check of the
  evaluation, the run tagged ``decguard/verdict``, and its check ``verdict``: red (ERROR)
  for FAIL, yellow (WARN) for WARN, green for PASS, naming every gate that does not hold;
* ``approved_target`` (per target, materialised only when no requirement of any kind failed):
  "this version may replace the baseline"; the regression baseline of later versions is chosen
  among approved targets;
* ``scoreboard`` (one per contract): every target's verdict and headline numbers, the newest
  evaluation first.

A model failing its gates is therefore a successful run with failed checks and the verdict
FAIL; only a pipeline that breaks fails a run. (Dagster's blocking checks would fail the step,
and with it the run, so the checks are not Dagster-blocking: the verdict step blocks the
promotion, per partition, from the same stored check rows.)

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from collections.abc import Iterator, Sequence

import dagster as dg

from decguard_pipeline.defs.assets.base import TargetPart, asset_key, code_version
from decguard_pipeline.defs.gate_checks import Gate, PartGates
from decguard_pipeline.defs.metadata.verdict import (
    approved_metadata,
    scoreboard_metadata,
    verdict_check_result,
    verdict_metadata,
)
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.defs.site_links import contract_link
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.verdict import (
    TargetVerdict,
    decide_target,
    latest_verdicts,
    scoreboard_turn,
    stored_verdict,
)

VERDICT, APPROVED, SCOREBOARD = "verdict", "approved_target", "scoreboard"
VERDICT_TAG = "decguard/verdict"  # on the run: PASS | WARN | FAIL
EPHEMERAL = "EPHEMERAL"  # the run id of an asset called as a plain function
# the verdict as a check of its own: the one red (or yellow) dot that says the version failed
VERDICT_CHECK = Gate(
    VERDICT,
    "requirement",
    VERDICT,
    "The target's verdict: fails (ERROR) when a requirement of any kind fails, warns (WARN) "
    "when only warnings do; names every gate that does not hold, with value and threshold.",
)


def parts(entry: ContractEntry, after: Sequence[str]) -> list[TargetPart]:
    """The verdict (after the parts named ``after``: every other part of the evaluation) and
    the approval, derived from it."""
    return [
        TargetPart(
            VERDICT,
            run=decide_target,
            metadata=verdict_metadata,
            description="PASS / WARN / FAIL over every check of the target's evaluation "
            "(golden, properties, guard, regression); the run is tagged decguard/verdict.",
            deps=tuple(after),
            after=_tag_run,
            gates=PartGates([VERDICT_CHECK], load=stored_verdict, result=verdict_check_result),
        ),
        TargetPart(
            APPROVED,
            run=None,
            derive=lambda done: done if done.approved else None,
            metadata=approved_metadata,
            description="This version may replace the baseline: materialised only when no "
            "requirement gate failed. Regression baselines are chosen among approved "
            "targets.",
            kinds=frozenset({"python"}),
            deps=(VERDICT,),
        ),
    ]


def tag_verdict(context: dg.AssetExecutionContext, status: str) -> None:
    """Tag the run ``decguard/verdict: PASS | WARN | FAIL`` (a target's verdict, a production
    day's status): the Runs page shows it and filters by it."""
    run_id = context.op_execution_context.run_id
    if run_id != EPHEMERAL:
        context.instance.add_run_tags(run_id, {VERDICT_TAG: status.upper()})


def _tag_run(context: dg.AssetExecutionContext, target: str, done: TargetVerdict) -> None:
    tag_verdict(context, done.verdict.status)
    if not done.approved:
        context.log.info(f"{target} is not approved: " + ", ".join(done.verdict.failing))


def scoreboard_assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    return [_scoreboard(entry)] if entry.ok else []


def _scoreboard(entry: ContractEntry) -> dg.AssetsDefinition:
    @dg.asset(
        key=asset_key(entry, SCOREBOARD),
        group_name=entry.key,
        code_version=code_version(entry),
        deps=[asset_key(entry, VERDICT)],
        kinds={"python", "parquet"},
        metadata=contract_link(entry.key),
        description="Every target of the contract, the newest evaluation first: its verdict, "
        "every gate that does not hold (value and threshold), links to its HTML report, diff "
        "and site page; the numbers (accuracy, ECE, coverage, cost) as a table.",
    )
    def scoreboard(warehouse: WarehouseResource) -> Iterator[dg.MaterializeResult]:
        wh = warehouse.get()
        # Dagster stores the materialisation before it resumes this generator: the turn
        # orders the stores of concurrent scoreboards as their reads
        with scoreboard_turn(entry.key, wh):
            metadata = scoreboard_metadata(latest_verdicts(entry.key, wh))
            yield dg.MaterializeResult(metadata={**metadata, **contract_link(entry.key)})

    return scoreboard

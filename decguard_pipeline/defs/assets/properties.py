"""Dagster assets and checks of the properties feature (the interface: features.py).

For a contract that enables at least one metamorphic property, its group gains
``property_results``, partitioned by target like ``case_results``: the enabled properties run
with the contract's ``fuzz`` settings through the target's backend, the golden results of the
same partition serving as the originals (no second call for them). One multi-asset check on it
has a check per property gate in DecGuard's order (``<property>__max_error_rate``,
``__max_violation_rate``, ``__max_flip_rate``): requirements are blocking ERROR checks,
warnings WARN. The DecGuard ``report`` waits for ``property_results`` and becomes the mode
``all`` report (golden gates, the ``properties`` section and the property checks), as
``decguard-pipeline test --all`` writes it. Contracts without properties get nothing here.

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.core.formatting import num, pct
from decguard_pipeline.core.report.render import describe_example
from decguard_pipeline.defs.assets.base import asset_key, target_asset
from decguard_pipeline.defs.gate_checks import Gate, gate_checks
from decguard_pipeline.defs.gate_checks import check_result as gate_result
from decguard_pipeline.defs.metadata import base as md
from decguard_pipeline.steps import properties as property_steps
from decguard_pipeline.steps.contracts import ContractEntry

NAME = "property_results"


def enabled(entry: ContractEntry) -> bool:
    return entry.ok and property_steps.enabled(entry.require())


def assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    return [_property_results(entry)] if enabled(entry) else []


def checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    if not enabled(entry):
        return []
    return [_property_checks(entry, property_steps.gate_list(entry.require()))]


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    """The report waits for the properties: a failing property requirement blocks it, and the
    report carries their section."""
    return [asset_key(entry, NAME)] if enabled(entry) else []


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    return {}  # the contract's evaluate job selects its whole group, properties included


def _property_results(entry: ContractEntry) -> dg.AssetsDefinition:
    names = list(entry.require().contract.properties.enabled())
    return target_asset(
        entry,
        NAME,
        run=property_steps.run_target,
        metadata=materialisation_metadata,
        description=(
            f"Metamorphic properties ({', '.join(names)}) through the target's backend; the "
            "originals are the newest case_results of the partition (not sent again)."
        ),
    )


def _with_property(row: Mapping[str, Any], asset: dg.AssetKey, name: str) -> dg.AssetCheckResult:
    return gate_result(row, asset, name, {"property": row["property"]})


def _property_checks(
    entry: ContractEntry, gates: list[tuple[str, str]]
) -> dg.AssetChecksDefinition:
    specs = [
        Gate(property_steps.check_name(gate), level, gate, f"{level} {gate}")
        for gate, level in gates
    ]
    return gate_checks(
        entry,
        asset_key(entry, NAME),
        specs,
        name=f"{entry.key}_property_gates",
        description="DecGuard's property checks: requirements block the report, warnings warn.",
        load=property_steps.check_rows,
        result=lambda row, asset, name: gate_result(
            row, asset, name, {"property": row["property"]}
        ),
    )


# -- what the UI shows -------------------------------------------------------------------


def _interval(low: float | None, high: float | None) -> str:
    return "n/a" if low is None or high is None else f"[{pct(low)}, {pct(high)}]"


def summary_markdown(done: property_steps.PropertyRun) -> str:
    """Per property: compared, violating, flips, max TV, the Wilson intervals and the calls."""
    section = done.section
    run = done.run
    lines = [
        f"**Properties · {done.status.upper()}** · seed {section['seed']} · "
        f"{run['n_pairs']} pairs · {run['n_skipped']} skipped · "
        f"{run['backend_calls']} backend calls · originals from golden run "
        f"`{run['golden_run_id']}`",
        "",
        "| property | level | compared | violating | 95% CI | flips | 95% CI | max TV "
        "| errors | skipped | calls (sent + minimise) | checks |",
        "| --- | --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for s in done.rows["property_summaries"]:
        drift = (
            f"level drop {num(s['max_level_decrease'])}"
            if s["max_level_decrease"] is not None
            else num(s["max_tv_distance"])
        )
        lines.append(
            f"| {s['property']} | {s['level']} | {s['n_evaluated']} "
            f"| {s['n_violations']} ({pct(s['violation_rate'])}) "
            f"| {_interval(s['violation_rate_low'], s['violation_rate_high'])} "
            f"| {s['n_flips']} ({pct(s['flip_rate'])}) "
            f"| {_interval(s['flip_rate_low'], s['flip_rate_high'])} | {drift} "
            f"| {s['n_errors']} | {s['n_skipped']} "
            f"| {s['calls_total']} ({s['calls_transformed']} + {s['calls_minimize']}) "
            f"| {s['status'].upper()} |"
        )
    failing = [
        f"- {c['status'].upper()} {c['gate']}: {c['message']}"
        for c in done.checks
        if c["status"] != "pass"
    ]
    if failing:
        lines += ["", "Checks not passing:", *failing]
    return "\n".join(lines)


def worst_pairs_rows(done: property_steps.PropertyRun) -> list[dict[str, Any]]:
    """The worst pairs with what was sent (shown options and an input preview)."""
    rows = []
    for pair in property_steps.worst_pairs(done.section):
        comparison = pair["comparison"] or {}
        reduced = pair["reduced"]
        error = pair["error"]
        rows.append(
            {
                "id": pair["id"],
                "property": pair["property"],
                "violations": "; ".join(pair["violations"]),
                "tv_distance": comparison.get("tv_distance"),
                "flipped": comparison.get("flipped"),
                "before": comparison.get("selected_before"),
                "after": comparison.get("selected_after"),
                "sent": describe_example(pair["presentation"], pair["input"]),
                "minimal": (
                    None
                    if reduced is None
                    else describe_example(reduced["presentation"], reduced["input"])
                ),
                "error": None if error is None else f"{error['kind']}: {error['message']}",
            }
        )
    return rows


def materialisation_metadata(done: property_steps.PropertyRun) -> dict[str, Any]:
    rows = done.rows
    skips: dict[str, int] = {}
    for skip in rows["property_skips"]:
        skips[skip["reason"]] = skips.get(skip["reason"], 0) + 1
    return {
        "status": done.status.upper(),
        "summary": dg.MetadataValue.md(summary_markdown(done)),
        "worst_pairs": md.table(
            worst_pairs_rows(done),
            [
                ("id", "string"),
                ("property", "string"),
                ("violations", "string"),
                ("tv_distance", "float"),
                ("flipped", "bool"),
                ("before", "string"),
                ("after", "string"),
                ("sent", "string"),
                ("minimal", "string"),
                ("error", "string"),
            ],
        ),
        "checks": md.checks_table(done.checks),
        "skips": len(rows["property_skips"]),
        "skip_reasons": dg.MetadataValue.json(skips),
        "pairs": len(rows["property_pairs"]),
        "violating_pairs": done.run["n_violations"],
        "backend_calls": done.run["backend_calls"],
        "golden_run_id": done.run["golden_run_id"],
        "health": f"{done.run['health_status']}: {done.run['health_detail']}",
        "wall_s": done.run["wall_s"],
        "section": dg.MetadataValue.path(done.run["section_path"]),
        "dagster/row_count": len(rows["property_pairs"]),
    }

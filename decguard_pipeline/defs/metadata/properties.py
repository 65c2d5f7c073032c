"""What the UI shows for the metamorphic properties: the materialisation's summary (per
property: compared, violating, flips, intervals, calls), the worst pairs and the checks."""

from __future__ import annotations

from typing import Any

import dagster as dg

from decguard_pipeline.core.formatting import num, pct
from decguard_pipeline.core.properties.summary import is_failed
from decguard_pipeline.core.report.render import describe_example
from decguard_pipeline.defs.metadata.base import checks_table, numbers, table
from decguard_pipeline.steps.properties import PropertyRun


def worst_pairs(section: dict[str, Any], limit: int = 20) -> list[dict[str, Any]]:
    """Failed pairs first (violations, then errors), then by TV distance, largest first."""

    def badness(pair: dict[str, Any]) -> tuple[int, int, float]:
        comparison = pair["comparison"] or {}
        return (
            len(pair["violations"]),
            int(is_failed(pair)),
            comparison.get("tv_distance") or 0.0,
        )

    ranked = sorted(section["pairs"], key=badness, reverse=True)  # stable: section order
    return ranked[:limit]


def _interval(low: float | None, high: float | None) -> str:
    return "n/a" if low is None or high is None else f"[{pct(low)}, {pct(high)}]"


def summary_markdown(done: PropertyRun) -> str:
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


def worst_pairs_rows(done: PropertyRun) -> list[dict[str, Any]]:
    """The worst pairs with what was sent (shown options and an input preview)."""
    rows = []
    for pair in worst_pairs(done.section):
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


def rates(done: PropertyRun) -> dict[str, float | None]:
    """Per property its violation and flip rates (and error rate, from its
    ``<property>.max_error_rate`` gate), named as DecGuard's messages name them
    (``option_order.violation_rate``): numbers the per-partition plots compare."""
    out: dict[str, float | None] = {}
    for s in done.rows["property_summaries"]:
        out[f"{s['property']}.violation_rate"] = s["violation_rate"]
        out[f"{s['property']}.flip_rate"] = s["flip_rate"]
    for check in done.checks:
        prop, _, gate = str(check["gate"]).partition(".")
        if gate == "max_error_rate":
            out[f"{prop}.error_rate"] = check["value"]
    return out


def materialisation_metadata(done: PropertyRun) -> dict[str, Any]:
    rows = done.rows
    skips: dict[str, int] = {}
    for skip in rows["property_skips"]:
        skips[skip["reason"]] = skips.get(skip["reason"], 0) + 1
    return {
        "status": done.status.upper(),
        **numbers(rates(done)),
        "summary": dg.MetadataValue.md(summary_markdown(done)),
        "worst_pairs": table(
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
        "checks": checks_table(done.checks),
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

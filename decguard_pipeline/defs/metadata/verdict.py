"""What the UI shows for a target's verdict, its check, its approval and the contract's
scoreboard: the one verdict the ``verdicts`` row holds (``core.verdict``), told the same way
everywhere.

The scoreboard fits the asset page's metadata column (about 570 pixels of a 1,600-pixel
screen): one short markdown entry per target, keyed by the target (its verdict, every gate not
holding with value and threshold, links to its report and diff), each well under
the UI's 1,000-character limit for drawing markdown in place, so no link is ever dropped; the
numbers are a table of their own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from decguard_pipeline.core.html.markup import sig
from decguard_pipeline.core.verdict import from_row
from decguard_pipeline.defs.metadata.base import numbers, table
from decguard_pipeline.defs.report_links import file_links, report_url
from decguard_pipeline.steps.verdict import TargetVerdict
from decguard_pipeline.warehouse.schema.verdict import NUMBERS

NONE = "–"  # a number nobody measured (e.g. the cost of a backend that reports no usage)
INLINE_MARKDOWN = 1000  # the UI draws shorter markdown in place
# the scoreboard's numbers, one row per target (the verdict and the gates are the entries;
# macro-F1, the equal-mass ECE and the rest are on each target's ``verdict``): few columns,
# so that the table fits the asset page's metadata column on a 1,600-pixel screen
SCOREBOARD = [
    ("target", "string"),
    ("accuracy", "float"),
    ("ECE", "float"),
    ("coverage", "float"),
]
COST = ("cost / 1k", "string")  # when some target's cost is known
# every gate not holding, narrow enough for the metadata column (the messages are in the
# ``verdict`` markdown above it)
GATES = [
    ("gate", "string"),
    ("status", "string"),
    ("value", "float"),
    ("must be", "string"),
]


def regression_text(row: Mapping[str, Any]) -> str:
    """``PASS vs default@v1``, ``no baseline``, or ``–`` when no diff ran."""
    status = row["regression_status"]
    if status is None:
        return NONE
    if status == "no_baseline":
        return "no baseline"
    return f"{status.upper()} vs {row['baseline_target']}"


def cost_text(value: float | None) -> str:
    return NONE if value is None else sig(value)


def _links(row: Mapping[str, Any]) -> list[str]:
    """Markdown links to the target's HTML report and its diff."""
    links = []
    for name, key in (("report", "report_html"), ("diff", "diff_html")):
        url = None if not row.get(key) else report_url(row[key])
        if url is not None:
            links.append(f"[{name}]({url})")
    return links


def _fitted(parts: list[str], gates: list[str], tail: list[str]) -> str:
    """``parts``, the gates and ``tail`` joined by `` · ``, the gates cut (with how many more)
    where the whole would not be drawn in place."""
    shown = list(gates)
    while True:
        more = len(gates) - len(shown)
        listed = ", ".join(shown) + (f" … and {more} more (see `verdict`)" if more else "")
        text = " · ".join([*parts, *([listed] if listed else []), *tail])
        if len(text) < INLINE_MARKDOWN or not shown:
            return text
        shown.pop()


def target_markdown(row: Mapping[str, Any]) -> str:
    """One target on the scoreboard: its verdict, every gate not holding with value and
    threshold (the regression baseline named), and its links."""
    verdict = from_row(row)
    gates = verdict.gate_texts()
    parts = [f"**{verdict.word}**"]
    if not gates:
        parts.append("every gate holds")
    if verdict.baseline and row.get("regression_status") not in (None, "no_baseline"):
        parts.append(f"vs {verdict.baseline}")
    return _fitted(parts, gates, _links(row))


def verdict_markdown(row: Mapping[str, Any]) -> str:
    """The verdict: its one-line headline, the approval, every gate not holding with value
    and threshold, the links (drawn in place)."""
    verdict = from_row(row)
    approval = (
        "approved: may be the baseline of later versions"
        if verdict.approved
        else "**not approved** as a baseline"
    )
    head = f"**{row.get('headline') or verdict.headline()}** · {approval}"
    lines = [f"- {text}" for text in verdict.gate_texts()]
    links = " · ".join(_links(row))
    text = "\n\n".join([head, "\n".join(lines), links] if lines else [head, links]).strip()
    return text if len(text) < INLINE_MARKDOWN else text[: INLINE_MARKDOWN - 2] + "…"


def verdict_metadata(done: TargetVerdict) -> dict[str, Any]:
    row = done.row
    meta: dict[str, Any] = {
        "status": row["status"].upper(),
        "verdict": dg.MetadataValue.md(verdict_markdown(row)),
        "headline": row["headline"],
        "approved": dg.MetadataValue.bool(row["approved"]),
        **{kind: status.upper() for kind, status in done.verdict.statuses.items()},
        "regression": regression_text(row),
        **numbers({name: row[name] for name in NUMBERS}),
        "not_holding": table(_gate_rows(row), GATES, limit=1000),
    }
    for name in ("report_html", "diff_html"):
        if row.get(name) is not None:
            meta.update(file_links(name, row[name]))
    return meta


def _gate_rows(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "gate": gate["name"],
            "status": gate["status"].upper(),
            "value": gate["value"],
            "must be": None
            if gate["threshold"] is None
            else f"{gate['comparison']} {sig(gate['threshold'])}",
        }
        for gate in row.get("gates") or []
    ]


def verdict_check_result(
    row: Mapping[str, Any], asset: dg.AssetKey, name: str
) -> dg.AssetCheckResult:
    """The verdict as a check: passes for PASS; fails as ERROR (red) for FAIL and as WARN
    (yellow) for WARN, its description the verdict's headline."""
    verdict = from_row(row)
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=name,
        passed=verdict.status == "pass",
        severity=(
            dg.AssetCheckSeverity.ERROR if verdict.status == "fail" else dg.AssetCheckSeverity.WARN
        ),
        description=row.get("headline") or verdict.headline(),
        metadata={
            "status": verdict.word,
            "gates": dg.MetadataValue.md(
                "\n".join(f"- {text}" for text in verdict.gate_texts()) or "every gate holds"
            ),
            "failing": len(verdict.failing),
            "warned": len(verdict.warned),
        },
    )


def approved_metadata(done: TargetVerdict) -> dict[str, Any]:
    row = done.row
    return {
        "status": row["status"].upper(),
        "evaluation_run_id": row["evaluation_run_id"],
        "model_version": row["model_version"] or "-",
        **numbers({name: row[name] for name in ("accuracy", "macro_f1", "ece", "coverage")}),
    }


def scoreboard_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "target": row["target"],
            "accuracy": row["accuracy"],
            "ECE": row["ece"],
            "coverage": row["coverage"],
            "cost / 1k": cost_text(row["cost_per_1000"]),
        }
        for row in rows
    ]


def scoreboard_table(rows: Sequence[Mapping[str, Any]]) -> dg.MetadataValue:
    """The numbers of every target (the cost column when some target's cost is known)."""
    costs = any(row["cost_per_1000"] is not None for row in rows)
    return table(scoreboard_rows(rows), [*SCOREBOARD, *[COST] * costs], limit=10_000)


def summary_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """How many targets pass, warn and fail, the newest one's verdict, which targets may be
    baselines (drawn in place)."""
    if not rows:
        return "No target has a verdict yet."
    newest = rows[0]
    counts = {s: sum(r["status"] == s for r in rows) for s in ("pass", "warn", "fail")}
    approved = [r["target"] for r in rows if r["approved"]]
    headline = newest.get("headline") or from_row(newest).headline()
    text = (
        f"**{len(rows)} targets** · {counts['pass']} pass · {counts['warn']} warn · "
        f"{counts['fail']} fail\n\nnewest: {newest['target']} **{headline}**\n\n"
        f"approved: {', '.join(approved) or 'none'}"
    )
    return text if len(text) < INLINE_MARKDOWN else text[: INLINE_MARKDOWN - 2] + "…"


def scoreboard_metadata(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "summary": dg.MetadataValue.md(summary_markdown(rows)),
        # one entry per target, newest first (targets always hold an "@": no clash)
        **{row["target"]: dg.MetadataValue.md(target_markdown(row)) for row in rows},
        "scoreboard": scoreboard_table(rows),
        "dagster/row_count": len(rows),
    }

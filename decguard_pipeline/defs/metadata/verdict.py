"""What the UI shows for a target's verdict, its approval and the contract's scoreboard.

The scoreboard is a table metadata value (the UI always draws tables in place) with every
target, the newest evaluation first; the same as markdown with links to the HTML reports
(drawn in place while shorter than the UI's 1,000-character limit, else one click away)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from decguard_pipeline.core.html.markup import sig
from decguard_pipeline.defs.metadata.base import numbers, table
from decguard_pipeline.defs.report_links import file_links, report_url
from decguard_pipeline.steps.verdict import TargetVerdict
from decguard_pipeline.warehouse.schema.verdict import NUMBERS

NONE = "–"  # a number nobody measured (e.g. the cost of a backend that reports no usage)
INLINE_MARKDOWN = 1000  # the UI draws shorter markdown in place
SCOREBOARD = [
    ("target", "string"),
    ("evaluated_at", "string"),
    ("verdict", "string"),
    ("approved", "bool"),
    ("accuracy", "float"),
    ("macro_f1", "float"),
    ("ece", "float"),
    ("ece_equal_mass", "float"),
    ("coverage", "float"),
    ("cost_per_1000", "string"),
    ("regression", "string"),
    ("failing", "string"),
]
NOT_PASSING = [
    ("kind", "string"),
    ("status", "string"),
    ("gate", "string"),
    ("level", "string"),
    ("value", "float"),
    ("comparison", "string"),
    ("threshold", "float"),
    ("message", "string"),
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


def verdict_markdown(row: Mapping[str, Any]) -> str:
    """The verdict in one short paragraph (drawn in place)."""
    approval = (
        "approved: may be the baseline of later versions"
        if row["approved"]
        else "**not approved** as a baseline"
    )
    text = f"**{row['status'].upper()}** · {approval}"
    if row["failing"]:
        text += "\n\nfailing: " + ", ".join(f"`{name}`" for name in row["failing"])
    if row["warned"]:
        text += "\n\nwarnings: " + ", ".join(f"`{name}`" for name in row["warned"])
    return text if len(text) < INLINE_MARKDOWN else text[: INLINE_MARKDOWN - 2] + "…"


def not_passing(done: TargetVerdict) -> list[dict[str, Any]]:
    return [
        {"kind": kind, **check}
        for kind, checks in done.checks.items()
        for check in checks
        if check["status"] != "pass"
    ]


def verdict_metadata(done: TargetVerdict) -> dict[str, Any]:
    row = done.row
    meta: dict[str, Any] = {
        "status": row["status"].upper(),
        "approved": dg.MetadataValue.bool(row["approved"]),
        "verdict": dg.MetadataValue.md(verdict_markdown(row)),
        **{kind: status.upper() for kind, status in done.verdict.statuses.items()},
        "regression": regression_text(row),
        **numbers({name: row[name] for name in NUMBERS}),
        "not_passing": table(not_passing(done), NOT_PASSING, limit=1000),
    }
    if row["report_html"] is not None:
        meta.update(file_links("report_html", row["report_html"]))
    return meta


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
            **row,
            "evaluated_at": f"{row['evaluated_at']:%Y-%m-%d %H:%M:%S} UTC",
            "verdict": row["status"].upper(),
            "cost_per_1000": cost_text(row["cost_per_1000"]),
            "regression": regression_text(row),
            "failing": ", ".join(row["failing"]) or NONE,
        }
        for row in rows
    ]


def scoreboard_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Every target as a markdown row, compact enough for the asset page's metadata column:
    the target links its HTML report when that is served, the cost column is there when some
    target's cost is known, and there is no approval column (a target is approved exactly
    when its verdict is not FAIL). Kept under the UI's in-place limit: without the links
    when they make it too long, then only the newest targets that fit (the ``scoreboard``
    table has them all)."""
    costs = any(row["cost_per_1000"] is not None for row in rows)
    head = ["target", "verdict", "accuracy", "macro-F1", "ECE", "ECE (mass)", "coverage"]
    head += ["cost / 1k"] * costs + ["regression"]
    align = ["---", "---"] + ["---:"] * (len(head) - 3) + ["---"]
    top = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    for links in (True, False):
        lines = [*top, *(_scoreboard_line(row, costs, links) for row in rows)]
        if len("\n".join(lines)) < INLINE_MARKDOWN:
            return "\n".join(lines)
    shown = list(top)
    for n, line in enumerate(lines[2:]):
        more = f"\n\n… and {len(rows) - n} older targets: see `scoreboard`"
        if len("\n".join([*shown, line])) + len(more) >= INLINE_MARKDOWN:
            return "\n".join(shown) + more
        shown.append(line)
    return "\n".join(shown)


def _scoreboard_line(row: Mapping[str, Any], costs: bool, links: bool) -> str:
    html = row["report_html"]
    url = None if html is None or not links else report_url(html)
    cells = [
        f"`{row['target']}`" if url is None else f"[{row['target']}]({url})",
        f"**{row['status'].upper()}**",
        *(
            NONE if row[n] is None else sig(row[n])
            for n in ("accuracy", "macro_f1", "ece", "ece_equal_mass", "coverage")
        ),
        *[cost_text(row["cost_per_1000"])] * costs,
        regression_text(row),
    ]
    return "| " + " | ".join(cells) + " |"


def summary_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The newest target's verdict and which targets may be baselines (drawn in place)."""
    if not rows:
        return "No target has a verdict yet."
    newest = rows[0]
    counts = {s: sum(r["status"] == s for r in rows) for s in ("pass", "warn", "fail")}
    approved = [r["target"] for r in rows if r["approved"]]
    text = (
        f"**{len(rows)} targets** · {counts['pass']} pass · {counts['warn']} warn · "
        f"{counts['fail']} fail\n\nnewest: `{newest['target']}` "
        f"**{newest['status'].upper()}** ({regression_text(newest)})\n\n"
        f"approved: {', '.join(f'`{t}`' for t in approved) or 'none'}"
    )
    return text if len(text) < INLINE_MARKDOWN else text[: INLINE_MARKDOWN - 2] + "…"


def scoreboard_metadata(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        # the markdown first: drawn in place while short, with the report links
        "summary": dg.MetadataValue.md(summary_markdown(rows)),
        "scoreboard_markdown": dg.MetadataValue.md(scoreboard_markdown(rows)),
        "scoreboard": table(scoreboard_rows(rows), SCOREBOARD, limit=10_000),
        "dagster/row_count": len(rows),
    }

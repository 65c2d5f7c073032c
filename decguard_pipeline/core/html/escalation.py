"""The escalation sweep as a picture (the ``calibrator`` section's, ``core/calibration/
escalation.py``): coverage, accuracy on the answered cases and hand-off rate against the
confidence threshold, the suggested ``abstain_below`` marked; with costs, the total cost per
1,000 decisions against the threshold, the escalation part dashed. Inline panels for the HTML
report (``page.css``'s chart rules) and the same panels as one standalone SVG document for the
Dagster UI (``figures.document``)."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.html.figures import document, legend
from decguard_pipeline.core.html.markup import Html, el, sig
from decguard_pipeline.core.html.plotarea import (
    UNIT,
    UNIT_TICKS,
    Frame,
    border,
    grid,
    labels,
    nice_ticks,
    panel,
    points,
)

SERIES = (  # key of a sweep row, css class, legend
    ("coverage", "esc-coverage", "coverage"),
    ("accuracy_answered", "esc-accuracy", "accuracy answered"),
    ("hand_off_rate", "esc-handoff", "hand-off rate"),
)


def _line(frame: Frame, rows: list[dict[str, Any]], key: str, css: str) -> list[Html]:
    kept = [r for r in rows if r[key] is not None]
    if not kept:
        return []
    xs, ys = [r["threshold"] for r in kept], [r[key] for r in kept]
    marks = [
        el(
            "circle",
            el("title", f"abstain below {r['threshold']:g}: {key.replace('_', ' ')} {sig(r[key])}"),
            cx=frame.x(r["threshold"]),
            cy=frame.y(r[key]),
            r=2.5,
            class_=f"{css} mark",
        )
        for r in kept
    ]
    return [el("polyline", points=points(frame, xs, ys), class_=css), *marks]


def _suggested(frame: Frame, suggested: dict[str, Any]) -> list[Html]:
    at = suggested.get("abstain_below")
    if at is None:
        return []
    words = (
        f"suggested abstain_below {at:g}: selective risk <= {suggested['alpha']:g} with"
        f" probability >= {1 - suggested['delta']:g}"
    )
    x = frame.x(at)
    return [
        el("line", el("title", words), x1=x, y1=frame.top, x2=x, y2=frame.bottom,
           class_="esc-suggested"),
        el("text", f"LTT {at:g}", x=round(x + 3, 2), y=frame.top + 12, font_size=9),
    ]  # fmt: skip


def sweep_panel(section: dict[str, Any]) -> Html:
    """Coverage, accuracy answered and hand-off rate against the threshold."""
    rows = section["escalation"]["calibrated"]
    parts: list[Html] = [*grid(UNIT, UNIT_TICKS, UNIT_TICKS), border(UNIT)]
    for key, css, _ in SERIES:
        parts += _line(UNIT, rows, key, css)
    parts += _suggested(UNIT, section["abstain_below"])
    name = f"Escalation sweep · {section['method']}"
    parts += labels(UNIT, name, "abstain below (calibrated confidence)", "share of cases")
    key = legend([("line", css, words) for _, css, words in SERIES], UNIT)
    return panel([*parts, key], kind="escalation", title=name)


def cost_panel(section: dict[str, Any]) -> Html | None:
    """Total (and escalation) cost per 1,000 decisions against the threshold; None when
    nothing is priced."""
    rows = [r for r in section["escalation"]["calibrated"] if r["total_cost_per_1000"] is not None]
    if not rows:
        return None
    xs = [r["threshold"] for r in rows]
    totals = [r["total_cost_per_1000"] for r in rows]
    yticks = nice_ticks(0.0, max(totals) or 1.0)
    frame = Frame(x0=0.0, x1=1.0, y0=yticks[0], y1=yticks[-1])
    parts: list[Html] = [*grid(frame, UNIT_TICKS, yticks), border(frame)]
    parts.append(el("polyline", points=points(frame, xs, totals), class_="esc-cost"))
    escalated = [r for r in rows if r["escalation_cost_per_1000"] is not None]
    if escalated:
        parts.append(
            el(
                "polyline",
                points=points(
                    frame,
                    [r["threshold"] for r in escalated],
                    [r["escalation_cost_per_1000"] for r in escalated],
                ),
                class_="esc-escalation",
            )
        )
    parts += [
        el(
            "circle",
            el("title", f"abstain below {r['threshold']:g}: {r['total_cost_per_1000']:.2f}"
               " per 1,000 decisions"),
            cx=frame.x(r["threshold"]), cy=frame.y(r["total_cost_per_1000"]), r=2.5,
            class_="esc-cost mark",
        )
        for r in rows
    ]  # fmt: skip
    parts += _suggested(frame, section["abstain_below"])
    name = "Cost per 1,000 decisions"
    parts += labels(frame, name, "abstain below (calibrated confidence)", "cost per 1,000")
    entries = [("line", "esc-cost", "total")]
    if escalated:
        entries.append(("line", "esc-escalation", "hand-offs"))
    return panel([*parts, legend(entries, frame)], kind="escalation-cost", title=name)


def panels(section: dict[str, Any]) -> list[Html]:
    return [p for p in (sweep_panel(section), cost_panel(section)) if p is not None]


def escalation_figure(section: dict[str, Any], *, title: str = "") -> Html:
    """The panels as one standalone SVG document (the Dagster UI's metadata)."""
    heading = f"{title} · escalation sweep" if title else "Escalation sweep"
    return document(panels(section), heading)

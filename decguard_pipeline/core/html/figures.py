"""Standalone SVG documents of an evaluation's pictures, for the Dagster UI's metadata: the
reliability diagram (equal-width and equal-mass panels), the risk-coverage curve (and the cost
per 1,000 decisions when costs are set) and the smoothed reliability diagram of the calibration
section. They show what the PNGs of ``core.report.plots`` show (the CLI's files), drawn as text
in a few milliseconds instead of through matplotlib.

The reliability panels are the HTML report's (``charts.reliability_svg``, ``smooth_layer``).
A document is shown through ``<img src="data:...">``, which sees no page stylesheet: it carries
its own ``<style>``, the report page's chart rules (``assets/page.css``) with their colour
variables written out, plus the rules of the elements only these figures draw, and a white
background (the UI may be dark). Every text is escaped (``markup.el``); the same numbers give
the same bytes.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from decguard_pipeline.core.html.charts import reliability_svg, smooth_layer
from decguard_pipeline.core.html.markup import Html, el, sig
from decguard_pipeline.core.html.page import asset
from decguard_pipeline.core.html.plotarea import (
    HEIGHT,
    UNIT,
    UNIT_TICKS,
    WIDTH,
    Frame,
    border,
    grid,
    labels,
    nice_ticks,
    panel,
    points,
)

HEAD = 30  # the heading line above the panels
ANNOTATED = 8  # risk-coverage points labelled with their threshold (the last ones)
DENSITY = 0.25  # the density shading's peak, in accuracy units (the bottom quarter)
# what only these figures draw (the rest is page.css's ``svg.chart`` rules)
OWN_RULES = """
svg.chart .risk-curve { fill: none; stroke: #0969da; stroke-width: 1.5; }
svg.chart .risk-mark { fill: #0969da; }
svg.chart .cost-curve { fill: none; stroke: #1a7f37; stroke-width: 1.5; }
svg.chart .cost-mark { fill: #1a7f37; }
svg.chart .cheapest { stroke: #8c959f; stroke-dasharray: 4 3; }
svg.chart .density { fill: #8c959f; fill-opacity: .3; stroke: none; }
"""


@cache
def style() -> str:
    """The chart rules of the report page with ``var(--x)`` replaced by its value."""
    css = asset("page.css")
    root = css[css.index(":root") : css.index("}", css.index(":root"))]
    values = dict(re.findall(r"(--[\w-]+):\s*([^;]+);", root))
    rules = [line for line in css.splitlines() if line.startswith("svg.chart ")]
    text = "\n".join(rules) + OWN_RULES
    return re.sub(r"var\((--[\w-]+)\)", lambda m: values[m.group(1)], text)


def fixed(value: float | None) -> str:
    """A measure in a title, as the PNGs write it: 3 decimals, ``n/a`` for none."""
    return "n/a" if value is None else f"{value:.3f}"


def _text_width(text: str, size: float) -> int:
    return math.ceil(0.6 * size * len(text))  # a generous average for sans-serif


def document(panels: Sequence[Html], heading: str) -> Html:
    """Panels side by side under a one-line heading, as one SVG document; wide enough for the
    heading."""
    width = max(WIDTH * len(panels), _text_width(heading, 14) + 20)
    height = HEAD + HEIGHT
    placed = [el("g", p, transform=f"translate({i * WIDTH} {HEAD})") for i, p in enumerate(panels)]
    return el(
        "svg",
        el("title", heading),
        el("style", Html(style())),
        el("rect", width=width, height=height, fill="#ffffff"),
        el(
            "text",
            heading,
            x=width / 2,
            y=20,
            text_anchor="middle",
            font_size=14,
            font_weight="600",
        ),
        placed,
        xmlns="http://www.w3.org/2000/svg",
        class_="chart figure",
        width=width,
        height=height,
        viewBox=f"0 0 {width} {height}",
        role="img",
        aria_label=heading,
    )


def data_uri(svg: str) -> str:
    """The document as a ``data:`` URL for an ``<img>`` (or markdown image)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def legend(entries: Sequence[tuple[str, str, str]], frame: Frame = UNIT) -> Html:
    """A boxed legend in the plot area's upper left: ``(sample, css class, label)`` per line,
    the sample a ``line``, a ``dot`` or an ``area`` drawn with the element's own class."""
    x, y, row = frame.left + 8, frame.top + 8, 16
    width = 34 + max((_text_width(label, 10) for _, _, label in entries), default=0)
    parts = [
        el("rect", x=x, y=y, width=width, height=row * len(entries) + 6, rx=3, class_="legend")
    ]
    for i, (sample, css, label) in enumerate(entries):
        middle = y + 11 + i * row
        if sample == "line":
            parts.append(el("line", x1=x + 6, y1=middle, x2=x + 26, y2=middle, class_=css))
        elif sample == "dot":
            parts.append(el("circle", cx=x + 16, cy=middle, r=5, class_=css))
        else:
            parts.append(el("rect", x=x + 6, y=middle - 5, width=20, height=10, class_=css))
        parts.append(el("text", label, x=x + 32, y=middle + 4, font_size=10))
    return el("g", parts, class_="key")


def _band_entries(curve: dict[str, Any], level: float | None) -> list[tuple[str, str, str]]:
    if curve["lower"] is None:
        return [("line", "smooth", "smooth")]
    band = f"band ({level:.0%})" if level is not None else "band"
    return [("area", "band", f"smooth {band}"), ("line", "smooth", "smooth")]


CALIBRATED = ("line", "diag", "calibrated")


def reliability_figure(
    calibration: dict[str, Any], *, title: str = "", smooth: dict[str, Any] | None = None
) -> Html:
    """The reliability diagram of ``core.guard.curves.calibration_of``'s section: equal-width
    and equal-mass panels, the gap in the heading; ``smooth`` (a calibration section's
    ``smooth``) overlays its curve and band on both."""
    curve = smooth["curve"] if smooth is not None else None
    names = [
        ("reliability_equal_width", f"equal-width · ECE {fixed(calibration['ece_equal_width'])}"),
        (
            "reliability_equal_mass",
            f"equal-mass · ECE {fixed(calibration['ece_equal_mass'])}"
            + (f" · smooth {fixed(smooth['value'])}" if smooth is not None else ""),
        ),
    ]
    panels = []
    for key, name in names:
        bins = calibration[key]
        entries = [CALIBRATED]
        if any(b.get("count") for b in bins):
            entries.append(("dot", "dot", "bins (size = cases)"))
            entries.append(("area", "count", "cases per bin"))
        if smooth is not None:
            entries += _band_entries(smooth["curve"], smooth["level"])
        panels.append(el("g", reliability_svg(bins, title=name, smooth=curve), legend(entries)))
    gap, direction = calibration["confidence_gap"], calibration["direction"]
    heading = f"gap {gap:+.3f} ({direction})" if gap is not None else "no labeled cases"
    return document(panels, f"{title} · {heading}" if title else heading)


def smooth_reliability_figure(section: dict[str, Any], *, title: str = "") -> Html:
    """The calibration section's smoothed reliability curve with its band, the diagonal and
    the density of confidences shaded along the bottom; smooth ECE (and its interval) in the
    heading."""
    smooth = section["smooth"]
    parts: list[Html] = [*grid(UNIT, UNIT_TICKS, UNIT_TICKS), border(UNIT)]
    entries = [CALIBRATED]
    shading: list[Html] = []
    curves: list[Html] = []
    if smooth is None:
        heading = "no labeled cases"
    else:
        curve = smooth["curve"]
        mesh, density = curve["mesh"], curve["density"]
        if mesh:
            peak = max(density) or 1.0
            heights = [DENSITY * d / peak for d in density]
            outline = [(mesh[0], 0.0), *zip(mesh, heights, strict=True), (mesh[-1], 0.0)]
            ring = " ".join(f"{UNIT.x(a)},{UNIT.y(b)}" for a, b in outline)
            shading.append(el("polygon", points=ring, class_="density"))
            entries.append(("area", "density", "confidences"))
        curves.append(smooth_layer(curve))
        entries += _band_entries(curve, smooth["level"])
        interval = (
            f" [{fixed(smooth['low'])}, {fixed(smooth['high'])}]"
            if smooth["low"] is not None
            else ""
        )
        heading = f"smooth ECE {fixed(smooth['value'])}{interval}"
    parts += shading
    parts.append(el("line", x1=UNIT.x(0), y1=UNIT.y(0), x2=UNIT.x(1), y2=UNIT.y(1), class_="diag"))
    parts += curves
    parts += labels(UNIT, None, "confidence", "accuracy (smoothed)")
    name = f"{title} · {heading}" if title else heading
    chart = panel(parts, kind="smooth-reliability", title=name)
    return document([el("g", chart, legend(entries))], name)


def risk_coverage_figure(risk_coverage: dict[str, Any], *, title: str = "") -> Html:
    """Selective risk against coverage over the threshold sweep, the last points labelled
    with their threshold, AURC in the panel's title; with costs, the cost per 1,000 decisions
    against the threshold, the cheapest marked."""
    panels = [_risk_panel(risk_coverage)]
    if risk_coverage["cheapest"] is not None:
        panels.append(_cost_panel(risk_coverage))
    return document(panels, title)


def _risk_panel(risk_coverage: dict[str, Any]) -> Html:
    rows = [r for r in risk_coverage["sweep"] if r["selective_risk"] is not None]
    xs, ys = [r["coverage"] for r in rows], [r["selective_risk"] for r in rows]
    yticks = nice_ticks(0.0, max(ys, default=0.0) or 0.1)
    frame = Frame(x0=0.0, x1=1.02, y0=yticks[0], y1=yticks[-1])
    parts = [*grid(frame, UNIT_TICKS, yticks), border(frame)]
    if rows:
        parts.append(el("polyline", points=points(frame, xs, ys), class_="risk-curve"))
        parts += [
            _mark(frame, r["coverage"], r["selective_risk"], _describe(r), "risk-mark")
            for r in rows
        ]
        # each distinct point labelled once, with the highest threshold that reaches it
        labelled: dict[tuple[float, float], float] = {}
        for r in rows:
            labelled[(r["coverage"], r["selective_risk"])] = r["threshold"]
        for (coverage, risk), threshold in list(labelled.items())[-ANNOTATED:]:
            parts.append(
                el(
                    "text",
                    f"t={threshold:g}",
                    x=round(frame.x(coverage) + 3, 2),
                    y=round(frame.y(risk) - 3, 2),
                    font_size=9,
                )
            )
    else:
        parts.append(_empty(frame))
    name = f"AURC {fixed(risk_coverage['aurc'])}"
    parts += labels(
        frame, name, "coverage (share of decisions kept)", "selective risk (error rate of kept)"
    )
    return panel(parts, kind="risk-coverage", title=name)


def _cost_panel(risk_coverage: dict[str, Any]) -> Html:
    priced = [r for r in risk_coverage["sweep"] if r["cost_per_1000"] is not None]
    xs, ys = [r["threshold"] for r in priced], [r["cost_per_1000"] for r in priced]
    xticks, yticks = nice_ticks(min(xs), max(xs)), nice_ticks(min(ys), max(ys))
    frame = Frame(x0=xticks[0], x1=xticks[-1], y0=yticks[0], y1=yticks[-1])
    best = risk_coverage["cheapest"]
    at = frame.x(best["threshold"])
    parts = [
        *grid(frame, xticks, yticks),
        border(frame),
        el(
            "line",
            el("title", f"cheapest: {best['cost_per_1000']:.2f} per 1,000"),
            x1=at,
            y1=frame.top,
            x2=at,
            y2=frame.bottom,
            class_="cheapest",
        ),
        el("polyline", points=points(frame, xs, ys), class_="cost-curve"),
        *(
            _mark(frame, r["threshold"], r["cost_per_1000"], _describe(r), "cost-mark")
            for r in priced
        ),
    ]
    name = f"cheapest at {best['threshold']:g}"
    parts += labels(frame, name, "confidence threshold", "cost per 1,000 decisions")
    return panel(parts, kind="cost", title=name)


def _mark(frame: Frame, x: float, y: float, text: str, css: str) -> Html:
    return el("circle", el("title", text), cx=frame.x(x), cy=frame.y(y), r=2.5, class_=css)


def _describe(row: dict[str, Any]) -> str:
    cost = row["cost_per_1000"]
    return (
        f"threshold {row['threshold']:g}: coverage {sig(row['coverage'])} "
        f"({row['kept']:,} kept, {row['handed_off']:,} handed off), "
        f"selective risk {sig(row['selective_risk'])}"
        + ("" if cost is None else f", cost {cost:.2f} per 1,000")
    )


def _empty(frame: Frame) -> Html:
    return el(
        "text",
        "no labeled, decided cases",
        x=frame.centre,
        y=frame.top + frame.height / 2,
        text_anchor="middle",
        font_size=13,
    )

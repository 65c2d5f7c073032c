"""Inline SVG and table charts: the reliability diagram and count matrices (confusion, flips).

The reliability diagram draws bins exactly as the report's tables hold them (DecGuard's
``lower/upper/count/mean_confidence/accuracy`` rows, from ``core.golden.metrics.reliability`` or
``core.calibration.equal_mass_reliability``); nothing is re-binned here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from decguard_pipeline.core.html.blocks import table
from decguard_pipeline.core.html.markup import Html, el, esc, sig
from decguard_pipeline.core.html.plotarea import (
    LEFT,
    PLOT,
    TOP,
    UNIT,
    UNIT_TICKS,
    border,
    grid,
    labels,
    panel,
)

HISTOGRAM = 0.22  # the tallest count bar, as a share of the plot's height
_x, _y = UNIT.x, UNIT.y


def reliability_svg(
    bins: Sequence[dict[str, Any]], *, title: str, smooth: dict[str, Any] | None = None
) -> Html:
    """One reliability panel: a dot per non-empty bin at (mean confidence, accuracy), its area
    growing with the bin's cases, a red segment from the diagonal to the dot (the bin's gap:
    below the diagonal = over-confident), and grey bars along the bottom spanning each bin's
    confidence range, as tall as its share of the cases. ``smooth``: a calibration section's
    smoothed reliability curve (``smooth.curve``), drawn under the bins with its band."""
    parts: list[Html] = [el("title", title), *grid(UNIT, UNIT_TICKS, UNIT_TICKS)]
    full = [b for b in bins if b.get("count") and b.get("mean_confidence") is not None]
    parts.append(_histogram(full))
    parts.append(border(UNIT))
    parts.append(el("line", x1=_x(0), y1=_y(0), x2=_x(1), y2=_y(1), class_="diag"))
    if smooth is not None:
        parts.append(smooth_layer(smooth))
    parts += labels(UNIT, title, "mean confidence in bin", "accuracy in bin")
    if not full:
        parts.append(
            el(
                "text",
                "no labeled, decided cases",
                x=LEFT + PLOT / 2,
                y=TOP + PLOT / 2,
                text_anchor="middle",
                font_size=13,
            )
        )
    else:
        biggest = max(b["count"] for b in full)
        points = " ".join(f"{_x(b['mean_confidence'])},{_y(b['accuracy'])}" for b in full)
        parts.append(el("polyline", points=points, class_="curve"))
        for b in full:
            conf, acc = b["mean_confidence"], b["accuracy"]
            parts.append(
                el("line", x1=_x(conf), y1=_y(conf), x2=_x(conf), y2=_y(acc), class_="gap")
            )
        for b in full:
            radius = round(3 + 8 * math.sqrt(b["count"] / biggest), 2)
            parts.append(
                el(
                    "circle",
                    el("title", _describe(b)),
                    cx=_x(b["mean_confidence"]),
                    cy=_y(b["accuracy"]),
                    r=radius,
                    class_="dot",
                )
            )
    return panel(parts, kind="reliability", title=title)


SPARSE = 0.05  # below this share of its peak density the smooth curve is not drawn


def _runs(keep: list[bool]) -> list[tuple[int, int]]:
    """``(start, end)`` of every run of True in ``keep`` (end exclusive)."""
    runs, start = [], None
    for i, k in enumerate([*keep, False]):
        if k and start is None:
            start = i
        elif not k and start is not None:
            runs.append((start, i))
            start = None
    return runs


def smooth_layer(curve: dict[str, Any]) -> Html:
    """The smoothed reliability curve (mesh, accuracy, lower, upper, density) and its bootstrap
    band, where the confidences are (its density at least ``SPARSE`` of its peak: elsewhere
    the curve is the kernel's extrapolation, not a measurement)."""
    x, acc, density = curve["mesh"], curve["accuracy"], curve["density"]
    peak = max(density, default=0.0)
    keep = [peak > 0 and d >= SPARSE * peak for d in density]
    clip = [min(max(v, 0.0), 1.0) for v in acc]
    parts = []
    for start, end in _runs(keep):
        if curve["lower"] is not None:
            upper = [(x[i], min(max(curve["upper"][i], 0.0), 1.0)) for i in range(start, end)]
            lower = [(x[i], min(max(curve["lower"][i], 0.0), 1.0)) for i in range(start, end)]
            ring = upper + lower[::-1]
            points = " ".join(f"{_x(a)},{_y(b)}" for a, b in ring)
            parts.append(el("polygon", points=points, class_="band"))
        points = " ".join(f"{_x(x[i])},{_y(clip[i])}" for i in range(start, end))
        parts.append(el("polyline", points=points, class_="smooth"))
    return el("g", parts, class_="smoothed")


def _describe(b: dict[str, Any]) -> str:
    return (
        f"confidence {sig(b['lower'])}–{sig(b['upper'])}: {b['count']:,} cases, "
        f"mean confidence {sig(b['mean_confidence'])}, accuracy {sig(b['accuracy'])}"
    )


def _histogram(bins: Sequence[dict[str, Any]]) -> Html:
    """Each bin's cases as a bar over its confidence range (at least 3 px wide)."""
    if not bins:
        return el("g")
    total = sum(b["count"] for b in bins)
    biggest = max(b["count"] for b in bins)
    bottom = TOP + PLOT
    bars = []
    for b in bins:
        h = round(PLOT * HISTOGRAM * b["count"] / biggest, 2)
        x0, x1 = _x(b["lower"]), _x(b["upper"])
        if x1 - x0 < 3:
            x0, x1 = (x0 + x1) / 2 - 1.5, (x0 + x1) / 2 + 1.5
        share = f"{sig(100 * b['count'] / total)}% of cases"
        bars.append(
            el(
                "rect",
                el("title", f"{_describe(b)} ({share})"),
                x=round(x0 + 0.5, 2),
                y=bottom - h,
                width=round(max(x1 - x0 - 1, 1), 2),
                height=h,
                class_="count",
            )
        )
    return el("g", bars)


def heat_table(
    row_names: Sequence[str],
    col_names: Sequence[str],
    matrix: Sequence[Sequence[int | None]],
    *,
    corner: str,
    totals: bool = True,
    diagonal: bool = True,
) -> Html:
    """A count matrix as a table, cells shaded by their share of the largest off-diagonal
    (red) or diagonal (blue) count; None cells show an en dash."""
    cells = [[v for v in row] for row in matrix]
    off = [v for i, row in enumerate(cells) for j, v in enumerate(row) if v and i != j]
    on = [v for i, row in enumerate(cells) for j, v in enumerate(row) if v and i == j]
    top_off, top_on = max(off, default=0), max(on, default=0)
    head = el(
        "tr",
        el("th", corner, class_="corner"),
        [el("th", c, class_="num") for c in col_names],
        el("th", "total", class_="num") if totals else None,
    )
    rows = []
    for i, name in enumerate(row_names):
        tds = []
        for j, value in enumerate(cells[i]):
            is_diag = diagonal and i == j
            style = None
            if value:
                share = value / (top_on if is_diag else top_off)
                rgb = "9,105,218" if is_diag else "207,34,46"
                style = f"background: rgba({rgb},{round(0.08 + 0.42 * share, 3)})"
            tds.append(
                el(
                    "td",
                    "–" if value is None else sig(value),
                    class_="diag" if is_diag else None,
                    style=style,
                )
            )
        total = None
        if totals:
            known = [v for v in cells[i] if v is not None]
            total = el("td", sig(sum(known)) if len(known) == len(cells[i]) else "–")
        rows.append(el("tr", el("th", name), tds, total))
    if totals:
        sums = []
        for j in range(len(col_names)):
            column = [cells[i][j] for i in range(len(row_names))]
            known = [v for v in column if v is not None]
            sums.append(el("td", sig(sum(known)) if len(known) == len(column) else "–"))
        flat = [v for row in cells for v in row]
        grand = sig(sum(flat)) if None not in flat else "–"  # type: ignore[arg-type]
        rows.append(el("tr", el("th", "total"), sums, el("td", grand)))
    return table(head, rows, class_="heat")


def figure(svg: Html, caption: str) -> Html:
    return el("figure", svg, el("figcaption", esc(caption)), class_="chart")

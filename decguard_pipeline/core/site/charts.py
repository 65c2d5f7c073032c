"""The site's pictures as inline SVG (styled by ``static/site.css``): metric history over time
with the gates' thresholds, two reliability diagrams overlaid, bars of two distributions side
by side (label shares, confidence histograms) and a small interval strip.

Text is escaped by ``core.html.markup.el``; coordinates come from ``core.html.plotarea``, so
the same numbers give the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from decguard_pipeline.core.html.markup import Html, el, sig
from decguard_pipeline.core.html.plotarea import Frame, border, grid, nice_ticks, panel

SERIES = 8  # series classes s0..s7 (site.css); more series reuse them
LEVEL_CLASS = {"requirement": "gate-req", "warning": "gate-warn"}


@dataclass
class Point:
    at: datetime
    value: float
    note: str  # the tooltip: version, run


@dataclass
class Series:
    name: str
    points: list[Point] = field(default_factory=list)


@dataclass
class Threshold:
    value: float
    level: str  # requirement | warning
    gate: str


def _svg(parts: list[Any], width: int, height: int, label: str, kind: str) -> Html:
    """A site chart: a plot panel of its own size, titled for screen readers and tooltips."""
    return panel([el("title", label), *parts], kind=kind, title=label, width=width, height=height)


def _legend(
    names: Sequence[tuple[str, str]], x: float, y: float, width: float
) -> tuple[list[Html], float]:
    """``(class, name)`` entries from ``(x, y)``, a short line then the name, wrapped to rows
    within ``width``; the parts and the height the rows after the first add."""
    parts: list[Html] = []
    left, row = x, 0
    for css, name in names:
        span = 30 + 6.2 * len(name)
        if x > left and x + span > left + width:
            x, row = left, row + 1
        line_y = y + 14 * row
        parts.append(el("line", x1=x, y1=line_y - 4, x2=x + 16, y2=line_y - 4, class_=f"key {css}"))
        parts.append(el("text", name, x=x + 20, y=line_y, font_size=11))
        x += span
    return parts, 14 * row


def _time_ticks(start: float, end: float) -> list[tuple[float, str]]:
    """Up to five ticks over [start, end] (epoch seconds), labelled in UTC: by date, by date
    and time under two days, by time of day under an hour; no label twice."""
    if end <= start:
        moment = datetime.fromtimestamp(start, tz=UTC)
        return [(start, f"{moment:%Y-%m-%d %H:%M}")]
    span = end - start
    form = "%H:%M:%S" if span < 3600 else ("%m-%d %H:%M" if span < 2 * 86400 else "%Y-%m-%d")
    out: list[tuple[float, str]] = []
    for i in range(5):
        at = start + span * i / 4
        text = datetime.fromtimestamp(at, tz=UTC).strftime(form)
        if not out or out[-1][1] != text:
            out.append((at, text))
    return out


def history_chart(
    title: str,
    series: Sequence[Series],
    thresholds: Sequence[Threshold] = (),
    *,
    width: int = 400,
    height: int = 230,
) -> Html:
    """``title`` over time: one line per series (a backend's versions, oldest first), a dot
    per evaluation with its note as tooltip, and each gate's threshold as a dashed line
    (red: requirement, amber: warning)."""
    values = [p.value for s in series for p in s.points if _finite(p.value)]
    values += [t.value for t in thresholds if _finite(t.value)]
    times = [p.at.timestamp() for s in series for p in s.points]
    frame0 = Frame(left=54, top=30, width=width - 70, height=height - 78)
    parts: list[Any] = [
        el("text", title, x=width / 2, y=16, text_anchor="middle", font_size=13, font_weight="600")
    ]
    if not values or not times:
        parts.append(border(frame0))
        parts.append(
            el(
                "text",
                "no values",
                x=frame0.centre,
                y=frame0.top + frame0.height / 2,
                text_anchor="middle",
                font_size=12,
            )
        )
        return _svg(parts, width, height, title, "history")
    yticks = nice_ticks(min(values), max(values), 4)
    start, end = min(times), max(times)
    pad = (end - start) * 0.04 or 3600.0
    frame = Frame(
        left=frame0.left,
        top=frame0.top,
        width=frame0.width,
        height=frame0.height,
        x0=start - pad,
        x1=end + pad,
        y0=yticks[0],
        y1=yticks[-1],
    )
    xticks = _time_ticks(start, end)
    parts += grid(frame, [], yticks)
    for i, (at, text) in enumerate(xticks):
        anchor = "start" if i == 0 else ("end" if i == len(xticks) - 1 else "middle")
        parts.append(
            el("text", text, x=frame.x(at), y=frame.bottom + 15, text_anchor=anchor, font_size=10)
        )
    parts.append(border(frame))
    for t in thresholds:
        if _finite(t.value):
            y = frame.y(t.value)
            css = LEVEL_CLASS.get(t.level, "gate-warn")
            parts.append(
                el(
                    "line",
                    el("title", f"{t.gate} {sig(t.value)} ({t.level})"),
                    x1=frame.left,
                    y1=y,
                    x2=frame.left + frame.width,
                    y2=y,
                    class_=f"gate {css}",
                )
            )
            parts.append(
                el(
                    "text",
                    f"{t.gate} {sig(t.value)}",
                    x=frame.left + frame.width - 4,
                    y=y - 3,
                    text_anchor="end",
                    font_size=9,
                    class_=f"gate-text {css}",
                )
            )
    names = []
    for i, s in enumerate(series):
        css = f"s{i % SERIES}"
        names.append((css, s.name))
        kept = [p for p in sorted(s.points, key=lambda p: p.at) if _finite(p.value)]
        if len(kept) > 1:
            pts = " ".join(f"{frame.x(p.at.timestamp())},{frame.y(p.value)}" for p in kept)
            parts.append(el("polyline", points=pts, class_=f"line {css}"))
        for p in kept:
            parts.append(
                el(
                    "circle",
                    el("title", f"{s.name}: {sig(p.value)} · {p.note}"),
                    cx=frame.x(p.at.timestamp()),
                    cy=frame.y(p.value),
                    r=3.5,
                    class_=f"pt {css}",
                )
            )
    key, extra = _legend(names, frame.left, height - 12, frame.width)
    return _svg([*parts, *key], width, height + extra, title, "history")


def overlay_reliability(
    layers: Sequence[tuple[str, Sequence[dict[str, Any]]]], *, title: str, size: int = 400
) -> Html:
    """Reliability diagrams of several versions on one panel: per version its non-empty bins
    (mean confidence, accuracy) joined by a line, a dot per bin as large as its share of the
    cases; the diagonal is perfect calibration (below it: over-confident)."""
    frame = Frame(left=52, top=30, width=size - 72, height=size - 92)
    ticks = [i / 5 for i in range(6)]
    parts: list[Any] = [
        el("text", title, x=size / 2, y=16, text_anchor="middle", font_size=13, font_weight="600"),
        *grid(frame, ticks, ticks),
        border(frame),
        el("line", x1=frame.x(0), y1=frame.y(0), x2=frame.x(1), y2=frame.y(1), class_="diag"),
        el(
            "text",
            "mean confidence in bin",
            x=frame.centre,
            y=frame.bottom + 32,
            text_anchor="middle",
            font_size=11,
        ),
    ]
    middle = frame.top + frame.height / 2
    parts.append(
        el(
            "text",
            "accuracy in bin",
            x=14,
            y=middle,
            text_anchor="middle",
            font_size=11,
            transform=f"rotate(-90 14 {middle})",
        )
    )
    names = []
    for i, (name, bins) in enumerate(layers):
        css = f"s{i % SERIES}"
        names.append((css, name))
        full = [b for b in bins if b.get("count") and b.get("mean_confidence") is not None]
        if not full:
            continue
        total = sum(b["count"] for b in full)
        pts = " ".join(f"{frame.x(b['mean_confidence'])},{frame.y(b['accuracy'])}" for b in full)
        parts.append(el("polyline", points=pts, class_=f"line {css}"))
        for b in full:
            tip = (
                f"{name}: confidence {sig(b['lower'])}–{sig(b['upper'])}, {b['count']:,} "
                f"cases, mean confidence {sig(b['mean_confidence'])}, accuracy "
                f"{sig(b['accuracy'])}"
            )
            radius = round(2.5 + 7 * math.sqrt(b["count"] / total), 2)
            parts.append(
                el(
                    "circle",
                    el("title", tip),
                    cx=frame.x(b["mean_confidence"]),
                    cy=frame.y(b["accuracy"]),
                    r=radius,
                    class_=f"pt {css}",
                )
            )
    key, extra = _legend(names, frame.left, size - 12, frame.width)
    return _svg([*parts, *key], size, size + extra, title, "overlay")


def paired_bars(
    title: str,
    categories: Sequence[str],
    sides: Sequence[tuple[str, Sequence[float | None]]],
    *,
    width: int = 560,
    height: int = 240,
    percent: bool = True,
) -> Html:
    """Grouped bars: per category one bar per side (``(name, values)``, e.g. baseline and
    current shares), values as shares (``percent``) or counts."""
    frame = Frame(left=54, top=30, width=width - 70, height=height - 92)
    values = [v for _, vs in sides for v in vs if v is not None and _finite(v)]
    top = max(values, default=0.0) or 1.0
    yticks = nice_ticks(0.0, top, 4)
    frame = Frame(
        left=frame.left,
        top=frame.top,
        width=frame.width,
        height=frame.height,
        x0=0,
        x1=max(len(categories), 1),
        y0=0,
        y1=yticks[-1],
    )
    parts: list[Any] = [
        el("text", title, x=width / 2, y=16, text_anchor="middle", font_size=13, font_weight="600"),
        *grid(frame, [], yticks),
        border(frame),
    ]
    slot = frame.width / max(len(categories), 1)
    bar = slot * 0.8 / max(len(sides), 1)
    for c, category in enumerate(categories):
        for s, (name, vs) in enumerate(sides):
            value = vs[c] if c < len(vs) else None
            if value is None or not _finite(value):
                continue
            x = frame.left + c * slot + slot * 0.1 + s * bar
            y = frame.y(value)
            text = f"{value:.1%}" if percent else f"{value:,.0f}"
            parts.append(
                el(
                    "rect",
                    el("title", f"{name} · {category}: {text}"),
                    x=round(x, 2),
                    y=y,
                    width=round(max(bar - 1, 1), 2),
                    height=round(frame.bottom - y, 2),
                    class_=f"bar s{s % SERIES}",
                )
            )
        if len(categories) <= 24:
            label = category if len(category) <= 14 else category[:13] + "…"
            parts.append(
                el(
                    "text",
                    label,
                    x=round(frame.left + (c + 0.5) * slot, 2),
                    y=frame.bottom + 14,
                    text_anchor="middle",
                    font_size=10,
                )
            )
    key, extra = _legend(
        [(f"s{i % SERIES}", n) for i, (n, _) in enumerate(sides)],
        frame.left,
        height - 12,
        frame.width,
    )
    return _svg([*parts, *key], width, height + extra, title, "bars")


def interval_strip(value: float | None, low: float | None, high: float | None) -> Html:
    """A 160 x 14 strip over [0, 1]: the interval as a bar, the value as a tick."""
    width, height = 160, 14
    frame = Frame(left=4, top=2, width=width - 8, height=height - 4)
    parts: list[Any] = [
        el("line", x1=frame.left, y1=7, x2=frame.left + frame.width, y2=7, class_="axis-thin")
    ]
    if low is not None and high is not None:
        parts.append(
            el(
                "rect",
                x=frame.x(low),
                y=3,
                width=round(frame.x(high) - frame.x(low), 2),
                height=8,
                class_="ci",
            )
        )
    if value is not None:
        parts.append(
            el("line", x1=frame.x(value), y1=1, x2=frame.x(value), y2=13, class_="ci-mark")
        )
    label = "no value" if value is None else f"{sig(value)} [{sig(low)}, {sig(high)}]"
    return _svg(parts, width, height, label, "strip")


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)

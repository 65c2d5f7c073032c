"""The plot area of an SVG chart: where a value lands, the grid with its tick labels, the frame,
the title and axis labels, and the ``<svg>`` element of a panel.

Shared by the HTML report's reliability panel (``charts``) and the standalone figures of the
Dagster metadata (``figures``), so every panel is laid out the same way. Coordinates are
rounded to 2 decimals: the same numbers always give the same text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from decguard_pipeline.core.html.markup import Html, el

WIDTH, HEIGHT = 360, 350  # a panel
LEFT, TOP, PLOT = 52, 34, 270  # its plot area: a square


@dataclass(frozen=True)
class Frame:
    """A plot area (pixels) and the values its edges stand for."""

    left: float = LEFT
    top: float = TOP
    width: float = PLOT
    height: float = PLOT
    x0: float = 0.0
    x1: float = 1.0
    y0: float = 0.0
    y1: float = 1.0

    def x(self, value: float) -> float:
        return round(self.left + self.width * _share(value, self.x0, self.x1), 2)

    def y(self, value: float) -> float:
        return round(self.top + self.height * (1 - _share(value, self.y0, self.y1)), 2)

    @property
    def bottom(self) -> float:
        return self.top + self.height

    @property
    def centre(self) -> float:
        return self.left + self.width / 2


def _share(value: float, low: float, high: float) -> float:
    # the unit range maps without arithmetic: an integer stays an integer (and prints as one)
    return value if (low, high) == (0, 1) else (value - low) / (high - low)


UNIT = Frame()  # [0, 1] x [0, 1]: the reliability diagrams
UNIT_TICKS = [tick / 5 for tick in range(6)]


def tick_text(value: float) -> str:
    return f"{value:g}"


def grid(frame: Frame, xticks: Sequence[float], yticks: Sequence[float]) -> list[Html]:
    """Grid lines at the ticks and their labels below and left of the plot area."""
    parts: list[Html] = []
    for i in range(max(len(xticks), len(yticks))):
        x = xticks[i] if i < len(xticks) else None
        y = yticks[i] if i < len(yticks) else None
        if x is not None:
            parts.append(
                el(
                    "line",
                    x1=frame.x(x),
                    y1=frame.top,
                    x2=frame.x(x),
                    y2=frame.bottom,
                    class_="grid",
                )
            )
        if y is not None:
            parts.append(
                el(
                    "line",
                    x1=frame.left,
                    y1=frame.y(y),
                    x2=frame.left + frame.width,
                    y2=frame.y(y),
                    class_="grid",
                )
            )
        if x is not None:
            parts.append(
                el(
                    "text",
                    tick_text(x),
                    x=frame.x(x),
                    y=frame.bottom + 15,
                    text_anchor="middle",
                    font_size=11,
                )
            )
        if y is not None:
            parts.append(
                el(
                    "text",
                    tick_text(y),
                    x=frame.left - 6,
                    y=frame.y(y) + 4,
                    text_anchor="end",
                    font_size=11,
                )
            )
    return parts


def border(frame: Frame) -> Html:
    return el(
        "rect",
        x=frame.left,
        y=frame.top,
        width=frame.width,
        height=frame.height,
        fill="none",
        class_="axis",
    )


def labels(frame: Frame, title: str | None, xlabel: str, ylabel: str) -> list[Html]:
    """The panel's title above the plot area (none for None) and the axis labels."""
    middle = frame.top + frame.height / 2
    parts = [
        el("text", xlabel, x=frame.centre, y=frame.bottom + 34, text_anchor="middle", font_size=12),
        el(
            "text",
            ylabel,
            x=14,
            y=middle,
            text_anchor="middle",
            font_size=12,
            transform=f"rotate(-90 14 {middle})",
        ),
    ]
    if title is None:
        return parts
    heading = el(
        "text", title, x=frame.centre, y=18, text_anchor="middle", font_size=13, font_weight="600"
    )
    return [heading, *parts]


def panel(
    parts: list[Html], *, kind: str, title: str, width: int = WIDTH, height: int = HEIGHT
) -> Html:
    """A panel's ``<svg>`` (``WIDTH`` x ``HEIGHT`` unless given), classed ``chart <kind>``."""
    return el(
        "svg",
        parts,
        xmlns="http://www.w3.org/2000/svg",
        class_=f"chart {kind}",
        width=width,
        height=height,
        viewBox=f"0 0 {width} {height}",
        role="img",
        aria_label=title,
    )


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round ticks (steps of 1, 2, 2.5 or 5 times a power of ten) from at or
    below ``low`` to at or above ``high``; around a single value, a tenth of it either side."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0, 1.0]
    if high <= low:  # one value: a tenth of it either side (0: the unit range)
        half = abs(low) * 0.1
        low, high = (low - half, high + half) if half else (0.0, 1.0)
    raw = (high - low) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    first = math.floor(low / step + 1e-9)
    last = math.ceil(high / step - 1e-9)
    return [_clean(k * step) for k in range(first, last + 1)]


def _clean(value: float) -> float:
    """A tick without binary noise (``0.30000000000000004`` -> ``0.3``); never ``-0.0``."""
    return float(f"{value:.12g}") + 0.0


def points(frame: Frame, xs: Sequence[float], ys: Sequence[float]) -> str:
    """A ``points`` attribute of a polyline through ``(xs[i], ys[i])``."""
    return " ".join(f"{frame.x(a)},{frame.y(b)}" for a, b in zip(xs, ys, strict=True))


def clip(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return min(max(value, low), high)

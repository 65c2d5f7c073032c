"""Pictures of an evaluation: the reliability diagram, the risk-coverage curve and a
calibrator's escalation sweep, as PNG.

Drawn from the extension block alone (``core.guard.extension.extension_metrics``) and, for the
smooth reliability curve, the calibration section (``core.calibration.extension``), so the CLI
writes them next to the report and a Dagster asset can attach the same bytes to its
materialisation. Matplotlib is used through its object API on the Agg canvas: no GUI, no
global pyplot state, safe in worker threads.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from decguard_pipeline.core.errors import ReportError

DPI = 100
SIZE = (9.0, 4.2)  # inches: two panels side by side
RELIABILITY, RISK_COVERAGE = "reliability", "risk_coverage"


def _figure(size: tuple[float, float]) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    # no timestamp or software tag, so the same numbers give the same bytes
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _reliability_panel(axes: Any, bins: list[dict[str, Any]], title: str) -> None:
    axes.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="calibrated")
    full = [b for b in bins if b["count"]]
    if full:
        total = sum(b["count"] for b in full)
        conf = [b["mean_confidence"] for b in full]
        acc = [b["accuracy"] for b in full]
        sizes = [20 + 280 * b["count"] / total for b in full]
        axes.scatter(conf, acc, s=sizes, color="tab:blue", alpha=0.7, label="bins (size = cases)")
        for c, a in zip(conf, acc, strict=True):
            axes.plot([c, c], [c, a], color="tab:red", linewidth=1, alpha=0.6)
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("mean confidence in bin")
    axes.set_ylabel("accuracy in bin")
    axes.set_title(title, fontsize=10)
    axes.legend(loc="upper left", fontsize=8)


SMOOTH_COLOR = "tab:orange"
SPARSE = 0.05  # below this share of its peak density the smooth curve is not drawn


def smooth_curve(axes: Any, curve: dict[str, Any], *, level: float | None = None) -> None:
    """Overlay the smoothed reliability curve (the calibration section's ``smooth.curve``:
    mesh, accuracy, lower, upper, density) on a reliability axes, with its bootstrap band
    shaded, where the confidences are: where their smoothed density is below ``SPARSE`` of its
    peak the curve would be the kernel's extrapolation (towards 0 as the density vanishes), not
    a measurement, and is left out. ``level``: the band's, for the legend."""
    import numpy as np

    x = np.asarray(curve["mesh"], dtype=np.float64)
    y = np.asarray(curve["accuracy"], dtype=np.float64)
    density = np.asarray(curve["density"], dtype=np.float64)
    dense = density >= SPARSE * density.max() if density.size else density.astype(bool)
    if curve["lower"] is not None:
        band = f"band ({level:.0%})" if level is not None else "band"
        axes.fill_between(x, curve["lower"], curve["upper"], where=dense, color=SMOOTH_COLOR,
                          alpha=0.2, linewidth=0, label=f"smooth {band}")  # fmt: skip
    axes.plot(x, np.where(dense, y, np.nan), color=SMOOTH_COLOR, linewidth=2, label="smooth")


def smooth_reliability_png(section: dict[str, Any], *, title: str = "") -> bytes:
    """One panel: the smoothed reliability curve of a calibration section with its band, the
    diagonal and the density of confidences along the bottom."""
    figure = _figure((SIZE[0] / 2 + 0.5, SIZE[1]))
    axes = figure.subplots(1, 1)
    axes.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="calibrated")
    smooth = section["smooth"]
    if smooth is None:
        heading = "no labeled cases"
    else:
        curve = smooth["curve"]
        density = curve["density"]
        peak = max(density) or 1.0
        axes.fill_between(curve["mesh"], [0.25 * d / peak for d in density], color="grey",
                          alpha=0.25, linewidth=0, label="confidences")  # fmt: skip
        smooth_curve(axes, curve, level=smooth["level"])
        interval = (
            f" [{_fmt(smooth['low'])}, {_fmt(smooth['high'])}]" if smooth["low"] is not None else ""
        )
        heading = f"smooth ECE {_fmt(smooth['value'])}{interval}"
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("confidence")
    axes.set_ylabel("accuracy (smoothed)")
    axes.set_title(f"{title} · {heading}" if title else heading, fontsize=10)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    return _png(figure)


def _curve(axes: Any, xs: list[float], ys: list[float], color: str) -> None:
    axes.plot(xs, ys, marker="o", markersize=3, color=color)


def reliability_png(
    calibration: dict[str, Any], *, title: str = "", smooth: dict[str, Any] | None = None
) -> bytes:
    """Reliability diagram: equal-width and equal-mass bins side by side; the red segments
    are each bin's gap (below the diagonal = over-confident). ``smooth``: a calibration
    section's ``smooth`` (value, level, curve), overlaid on both panels (:func:`smooth_curve`)."""
    figure = _figure(SIZE)
    left, right = figure.subplots(1, 2)
    for axes in (left, right) if smooth is not None else ():
        smooth_curve(axes, smooth["curve"], level=smooth["level"])
    _reliability_panel(
        left,
        calibration["reliability_equal_width"],
        f"equal-width · ECE {_fmt(calibration['ece_equal_width'])}",
    )
    _reliability_panel(
        right,
        calibration["reliability_equal_mass"],
        f"equal-mass · ECE {_fmt(calibration['ece_equal_mass'])}"
        + (f" · smooth {_fmt(smooth['value'])}" if smooth is not None else ""),
    )
    gap, direction = calibration["confidence_gap"], calibration["direction"]
    heading = f"gap {gap:+.3f} ({direction})" if gap is not None else "no labeled cases"
    figure.suptitle(f"{title} · {heading}" if title else heading, fontsize=11)
    figure.tight_layout()
    return _png(figure)


def risk_coverage_png(risk_coverage: dict[str, Any], *, title: str = "") -> bytes:
    """Selective risk against coverage over the threshold sweep, and the cost per 1,000
    decisions against the threshold when costs are set."""
    rows = [r for r in risk_coverage["sweep"] if r["selective_risk"] is not None]
    costed = risk_coverage["cheapest"] is not None
    figure = _figure(SIZE if costed else (SIZE[0] / 2 + 0.5, SIZE[1]))
    panels = figure.subplots(1, 2) if costed else [figure.subplots(1, 1)]
    axes = panels[0]
    _curve(axes, [r["coverage"] for r in rows], [r["selective_risk"] for r in rows], "tab:blue")
    # label each distinct point once, with the highest threshold that reaches it
    labelled: dict[tuple[float, float], float] = {}
    for r in rows:
        labelled[(r["coverage"], r["selective_risk"])] = r["threshold"]
    for (coverage, risk), threshold in list(labelled.items())[-8:]:
        axes.annotate(f"t={threshold:g}", (coverage, risk), fontsize=7,
                      textcoords="offset points", xytext=(3, 3))  # fmt: skip
    axes.set_xlim(0, 1.02)
    axes.set_ylim(bottom=0)
    axes.set_xlabel("coverage (share of decisions kept)")
    axes.set_ylabel("selective risk (error rate of kept)")
    axes.set_title(f"AURC {_fmt(risk_coverage['aurc'])}", fontsize=10)
    if costed:
        cost_axes = panels[1]
        priced = [r for r in risk_coverage["sweep"] if r["cost_per_1000"] is not None]
        thresholds = [r["threshold"] for r in priced]
        _curve(cost_axes, thresholds, [r["cost_per_1000"] for r in priced], "tab:green")
        best = risk_coverage["cheapest"]
        cost_axes.axvline(best["threshold"], color="grey", linestyle="--", linewidth=1)
        cost_axes.set_xlabel("confidence threshold")
        cost_axes.set_ylabel("cost per 1,000 decisions")
        cost_axes.set_title(f"cheapest at {best['threshold']:g}", fontsize=10)
    if title:
        figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return _png(figure)


def escalation_png(section: dict[str, Any], *, title: str = "") -> bytes:
    """The calibrator section's escalation sweep (``core/calibration/escalation.py``):
    coverage, accuracy on the answered cases and hand-off rate against the threshold, the
    suggested abstain_below dashed; with costs, the cost per 1,000 decisions beside."""
    rows = section["escalation"]["calibrated"]
    priced = [r for r in rows if r["total_cost_per_1000"] is not None]
    figure = _figure(SIZE if priced else (SIZE[0] / 2 + 0.5, SIZE[1]))
    panels = figure.subplots(1, 2) if priced else [figure.subplots(1, 1)]
    axes = panels[0]
    for key, color, name in (
        ("coverage", "tab:blue", "coverage"),
        ("accuracy_answered", "tab:green", "accuracy answered"),
        ("hand_off_rate", "tab:purple", "hand-off rate"),
    ):
        kept = [r for r in rows if r[key] is not None]
        axes.plot([r["threshold"] for r in kept], [r[key] for r in kept], marker="o",
                  markersize=3, color=color, label=name)  # fmt: skip
    at = section["abstain_below"]["abstain_below"]
    for place in panels:
        if at is not None:
            place.axvline(at, color="grey", linestyle="--", linewidth=1)
        place.set_xlim(0, 1)
        place.set_xlabel("abstain below (calibrated confidence)")
    axes.set_ylim(0, 1.02)
    axes.set_ylabel("share of cases")
    axes.set_title(f"Escalation sweep · {section['method']}", fontsize=10)
    axes.legend(loc="center left", fontsize=8)
    if priced:
        cost = panels[1]
        xs = [r["threshold"] for r in priced]
        _curve(cost, xs, [r["total_cost_per_1000"] for r in priced], "tab:brown")
        escalated = [r for r in priced if r["escalation_cost_per_1000"] is not None]
        if escalated:
            cost.plot([r["threshold"] for r in escalated],
                      [r["escalation_cost_per_1000"] for r in escalated], color="tab:brown",
                      linestyle="--", linewidth=1, label="hand-offs")  # fmt: skip
        cost.set_ylim(bottom=0)
        cost.set_ylabel("cost per 1,000 decisions")
        cost.set_title("Cost per 1,000 decisions", fontsize=10)
    if title:
        figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return _png(figure)


def write_png(path: Path, data: bytes) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        raise ReportError(f"{path}: cannot write image: {exc.strerror or exc}") from exc
    return path


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def images(
    block: dict[str, Any], *, title: str = "", smooth: dict[str, Any] | None = None
) -> dict[str, bytes]:
    """The PNG bytes :func:`write_images` writes, by kind."""
    return {
        RELIABILITY: reliability_png(block["calibration"], title=title, smooth=smooth),
        RISK_COVERAGE: risk_coverage_png(block["risk_coverage"], title=title),
    }


def write_images(
    block: dict[str, Any],
    directory: str | Path,
    stem: str,
    *,
    title: str = "",
    smooth: dict[str, Any] | None = None,
    drawn: dict[str, bytes] | None = None,
) -> dict[str, Path]:
    """``<stem>.reliability.png`` (with ``smooth``'s curve when given) and
    ``<stem>.risk_coverage.png`` in ``directory``. ``drawn``: those pictures' bytes, drawn
    elsewhere (:func:`images` in another process)."""
    directory = Path(directory)
    pictures = drawn if drawn is not None else images(block, title=title, smooth=smooth)
    return {
        name: write_png(directory / f"{stem}.{name}.png", data) for name, data in pictures.items()
    }

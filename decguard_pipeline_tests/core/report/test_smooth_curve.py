"""The smooth reliability curve on the diagrams: the PNG overlay (``plots.smooth_curve``, an
optional ``smooth`` of ``reliability_png``) and the HTML one (``charts.smooth_layer``) draw the
section's own points, with its band, only where the confidences are; without it every diagram
is what it was."""

from __future__ import annotations

import re

import numpy as np

from decguard_pipeline.core.calibration import calibration_summary
from decguard_pipeline.core.calibration.section import calibration_section
from decguard_pipeline.core.html.charts import SPARSE, reliability_svg, smooth_layer
from decguard_pipeline.core.report.plots import (
    _figure,
    reliability_png,
    smooth_curve,
    smooth_reliability_png,
)
from decguard_pipeline_tests.support.calibration_data import multiclass_cases


def _section(seed: int = 0, resamples: int = 30) -> dict:
    rng = np.random.default_rng(seed)
    probs, expected = multiclass_cases(rng, 300, 3, "over")
    return calibration_section(probs, expected, n_bootstrap=resamples).to_dict()


def _summary(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    probs, expected = multiclass_cases(rng, 300, 3, "over")
    return calibration_summary(
        probs.max(axis=1), probs.argmax(axis=1) == expected, n_bins=10, gap_tolerance=0.02
    )


def _dense(curve: dict) -> np.ndarray:
    density = np.asarray(curve["density"])
    return density >= SPARSE * density.max()


def test_png_overlay_draws_the_dense_part_of_the_curve_and_its_band():
    section = _section()
    curve = section["smooth"]["curve"]
    axes = _figure((4, 4)).subplots(1, 1)
    smooth_curve(axes, curve, level=0.95)
    (line,) = axes.get_lines()
    x, y = line.get_data()
    dense = _dense(curve)
    assert 0 < dense.sum() < len(dense)  # some of the mesh has no confidences
    assert np.array_equal(x, curve["mesh"])
    assert np.array_equal(y[dense], np.asarray(curve["accuracy"])[dense])
    assert np.isnan(y[~dense]).all()
    assert len(axes.collections) == 1  # the band
    labels = [h.get_label() for h in axes.get_legend_handles_labels()[0]]
    assert labels == ["smooth band (95%)", "smooth"]


def test_reliability_png_is_unchanged_without_the_curve_and_deterministic_with_it():
    summary, section = _summary(), _section()
    plain = reliability_png(summary, title="t")
    assert reliability_png(summary, title="t", smooth=None) == plain
    smooth = reliability_png(summary, title="t", smooth=section["smooth"])
    assert smooth != plain
    assert reliability_png(summary, title="t", smooth=section["smooth"]) == smooth
    single = smooth_reliability_png(section, title="t")
    assert single[:8] == b"\x89PNG\r\n\x1a\n" and single == smooth_reliability_png(
        section, title="t"
    )
    empty = calibration_section(np.zeros((0, 3)), np.zeros(0, dtype=int)).to_dict()
    assert smooth_reliability_png(empty)[:8] == b"\x89PNG\r\n\x1a\n"


def test_svg_layer_draws_the_section_points():
    section = _section(1)
    curve = section["smooth"]["curve"]
    svg = str(smooth_layer(curve))
    polylines = re.findall(r'<polyline points="([^"]+)" class="smooth"', svg)
    polygons = re.findall(r'<polygon points="([^"]+)" class="band"', svg)
    dense = _dense(curve)
    runs = int(np.count_nonzero(np.diff(np.concatenate(([0], dense.astype(int)))) == 1))
    assert len(polylines) == len(polygons) == runs
    assert sum(len(p.split()) for p in polylines) == int(dense.sum())
    assert sum(len(p.split()) for p in polygons) == 2 * int(dense.sum())
    # the first drawn point is the first dense mesh point, in plot coordinates
    first = int(np.argmax(dense))
    x, y = (float(v) for v in polylines[0].split()[0].split(","))
    assert x == round(52 + 270 * curve["mesh"][first], 2)
    assert y == round(34 + 270 * (1 - min(max(curve["accuracy"][first], 0), 1)), 2)


def test_svg_without_resamples_has_no_band_and_without_curve_is_unchanged():
    section = _section(2, resamples=0)
    assert 'class="band"' not in str(smooth_layer(section["smooth"]["curve"]))
    bins = _summary(2)["reliability_equal_width"]
    plain = str(reliability_svg(bins, title="x"))
    assert str(reliability_svg(bins, title="x", smooth=None)) == plain
    assert 'class="smoothed"' not in plain
    assert 'class="smoothed"' in str(
        reliability_svg(bins, title="x", smooth=section["smooth"]["curve"])
    )

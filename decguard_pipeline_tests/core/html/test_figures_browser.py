"""The metadata figures load as images in headless Chromium, as the Dagster UI shows them:
``<img src="data:image/svg+xml;base64,...">``, at the document's size, with no console error.
Skipped, with the reason, where Chromium is not installed."""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from decguard_pipeline.core.calibration import calibration_summary
from decguard_pipeline.core.calibration.section import calibration_section
from decguard_pipeline.core.guard.risk_coverage import risk_coverage
from decguard_pipeline.core.html.figures import (
    data_uri,
    reliability_figure,
    risk_coverage_figure,
    smooth_reliability_figure,
)
from decguard_pipeline_tests.support.calibration_data import multiclass_cases

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _figures() -> dict[str, str]:
    probs, expected = multiclass_cases(np.random.default_rng(5), 300, 3, "over")
    confidence, correct = probs.max(axis=1), probs.argmax(axis=1) == expected
    summary = calibration_summary(confidence, correct, n_bins=10, gap_tolerance=0.02)
    section = calibration_section(probs, expected, n_bootstrap=20).to_dict()
    thresholds = [i / 20 for i in range(20)]
    costed = risk_coverage(confidence, correct, thresholds, escalation_cost=2.0, error_cost=9.0)
    hostile = "<b>&</b> default"
    return {
        "reliability": reliability_figure(summary, title=hostile, smooth=section["smooth"]),
        "risk": risk_coverage_figure(risk_coverage(confidence, correct, thresholds), title="t"),
        "cost": risk_coverage_figure(costed, title=hostile),
        "smooth": smooth_reliability_figure(section, title=hostile),
    }


def test_each_data_uri_loads_as_an_image_of_its_size(tmp_path, chromium):
    figures = _figures()
    images = "".join(
        f'<img id="{name}" alt="{name}" src="{html.escape(data_uri(svg))}">'
        for name, svg in figures.items()
    )
    page_file = tmp_path / "figures.html"
    page_file.write_text(f"<!doctype html><meta charset=utf-8><body>{images}</body>")
    page, seen = chromium.open(page_file)
    page.wait_for_function("[...document.images].every(i => i.complete)")
    for name, svg in figures.items():
        root = ET.fromstring(svg)
        size = page.locator(f"#{name}").evaluate("e => [e.naturalWidth, e.naturalHeight]")
        assert size == [int(root.get("width")), int(root.get("height"))], name
        assert size[0] > 300 and size[1] > 300, name
    assert seen.problems() == []

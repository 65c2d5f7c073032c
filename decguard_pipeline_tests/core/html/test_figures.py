"""The standalone SVG figures of the Dagster metadata (``core.html.figures``): well-formed XML,
a dot per non-empty bin where the bin's numbers put it, hostile titles shown as text, the
smooth band only where the confidences are, the risk-coverage points and threshold labels,
the cost panel only with costs, and the same bytes for the same numbers."""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from decguard_pipeline.core.calibration.section import calibration_section
from decguard_pipeline.core.guard.risk_coverage import risk_coverage
from decguard_pipeline.core.html.figures import (
    data_uri,
    reliability_figure,
    risk_coverage_figure,
    smooth_reliability_figure,
    style,
)
from decguard_pipeline_tests.support.calibration_data import multiclass_cases

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script> & <b>co</b>'
# the plot area of a panel: 52 px from its left, 34 from its top, 270 px square
LEFT, TOP, SIDE = 52, 34, 270


def _bin(lower, upper, count, conf=None, acc=None):
    return {"lower": lower, "upper": upper, "count": count, "mean_confidence": conf,
            "accuracy": acc}  # fmt: skip


WIDTH_BINS = [_bin(0.0, 0.25, 0), _bin(0.25, 0.5, 4, 0.4, 0.25), _bin(0.5, 0.75, 0),
              _bin(0.75, 1.0, 16, 0.875, 0.8125)]  # fmt: skip
MASS_BINS = [_bin(0.3, 0.5, 10, 0.42, 0.3), _bin(0.8, 0.95, 10, 0.9, 0.9)]
CALIBRATION = {
    "confidence_gap": 0.0625,
    "direction": "over-confident",
    "ece_equal_width": 0.07,
    "ece_equal_mass": 0.06,
    "reliability_equal_width": WIDTH_BINS,
    "reliability_equal_mass": MASS_BINS,
}


def _cases(seed: int = 0):
    rng = np.random.default_rng(seed)
    return multiclass_cases(rng, 300, 3, "over")


def _smooth_section(seed: int = 0, resamples: int = 20) -> dict:
    probs, expected = _cases(seed)
    return calibration_section(probs, expected, n_bootstrap=resamples).to_dict()


def _risk(costs: bool) -> dict:
    probs, expected = _cases(3)
    confidence, correct = probs.max(axis=1), probs.argmax(axis=1) == expected
    thresholds = [i / 20 for i in range(20)]
    if costs:
        return risk_coverage(confidence, correct, thresholds, escalation_cost=2.0,
                             error_cost=10.0)  # fmt: skip
    return risk_coverage(confidence, correct, thresholds)


def _panels(root: ET.Element, kind: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}svg") if e.get("class") == f"chart {kind}"]


def _texts(element: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in element.iter(f"{SVG}text")]


def test_reliability_figure_has_a_dot_per_non_empty_bin_where_its_numbers_put_it():
    root = ET.fromstring(reliability_figure(CALIBRATION, title="default · m v1"))
    assert root.tag == f"{SVG}svg"
    width, mass = _panels(root, "reliability")
    for panel, bins in ((width, WIDTH_BINS), (mass, MASS_BINS)):
        dots = [c for c in panel.iter(f"{SVG}circle") if c.get("class") == "dot"]
        full = [b for b in bins if b["count"]]
        assert len(dots) == len(full)
        for dot, b in zip(dots, full, strict=True):
            # (coordinates are written with 2 decimals)
            assert float(dot.get("cx")) == pytest.approx(
                LEFT + SIDE * b["mean_confidence"], abs=0.005
            )
            assert float(dot.get("cy")) == pytest.approx(
                TOP + SIDE * (1 - b["accuracy"]), abs=0.005
            )
        # the bigger bin has the bigger dot
        if full[0]["count"] != full[1]["count"]:
            radii = [float(d.get("r")) for d in dots]
            assert (radii[0] < radii[1]) == (full[0]["count"] < full[1]["count"])
        # a red gap segment per dot, from the diagonal to the dot
        gaps = [g for g in panel.iter(f"{SVG}line") if g.get("class") == "gap"]
        assert [(float(g.get("y1")), float(g.get("y2"))) for g in gaps] == [
            pytest.approx(
                (TOP + SIDE * (1 - b["mean_confidence"]), TOP + SIDE * (1 - b["accuracy"])),
                abs=0.005,
            )
            for b in full
        ]
    texts = _texts(root)
    assert "default · m v1 · gap +0.062 (over-confident)" in texts
    assert "equal-width · ECE 0.070" in texts and "equal-mass · ECE 0.060" in texts
    for words in ("mean confidence in bin", "accuracy in bin", "calibrated",
                  "bins (size = cases)"):  # fmt: skip
        assert texts.count(words) == 2, words
    # the second panel is beside the first, under the heading
    groups = [g.get("transform") for g in root.findall(f"{SVG}g")]
    assert groups == ["translate(0 30)", "translate(360 30)"]


def test_hostile_titles_are_text():
    section = _smooth_section()
    documents = [
        reliability_figure(CALIBRATION, title=HOSTILE, smooth=section["smooth"]),
        risk_coverage_figure(_risk(True), title=HOSTILE),
        smooth_reliability_figure(section, title=HOSTILE),
    ]
    for svg in documents:
        assert "<script" not in svg and "<b>" not in svg
        root = ET.fromstring(svg)  # well-formed: every & and < escaped
        assert not list(root.iter(f"{SVG}script"))
        heading = root.find(f"{SVG}title").text
        assert heading.startswith(HOSTILE)
        assert root.get("aria-label") == heading
        assert any(t.startswith(HOSTILE) for t in _texts(root))


def test_smooth_band_and_curve_only_where_the_density_is_at_least_5_percent_of_its_peak():
    section = _smooth_section(1)
    curve = section["smooth"]["curve"]
    density = np.asarray(curve["density"])
    dense = np.flatnonzero(density >= 0.05 * density.max())
    assert 0 < len(dense) < len(density)  # the example has sparse ends
    expected = {round(LEFT + SIDE * curve["mesh"][i], 2) for i in dense}
    for svg in (smooth_reliability_figure(section, title="t"),
                reliability_figure(CALIBRATION, smooth=section["smooth"])):  # fmt: skip
        root = ET.fromstring(svg)
        bands = [p for p in root.iter(f"{SVG}polygon") if p.get("class") == "band"]
        lines = [p for p in root.iter(f"{SVG}polyline") if p.get("class") == "smooth"]
        assert bands and lines
        for element in bands + lines:
            xs = {float(p.split(",")[0]) for p in element.get("points").split()}
            assert xs <= expected
        # every dense mesh point is drawn (on each panel)
        drawn = {float(p.split(",")[0]) for e in lines for p in e.get("points").split()}
        assert drawn == expected


def test_smooth_figure_shows_the_density_the_measure_and_its_interval():
    section = _smooth_section(2)
    smooth = section["smooth"]
    root = ET.fromstring(smooth_reliability_figure(section, title="default"))
    heading = (f"default · smooth ECE {smooth['value']:.3f} [{smooth['low']:.3f}, "
               f"{smooth['high']:.3f}]")  # fmt: skip
    assert root.find(f"{SVG}title").text == heading
    texts = _texts(root)
    assert {"confidence", "accuracy (smoothed)", "confidences", "smooth",
            f"smooth band ({smooth['level']:.0%})"} <= set(texts)  # fmt: skip
    (shade,) = [p for p in root.iter(f"{SVG}polygon") if p.get("class") == "density"]
    tops = [float(p.split(",")[1]) for p in shade.get("points").split()[1:-1]]
    # the peak of the density reaches a quarter of the plot's height
    assert min(tops) == pytest.approx(TOP + SIDE * 0.75)
    empty = calibration_section(np.zeros((0, 3)), np.zeros(0, dtype=int)).to_dict()
    assert ET.fromstring(smooth_reliability_figure(empty)).find(f"{SVG}title").text == (
        "no labeled cases"
    )


def test_risk_coverage_points_threshold_labels_and_aurc():
    risk = _risk(False)
    root = ET.fromstring(risk_coverage_figure(risk, title="t"))
    (panel,) = _panels(root, "risk-coverage")
    assert not _panels(root, "cost")
    rows = [r for r in risk["sweep"] if r["selective_risk"] is not None]
    marks = [c for c in panel.iter(f"{SVG}circle") if c.get("class") == "risk-mark"]
    assert len(marks) == len(rows)
    # coverage runs over 0..1.02 of the plot's width
    for mark, r in zip(marks, rows, strict=True):
        assert float(mark.get("cx")) == pytest.approx(LEFT + SIDE * r["coverage"] / 1.02, abs=0.01)
    # the last 8 distinct points, each with the highest threshold that reaches it
    highest: dict = {}
    for r in rows:
        highest[(r["coverage"], r["selective_risk"])] = r["threshold"]
    labels = [t for t in _texts(panel) if t.startswith("t=")]
    assert labels == [f"t={t:g}" for t in list(highest.values())[-8:]]
    assert f"AURC {risk['aurc']:.3f}" in _texts(panel)
    assert "coverage (share of decisions kept)" in _texts(panel)


def test_cost_panel_marks_the_cheapest_threshold():
    risk = _risk(True)
    root = ET.fromstring(risk_coverage_figure(risk, title="t"))
    (panel,) = _panels(root, "cost")
    best = risk["cheapest"]
    assert f"cheapest at {best['threshold']:g}" in _texts(panel)
    assert "cost per 1,000 decisions" in _texts(panel)
    priced = [r for r in risk["sweep"] if r["cost_per_1000"] is not None]
    marks = [c for c in panel.iter(f"{SVG}circle") if c.get("class") == "cost-mark"]
    assert len(marks) == len(priced)
    (line,) = [e for e in panel.iter(f"{SVG}line") if e.get("class") == "cheapest"]
    (mark,) = [m for m, r in zip(marks, priced, strict=True) if r["threshold"] == best["threshold"]]
    assert line.get("x1") == line.get("x2") == mark.get("cx")
    # the cheapest mark is the lowest one (largest y in pixels)
    assert float(mark.get("cy")) == max(float(m.get("cy")) for m in marks)


def test_same_numbers_same_bytes():
    section = _smooth_section()
    calls = [
        lambda c, s: reliability_figure(c["cal"], title="a", smooth=s["smooth"]),
        lambda c, s: smooth_reliability_figure(s, title="a"),
        lambda c, s: risk_coverage_figure(c["risk"], title="a"),
    ]
    inputs = {"cal": CALIBRATION, "risk": _risk(True)}
    for draw in calls:
        first = draw(inputs, section)
        assert draw(copy.deepcopy(inputs), copy.deepcopy(section)) == first


def test_the_document_carries_its_style_and_a_data_uri_decodes_to_it():
    css = style()
    assert "var(" not in css and "sans-serif" in css
    assert "<" not in css and "&" not in css  # safe as the text of an XML element
    assert "svg.chart .dot" in css and "#cf222e" in css  # page.css's rules, variables resolved
    svg = reliability_figure(CALIBRATION)
    root = ET.fromstring(svg)
    assert root.find(f"{SVG}style").text == css
    uri = data_uri(svg)
    assert uri.startswith("data:image/svg+xml;base64,")
    import base64

    assert base64.b64decode(uri.split(",", 1)[1]).decode("utf-8") == svg
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", uri.split(",", 1)[1])

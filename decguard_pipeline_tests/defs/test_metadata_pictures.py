"""The pictures of ``golden_metrics``' metadata are SVG documents in ``data:`` URLs (issue 15:
no matplotlib in a pipeline run): they decode to well-formed SVG showing the report's own
numbers, and an ``evaluate`` of contracts without the guard extension never imports
matplotlib (the guard contract's PNG files are the CLI's, drawn by ``core.report.plots``)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.golden_assets import materialise

SVG = "{http://www.w3.org/2000/svg}"
UP_TO_METRICS = ("contract", "golden_dataset", "case_results", "golden_metrics")
IMAGE = re.compile(r"!\[([^\]]*)\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)")


def decoded(markdown: str) -> tuple[str, ET.Element]:
    """The alt text and the parsed document of a markdown image with an SVG data URL."""
    match = IMAGE.fullmatch(markdown)
    assert match, markdown[:80]
    return match[1], ET.fromstring(base64.b64decode(match[2]).decode("utf-8"))


def texts(element: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in element.iter(f"{SVG}text")]


def test_golden_metrics_pictures_decode_to_svg_with_the_reports_numbers(tmp_path, ours):
    shutil.copytree(EXAMPLES / "refund", tmp_path / "contracts" / "refund")
    (entry,) = discover_contracts(str(tmp_path / "contracts"))
    target = "default@refund-mock-v1"
    done = materialise(entry, target, tmp_path / "wh", UP_TO_METRICS)
    doc = json.loads(ours("test", entry.path, "-f", "json").stdout)
    shown = done["golden_metrics"].metadata

    alt, diagram = decoded(shown["reliability_diagram"].value)
    backend = doc["backend"]
    assert alt == f"reliability {backend['name']} · {backend['model']}"  # no model version
    assert diagram.tag == f"{SVG}svg"
    words = texts(diagram)
    assert f"equal-width · ECE {doc['metrics']['calibration']['ece']:.3f}" in words
    # one dot per non-empty bin of the report's (DecGuard's) equal-width bins
    (width_panel, _) = [
        e for e in diagram.iter(f"{SVG}svg") if e.get("class") == "chart reliability"
    ]
    full = [b for b in doc["metrics"]["calibration"]["reliability"] if b["count"]]
    dots = [c for c in width_panel.iter(f"{SVG}circle") if c.get("class") == "dot"]
    assert [(float(d.get("cx")), float(d.get("cy"))) for d in dots] == [
        pytest.approx((52 + 270 * b["mean_confidence"], 34 + 270 * (1 - b["accuracy"])), abs=0.005)
        for b in full
    ]

    alt, curve = decoded(shown["risk_coverage"].value)
    assert alt.startswith("risk-coverage ")
    assert any(w.startswith("AURC ") for w in texts(curve))
    assert "coverage (share of decisions kept)" in texts(curve)


@pytest.mark.slow
def test_evaluate_without_the_guard_extension_never_imports_matplotlib(tmp_path):
    for name in ("spam", "refund"):
        shutil.copytree(EXAMPLES / name, tmp_path / "contracts" / name)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "DECGUARD_WAREHOUSE": str(tmp_path / "wh"),
        "DECGUARD_CONTRACTS": str(tmp_path / "contracts"),
        "DECGUARD_PRODUCTION": str(tmp_path / "production"),
        "PYTHONPROFILEIMPORTTIME": "1",  # every Python process started below logs its imports
    }
    (tmp_path / "production").mkdir()
    ran = subprocess.run(
        [sys.executable, "-m", "decguard_pipeline", "evaluate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in ran.stderr.splitlines()
                if line.startswith("import time:")]  # fmt: skip
    # the pictures were drawn in a process whose imports are listed here
    assert "decguard_pipeline.core.html.figures" in imported
    assert not [m for m in imported if m.split(".")[0] == "matplotlib"]

"""The Dagster UI in headless Chromium on a finished ``decguard-pipeline evaluate`` (issue 14):
the refund example's scoreboard page shows every target's verdict and numbers, newest first,
in place; golden_metrics shows its reliability diagram and risk-coverage curve (SVG, one click
each); the scoreboard's link
opens the target's HTML report from the report-files server; no console errors anywhere.
Skipped with the reason where Chromium is absent (.ci/run installs it)."""

from __future__ import annotations

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.dagster_ui import (
    dismiss_welcome,
    evaluated,
    metadata_row,
    show_markdown,
    webserver,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# no cost column: the mock backend reports no usage
HEADERS = ["target", "verdict", "accuracy", "macro-F1", "ECE", "ECE (mass)", "coverage",
           "regression"]  # fmt: skip


def test_scoreboard_reliability_and_report_render(tmp_path, chromium):
    place = evaluated(tmp_path)
    assert place.returncode == 0, place.stderr  # failing gates are verdicts: exit 0
    verdicts = Warehouse(place.warehouse).query(
        "SELECT target, status FROM verdicts ORDER BY evaluated_at DESC, target DESC"
    )
    newest_first = [(r["target"], r["status"].upper()) for r in verdicts.to_pylist()]
    assert sorted(s for _, s in newest_first) == ["FAIL", "FAIL", "PASS"]

    with webserver(place) as ui:
        page, seen = chromium.open(f"{ui.url}/assets/refund/scoreboard", width=1400)
        dismiss_welcome(page)
        # the markdown table: drawn in place (no "[Show Markdown]"), newest first
        table = metadata_row(page, "scoreboard_markdown").locator("table")
        table.wait_for(timeout=60_000)
        assert table.locator("th").all_inner_texts() == HEADERS
        rows = [r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()]
        assert [(r[0], r[1]) for r in rows] == newest_first
        # the newest target links its HTML report
        link = table.locator("a", has_text=newest_first[0][0]).get_attribute("href")
        assert link.startswith(place.env()["DECGUARD_REPORTS_URL"])
        assert seen.console_errors == [] and seen.page_errors == []

        page, seen = chromium.open(f"{ui.url}/assets/refund/golden_metrics", width=1400)
        dismiss_welcome(page)
        accuracy = metadata_row(page, "accuracy")
        accuracy.wait_for(timeout=60_000)
        # the pictures are SVG documents in data: URLs, which the UI's markdown lets through
        for key, alt in (
            ("reliability_diagram", "reliability"),
            ("risk_coverage", "risk-coverage"),
        ):
            dialog = show_markdown(page, key)
            image = dialog.locator(f"img[alt^='{alt}']")
            image.wait_for()
            width, height, complete, src = image.evaluate(
                "e => [e.naturalWidth, e.naturalHeight, e.complete, e.getAttribute('src')]"
            )
            assert src.startswith("data:image/svg+xml;base64,"), key
            assert complete and width > 300 and height > 200, key
            page.keyboard.press("Escape")
            dialog.wait_for(state="hidden")
        assert seen.console_errors == [] and seen.page_errors == []

        # the newest target's HTML report, through the scoreboard's link
        report, seen = chromium.open(link, ready="body[data-ready]")
        assert report.locator(".badge .word").inner_text() == newest_first[0][1]
        assert report.locator("svg.reliability").count() == 2
        assert seen.console_errors == [] and seen.page_errors == []

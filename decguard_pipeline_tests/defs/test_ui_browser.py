"""The Dagster UI in headless Chromium on a finished ``decguard-pipeline evaluate`` (issues 14
and 27): the refund example's scoreboard shows every target's verdict and the gates that do
not hold, newest first, drawn in place and without scrolling sideways at 1,600 pixels; the
Overview's timeline lists evaluate's runs; golden_metrics shows its reliability diagram and
risk-coverage curve (SVG, one click each); the scoreboard's link opens the target's HTML
report, whose banner is the target's verdict; no console errors anywhere. Skipped with the
reason where Chromium is absent (.ci/run installs it)."""

from __future__ import annotations

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.dagster_ui import (
    evaluated,
    metadata_row,
    show_markdown,
    webserver,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDTH = 1600  # the screen
# how far the asset page's metadata table reaches past its column (0: it fits)
OVERFLOW = """() => {
  const box = [...document.querySelectorAll('div')].find(
    (d) => d.className.includes('AssetEventMetadataEntriesTable'));
  return box ? box.scrollWidth - box.clientWidth : null;
}"""


def test_scoreboard_reliability_and_report_render(tmp_path, chromium):
    place = evaluated(tmp_path)
    assert place.returncode == 0, place.stderr  # failing gates are verdicts: exit 0
    verdicts = (
        Warehouse(place.warehouse)
        .query(
            "SELECT target, status, headline FROM verdicts ORDER BY evaluated_at DESC, target DESC"
        )
        .to_pylist()
    )
    newest_first = [(r["target"], r["status"].upper()) for r in verdicts]
    assert sorted(s for _, s in newest_first) == ["FAIL", "FAIL", "PASS"]

    with webserver(place) as ui:
        page, seen = chromium.open(f"{ui.url}/assets/refund/scoreboard", width=WIDTH)
        # one entry per target, drawn in place (no "[Show Markdown]"), newest first
        first = metadata_row(page, newest_first[0][0])
        first.locator("strong").first.wait_for(timeout=60_000)
        keys = [k.strip() for k in page.locator("tr td:first-child").all_inner_texts()]
        targets = [t for t, _ in newest_first]
        # (the entries' keys come first; the numbers table below names them again)
        assert list(dict.fromkeys(k for k in keys if k in targets)) == targets
        for target, word in newest_first:
            entry = metadata_row(page, target)
            assert entry.locator("strong").first.inner_text() == word
            assert "[Show Markdown]" not in entry.inner_text()
        failing = next(t for t, w in newest_first if w == "FAIL")
        text = metadata_row(page, failing).inner_text()
        assert "golden.max_ece" in text and " > 0.15" in text  # a gate, value and threshold
        # the newest target links its HTML report; nothing is cut at 1,600 pixels
        link = first.locator("a", has_text="report").get_attribute("href")
        assert link.startswith(place.env()["DECGUARD_REPORTS_URL"])
        assert page.evaluate(OVERFLOW) == 0
        assert seen.console_errors == [] and seen.page_errors == []

        # the Overview's timeline lists the runs of `evaluate` (they have a code location)
        page, seen = chromium.open(f"{ui.url}/overview", width=WIDTH)
        page.get_by_text("evaluate_refund").first.wait_for(timeout=60_000)
        assert "No runs or scheduled ticks" not in page.inner_text("body")

        page, seen = chromium.open(f"{ui.url}/assets/refund/golden_metrics", width=1400)
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

        # the newest target's HTML report, through the scoreboard's link: its verdict
        report, seen = chromium.open(link, ready="body[data-ready]")
        assert report.locator(".badge .word").inner_text() == newest_first[0][1]
        headline = report.locator("[data-pipeline-verdict]").inner_text()
        assert headline.startswith(f"Pipeline verdict: {verdicts[0]['headline']}")
        assert report.locator("svg.reliability").count() == 2
        assert seen.console_errors == [] and seen.page_errors == []

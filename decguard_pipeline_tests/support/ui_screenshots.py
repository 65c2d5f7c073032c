"""The screenshots of docs/ui.md, made from the bundled refund example:

    .venv/bin/python -m decguard_pipeline_tests.support.ui_screenshots docs/img

``decguard-pipeline evaluate`` in a temporary folder, ``dagster-webserver`` on its instance
(support/dagster_ui.py), then headless Chromium as in the browser tests: the scoreboard page,
golden_metrics with its headline numbers, its reliability diagram (one click), the partitions
of approved_target (which versions passed), the runs with their ``decguard/verdict`` tags,
the Overview's timeline and the newest target's HTML report opened from the scoreboard's
link, at 1,600 pixels.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.browser import Chromium, screenshot_folder
from decguard_pipeline_tests.support.dagster_ui import (
    evaluated,
    metadata_row,
    show_markdown,
    webserver,
)

WIDTH = 1600  # the screen the scoreboard is made to fit


def main(directory: str) -> None:
    out = screenshot_folder(directory)
    with tempfile.TemporaryDirectory() as tmp:
        place = evaluated(Path(tmp) / "ui")
        if place.returncode != 0:
            raise SystemExit(f"evaluate exited {place.returncode}: {place.stderr}")
        newest = (
            Warehouse(place.warehouse)
            .query("SELECT target FROM verdicts ORDER BY evaluated_at DESC, target DESC LIMIT 1")
            .to_pylist()[0]["target"]
        )
        with webserver(place) as ui:
            browser = Chromium()
            try:
                page, _ = browser.open(
                    f"{ui.url}/assets/refund/scoreboard", width=WIDTH, height=1250
                )
                entry = metadata_row(page, newest)
                entry.locator("strong").first.wait_for(timeout=60_000)
                link = entry.locator("a", has_text="report").get_attribute("href")
                page.locator("text=Metadata").first.scroll_into_view_if_needed()
                page.screenshot(path=out / "ui-scoreboard.png")

                page, _ = browser.open(
                    f"{ui.url}/assets/refund/golden_metrics", width=WIDTH, height=1500
                )
                metadata_row(page, "accuracy").wait_for(timeout=60_000)
                page.screenshot(path=out / "ui-golden-metrics.png")
                page, _ = browser.open(
                    f"{ui.url}/assets/refund/golden_metrics", width=1400, height=1000
                )
                show_markdown(page, "reliability_diagram").locator("img").wait_for()
                page.wait_for_timeout(1500)  # the dialog fades in
                page.screenshot(path=out / "ui-reliability.png")

                approved = f"{ui.url}/assets/refund/approved_target?view=partitions"
                page, _ = browser.open(approved, width=1600, height=500)
                page.get_by_text("Missing (2)").wait_for(timeout=60_000)
                page.screenshot(path=out / "ui-approved.png")

                page, _ = browser.open(f"{ui.url}/runs", width=WIDTH, height=900)
                page.get_by_text("decguard/verdict: FAIL").first.wait_for(timeout=60_000)
                page.screenshot(path=out / "ui-runs.png")

                page, _ = browser.open(f"{ui.url}/overview", width=WIDTH, height=500)
                page.get_by_text("evaluate_refund").first.wait_for(timeout=60_000)
                page.screenshot(path=out / "ui-overview.png")

                page, _ = browser.open(link, ready="body[data-ready]", width=1280, height=1500)
                page.screenshot(path=out / "ui-report.png")
            finally:
                browser.close()
    names = ("scoreboard", "golden-metrics", "reliability", "approved", "runs", "overview",
             "report")  # fmt: skip
    for name in names:
        print(out / f"ui-{name}.png")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/img")

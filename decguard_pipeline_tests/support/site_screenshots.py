"""The evaluation site's screenshots in docs/ui.md, at 1600 px:

    .venv/bin/python -m decguard_pipeline_tests.support.site_screenshots docs/img

``evaluate`` of every bundled example in a temporary folder (support/site.py), the site built
from its warehouse, then headless Chromium as in the browser tests: the index, the refund
contract, its newest version (why it fails, its calibration), the comparison with its
baseline, a production day and the tickets example's cases with their LLM requests.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from decguard_pipeline.core.site import paths
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.site.build import build_site
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.browser import Chromium, screenshot_folder, top_of
from decguard_pipeline_tests.support.site import evaluated_examples

WIDTH = 1600


def main(directory: str) -> None:
    out = screenshot_folder(directory)
    with tempfile.TemporaryDirectory() as tmp:
        place = evaluated_examples(Path(tmp) / "examples")
        if place.returncode != 0:
            raise SystemExit(f"evaluate exited {place.returncode}: {place.stderr}")
        wh = Warehouse(place.warehouse)
        entries = discover_contracts(str(place.folder / "contracts"))
        build_site(wh, place.site, entries=entries)
        newest = wh.query(
            "SELECT arg_max(target, evaluated_at) AS t, arg_max(baseline_target, evaluated_at) "
            "AS b FROM latest_verdicts WHERE contract = 'refund'"
        ).to_pylist()[0]
        tickets = wh.query(
            "SELECT target FROM latest_runs WHERE contract = 'tickets' AND backend = 'default'"
        ).to_pylist()[0]["target"]
        shots = {
            "site-index.png": (paths.INDEX, None),
            "site-contract.png": (paths.contract_page("refund"), None),
            "site-version.png": (paths.version_page("refund", newest["t"]), 1500),
            "site-compare.png": (paths.compare_page("refund", newest["t"], newest["b"]), None),
            "site-day.png": (paths.day_page("refund", "2026-11-09"), 1100),
            "site-cases.png": (paths.cases_page("tickets", tickets), 1000),
        }
        browser = Chromium()
        try:
            for name, (page_path, height) in shots.items():
                page, seen = browser.open(place.site / page_path, width=WIDTH, height=900)
                if seen.console_errors or seen.page_errors:
                    raise SystemExit(f"{page_path}: {seen.console_errors + seen.page_errors}")
                if name == "site-cases.png":
                    page.locator("details").first.evaluate("d => d.open = true")
                clip = top_of(WIDTH, height)
                page.screenshot(path=str(out / name), full_page=True, clip=clip)
                print(out / name)
        finally:
            browser.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/img")

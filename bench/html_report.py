"""The HTML report of a large run: file size, time to write it, time for headless Chromium to
show it and to filter its case table.

    .venv/bin/python bench/html_report.py               # 100,000 mock cases
    .venv/bin/python bench/html_report.py --cases 10000

Steps: ``test -o report.json`` on generated mock cases (the golden_run.py dataset: ~60% of the
cases are mismatches), then in-process: load and verify the report, render the page, write it;
then ``report report.json`` with and without ``--html`` as child processes (what the flag
costs end to end); then Chromium (Debian's package through Playwright): load until the page's
script has drawn its tables, click each case filter, type a search. Times are wall-clock on
this machine (the load average is printed first; compare runs on an idle machine only).
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golden_run import OURS, mock_workdir


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    return time.perf_counter() - start


def best(command: list[str], cwd: Path, repeat: int) -> float:
    return min(timed(command, cwd) for _ in range(repeat))


def in_process(work: Path) -> None:
    from decguard_pipeline.core.report.html import render_report_html, write_html
    from decguard_pipeline.core.report.verify import load_report

    start = time.perf_counter()
    report = load_report(work / "report.json")
    loaded = time.perf_counter()
    text = render_report_html(report, None, source="report.json")
    rendered = time.perf_counter()
    write_html(work / "report.html", text)
    written = time.perf_counter()
    size = (work / "report.html").stat().st_size
    json_size = (work / "report.json").stat().st_size
    packed = len(gzip.compress(text.encode("utf-8"), 6))
    print(f"    load + verify report.json   {loaded - start:6.2f} s")
    print(f"    render the page             {rendered - loaded:6.2f} s")
    print(f"    write it (atomic)           {written - rendered:6.2f} s")
    mib = 2**20
    print(f"    page size                   {size / mib:6.1f} MiB  (gzip {packed / mib:.1f} MiB;"
          f" report.json {json_size / mib:.1f} MiB)")  # fmt: skip


def in_browser(page_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from decguard_pipeline_tests.support.browser import launch, unavailable, watch

    reason = unavailable()
    if reason:
        print(f"    browser: skipped ({reason})")
        return
    with sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        seen = watch(page)
        start = time.perf_counter()
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-ready]", timeout=120_000)
        ready = time.perf_counter() - start
        script_ms = page.evaluate("window.decguardRenderMs")
        heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
        clock = script_ms / 1000
        print(f"    open until tables drawn     {ready:6.2f} s  (page clock {clock:.2f} s,"
              f" JS heap {heap / 2**20:.0f} MiB)")  # fmt: skip
        cases = page.locator('[data-table="table-cases"]')
        for label in ("mismatches", "errors", "low confidence", "all"):
            button = cases.locator(f'button[data-filter^="{label}"]')
            start = time.perf_counter()
            button.click()
            page.wait_for_function(
                "b => b.classList.contains('active')", arg=button.element_handle()
            )
            took = time.perf_counter() - start
            shown = cases.get_attribute("data-visible")
            print(f"    filter {label:<20} {took * 1000:6.0f} ms  ({int(shown):,} rows match)")
        search = cases.locator("input.search")
        start = time.perf_counter()
        search.fill("order 4242")
        page.wait_for_function(
            "el => el.dataset.visible !== undefined && +el.dataset.visible < 1000",
            arg=cases.element_handle(),
        )
        took = time.perf_counter() - start
        print(f"    search 'order 4242'         {took * 1000:6.0f} ms  (incl. 120 ms debounce;"
              f" {int(cases.get_attribute('data-visible')):,} rows)")  # fmt: skip
        problems = seen.problems()
        print(f"    console errors / requests   {len(problems)}")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        work = mock_workdir(Path(tmp), args.cases)
        subprocess.run([*OURS, "test", "decguard.yaml", "-o", "report.json"], cwd=work,
                       capture_output=True, check=False)  # fmt: skip
        print(f"{args.cases:,} mock cases")
        in_process(work)
        plain = best([*OURS, "report", "report.json"], work, args.repeat)
        html = best([*OURS, "report", "report.json", "--html", "r.html"], work, args.repeat)
        print(f"    report report.json          {plain:6.2f} s;  with --html {html:6.2f} s"
              f"  (+{html - plain:.2f} s)")  # fmt: skip
        in_browser(work / "report.html")


if __name__ == "__main__":
    main()

"""The HTML report in headless Chromium (Debian's package, driven by Playwright): it renders
without console errors and without a single request, the reliability diagrams are drawn at
their size, the case filters, the search, the pager and sorting work, and hostile text is shown
as text (nothing of it runs). Skipped, with the reason, where Chromium is not installed;
.ci/run installs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.html_reports import (
    COUNTS,
    HOSTILE_INPUT,
    HOSTILE_LABEL,
    HOSTILE_META,
    LABELS,
    MIXED_MODEL,
    write_mixed,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REFUND = EXAMPLES / "refund" / "decguard.yaml"


def open_page(chromium, path: Path):
    """The page once its script has drawn the tables (the reports are made before: see
    support.browser.Chromium)."""
    return chromium.open(path, ready="body[data-ready]")


def rows(table) -> int:
    return table.locator("tbody tr.row").count()


@pytest.fixture
def mixed_page(ours, tmp_path, loopback) -> Path:
    server = loopback(MIXED_MODEL, labels=LABELS)
    contract = write_mixed(tmp_path / "mixed", server, properties=True)
    html = tmp_path / "mixed.html"
    ran = ours("test", contract, "--all", "--html", html)
    assert ran.exit_code == 1, ran.stderr
    return html


def test_golden_page_renders_without_errors_or_requests(ours, tmp_path, chromium):
    html = tmp_path / "golden.html"
    assert ours("test", REFUND, "--html", html).exit_code == 0
    page, seen = open_page(chromium, html)
    assert seen.problems() == []
    assert page.locator(".badge .word").inner_text() == "PASS"
    assert page.title().startswith("PASS · refund_request")
    # both reliability diagrams are drawn at their size
    diagrams = page.locator("svg.reliability")
    assert diagrams.count() == 2
    for i in range(2):
        box = diagrams.nth(i).bounding_box()
        assert box is not None and box["width"] >= 350 and box["height"] >= 340
        assert diagrams.nth(i).locator("circle.dot").count() >= 2
    assert rows(page.locator('[data-table="table-cases"]')) == 11


def test_case_filters_search_and_hostile_text(mixed_page, chromium):
    page, seen = open_page(chromium, mixed_page)
    cases = page.locator('[data-table="table-cases"]')
    for label in ("mismatches", "errors", "low confidence", "all"):
        cases.locator(f'button[data-filter^="{label}"]').click()
        assert rows(cases) == COUNTS[label], label
        assert cases.get_attribute("data-visible") == str(COUNTS[label])
    cases.locator("input.search").fill("garbage")
    page.wait_for_function("el => el.dataset.visible === '1'", arg=cases.element_handle())
    assert cases.locator("tbody tr.row td.k-mono").inner_text() == "garbage-5"
    cases.locator("input.search").fill("")
    page.wait_for_function("el => el.dataset.visible === '9'", arg=cases.element_handle())
    # hostile text: shown as text, nothing of it ran or loaded
    row = cases.locator('tbody tr.row:has(td.k-mono:text-is("x7"))')
    assert row.locator("td.k-text").inner_text() == HOSTILE_INPUT
    row.click()
    detail = cases.locator("tr.detail")
    assert HOSTILE_META in detail.inner_text()
    hostile_chip = cases.locator('tbody tr.row:has(td.k-mono:text-is("c9")) span.chip.label')
    assert hostile_chip.first.inner_text() == HOSTILE_LABEL
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    # the properties table: no violation in this run, so all pairs are shown first
    pairs = page.locator('[data-table="table-pairs"]')
    assert pairs.locator("button.filter.active").inner_text().startswith("all pairs")
    pairs.locator('button[data-filter="errors"]').click()
    assert rows(pairs) == 4
    assert seen.problems() == []


def test_pages_and_sorting_of_a_larger_table(ours, tmp_path, write, chromium):
    lines = "".join(
        f'{{"id": "k{i:03d}", "input": "case number {i}", "expected": "yes"}}\n' for i in range(120)
    )
    (tmp_path / "cases.jsonl").write_text(lines)
    contract = write(
        "decguard.yaml",
        """
        schema_version: "0.1"
        decision: {name: big, type: noul}
        backend: {provider: mock, seed: 3}
        dataset: cases.jsonl
        """,
    )
    html = tmp_path / "big.html"
    assert ours("test", contract, "--html", html).exit_code in (0, 1)
    page, seen = open_page(chromium, html)
    cases = page.locator('[data-table="table-cases"]')
    info = cases.locator(".pager .info")
    assert info.inner_text() == "1–50 of 120" and rows(cases) == 50
    cases.locator("button.page-next").click()
    assert info.inner_text() == "51–100 of 120"
    cases.locator("button.page-next").click()
    assert info.inner_text() == "101–120 of 120" and rows(cases) == 20
    assert cases.locator("button.page-next").is_disabled()
    cases.locator("select.page-size").select_option("250")
    assert rows(cases) == 120
    # sorting by confidence: ascending, then descending
    cases.locator("th.k-conf").click()
    shown = [float(t) for t in cases.locator("tbody tr.row td.k-conf .barnum").all_inner_texts()]
    assert shown == sorted(shown) and shown[0] < shown[-1]
    cases.locator("th.k-conf").click()
    shown = [float(t) for t in cases.locator("tbody tr.row td.k-conf .barnum").all_inner_texts()]
    assert shown == sorted(shown, reverse=True)
    assert seen.problems() == []


def test_diff_page_renders_and_filters_changes(ours, tmp_path, chromium):
    base, cand, html = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "diff.html"
    ours("test", REFUND, "-o", base)
    ours("test", REFUND, "-b", "strong_model", "-o", cand)
    assert ours("diff", base, cand, "-c", REFUND, "--html", html).exit_code == 1
    page, seen = open_page(chromium, html)
    assert page.locator(".badge .word").inner_text() == "FAIL"
    assert page.locator("#flips table.heat td.diag").count() == 3
    changes = page.locator('[data-table="table-changes"]')
    assert rows(changes) == 6
    changes.locator('button[data-filter="newly wrong"]').click()
    assert rows(changes) == 5
    changes.locator('button[data-filter="recovered"]').click()
    assert rows(changes) == 0 and "no changed case matches" in changes.inner_text()
    assert seen.problems() == []


def test_without_chromium_the_reason_is_given(monkeypatch):
    from decguard_pipeline_tests.support.browser import CHROMIUM_ENV, unavailable

    monkeypatch.setenv(CHROMIUM_ENV, "/nonexistent/chromium")
    assert unavailable() == (
        "Chromium is not installed (apt-get install -y chromium; .ci/run installs it)"
    )

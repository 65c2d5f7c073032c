"""The evaluation site in headless Chromium after ``evaluate`` of every bundled example, as
``decguard-pipeline ui`` serves it: from the index, one click answers each of the four
questions (did the newest version pass and why not; how does it compare with the version in
production; is its confidence honest; how does production drift), and what each page shows
is the warehouse's. No page scrolls sideways at 1600 or 1366 px; no page loads anything from
outside the site or logs an error. Skipped with the reason where Chromium is absent."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from decguard_pipeline.cli.site_server import serve_site
from decguard_pipeline.core.site import paths
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.site.build import build_site
from decguard_pipeline.steps.site.live import LiveSite
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.site import Examples

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(examples: Examples, tmp_path) -> Iterator[str]:
    """The site as ``ui`` serves it (built on the first request), its base URL."""
    entries = discover_contracts(str(examples.folder / "contracts"))
    live = LiveSite(
        Warehouse(examples.warehouse),
        tmp_path / "served",
        build=lambda wh, folder: build_site(wh, folder, entries=entries),
    )
    port = free_port()
    server = serve_site(live, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()


def query(examples: Examples, sql: str) -> list[dict]:
    return Warehouse(examples.warehouse).query(sql).to_pylist()


def open_index(chromium, base: str):
    page, seen = chromium.open(f"{base}/index.html", width=1600, height=1000)
    page.wait_for_selector("table.index")
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(base) else outside.append(r.url))
    return page, seen, outside


def test_four_questions_one_click_each_from_the_index(examples, served, chromium):
    newest = query(
        examples,
        "SELECT arg_max(target, evaluated_at) AS target FROM latest_verdicts "
        "WHERE contract = 'refund'",
    )[0]["target"]
    verdict = query(examples, f"SELECT * FROM latest_verdicts WHERE contract = 'refund' "
                              f"AND target = '{newest}'")[0]  # fmt: skip
    failing = query(
        examples,
        f"SELECT source, gate, value, threshold FROM latest_all_checks WHERE contract = "
        f"'refund' AND target = '{newest}' AND status = 'fail' ORDER BY source, gate",
    )
    assert verdict["status"] == "fail" and failing

    # 1. Did the new version pass, and why not?
    page, seen, outside = open_index(chromium, served)
    row = page.locator("#contract-refund")
    row.locator("a.q-why").click()
    page.wait_for_selector(".verdict .word")
    assert page.locator(".verdict .word").inner_text() == "FAIL"
    assert page.locator(".verdict h1").inner_text() == newest
    why = page.locator(".verdict .why").inner_text()
    for check in failing:  # golden and regression gates: named <suite>.<gate>
        assert f"{check['source']}.{check['gate']}" in why
    gates = page.locator("table.checks tbody tr.row-fail td.gate").all_inner_texts()
    assert sorted(gates) == sorted(f"{c['source']}.{c['gate']}" for c in failing)

    # 2. How does it compare with the version in production (its approved baseline)?
    page.go_back()
    page.locator("#contract-refund a.q-compare").click()
    page.wait_for_selector("table.deltas")
    heading = page.locator("h1").inner_text()
    assert newest in heading and verdict["baseline_target"] in heading
    diff = query(examples, f"SELECT * FROM latest_diffs WHERE contract = 'refund' "
                           f"AND target = '{newest}'")[0]  # fmt: skip
    accuracy = page.locator("table.deltas tr[data-metric='accuracy'] td[data-col='delta']")
    assert float(accuracy.get_attribute("data-value")) == pytest.approx(diff["accuracy_delta"])
    assert page.locator("svg.overlay polyline").count() == 2  # both reliability curves
    flips = page.locator("table.matrix td.flip")
    assert sum(int(c) for c in flips.all_inner_texts()) == diff["answer_flips"]
    grid_rows = page.locator("table.grid tbody tr").count()
    assert grid_rows >= diff["answer_flips"]  # every flip is in the cases x versions grid

    # 3. Is its confidence honest?
    page.go_back()
    page.locator("#contract-refund a.q-calibration").click()
    page.wait_for_selector("#calibration")
    assert page.url.endswith("#calibration")
    assert page.locator("svg.reliability").count() == 2  # equal-width and equal-mass
    ece = page.locator(".tile .v[data-metric='ece']").get_attribute("data-value")
    assert float(ece) == pytest.approx(verdict["ece"])
    assert "Over-confident" in page.locator("#calibration + p").inner_text()

    # 4. How does production drift?
    page.go_back()
    page.locator("#contract-refund a.q-drift").click()
    page.wait_for_selector("#drift")
    day = query(examples, "SELECT r.target, r.status, d.confidence_tv_distance, d.label_psi "
                          "FROM latest_production_runs r JOIN latest_production_drift d "
                          "USING (contract, target, run_id) WHERE r.contract = 'refund' "
                          "ORDER BY r.target DESC LIMIT 1")[0]  # fmt: skip
    assert day["target"] in page.locator("h1").inner_text()
    assert page.locator(".verdict .word").inner_text() == day["status"].upper()
    tv = page.locator(".tile .v[data-metric='confidence_tv_distance']").get_attribute("data-value")
    assert float(tv) == pytest.approx(day["confidence_tv_distance"])
    assert page.locator("svg.bars").count() == 2  # label shares, confidence histogram
    assert page.locator("table.segments tbody tr").count() == 2  # locale en, it

    assert seen.console_errors == [] and seen.page_errors == []
    assert outside == []


def test_versions_sort_by_a_click_and_the_comparison_form_opens_the_pair(
    examples, served, chromium
):
    page, seen, _ = open_index(chromium, served)
    page.locator("#contract-refund a.contract").click()
    table = page.locator("table.versions")
    table.wait_for()
    cells = "tbody td[data-col='accuracy']"
    table.locator("th", has_text="accuracy").click()
    ascending = [float(v) for v in table.locator(cells).evaluate_all(
        "cs => cs.map(c => c.dataset.value)")]  # fmt: skip
    assert ascending == sorted(ascending)
    targets = query(examples, "SELECT target FROM latest_verdicts WHERE contract = 'refund' "
                              "ORDER BY evaluated_at DESC, target DESC")  # fmt: skip
    first, second = targets[0]["target"], targets[1]["target"]
    page.select_option("form.pick select[name='candidate']", first)
    page.select_option("form.pick select[name='baseline']", second)
    page.locator("form.pick button").click()
    page.wait_for_selector("table.deltas")
    assert page.url.endswith(paths.url_path(paths.compare_page("refund", first, second)))
    assert seen.console_errors == [] and seen.page_errors == []


@pytest.mark.parametrize("width", [1600, 1366])
def test_no_page_scrolls_sideways(examples, site, chromium, width):
    assert len(site.pages) > 40
    page, seen = chromium.open(examples.site / paths.INDEX, width=width, height=900)
    wide = []
    for path in site.pages:
        page.goto((examples.site / path).resolve().as_uri())
        scroll, client = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        if scroll > client:
            wide.append((path, scroll))
    assert wide == []
    inside = examples.site.resolve().as_uri()
    assert [r for r in seen.requests if not r.startswith(inside)] == []  # offline
    assert seen.console_errors == [] and seen.page_errors == []

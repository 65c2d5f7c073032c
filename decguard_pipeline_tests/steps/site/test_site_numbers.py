"""The site's numbers are the warehouse's: each page of a site built after ``evaluate`` of
every bundled example is read back (its ``data-value`` attributes) and compared with the
test's own queries of the warehouse views. Also: every Dagster asset materialisation links
its page of the site."""

from __future__ import annotations

import math
import re
from typing import Any

import dagster as dg
import pytest

from decguard_pipeline.core.site import paths
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.site import SITE_URL, number, page_values

pytestmark = pytest.mark.slow

COLUMNS = ("accuracy", "macro_f1", "ece", "ece_equal_mass", "coverage", "latency_p95_ms",
           "cost_per_1000")  # fmt: skip


def rows(examples: Any, sql: str) -> list[dict[str, Any]]:
    return Warehouse(examples.warehouse).query(sql).to_pylist()


def read(examples: Any, path: str) -> str:
    return (examples.site / path).read_text(encoding="utf-8")


def same(shown: float | None, stored: float | None) -> bool:
    if shown is None or stored is None:
        return shown is None and stored is None
    return math.isclose(shown, stored, rel_tol=1e-12, abs_tol=1e-15)


def test_versions_tables_are_the_newest_verdicts(examples, site):
    verdicts = rows(
        examples,
        "SELECT v.*, s.value AS smece FROM latest_verdicts v LEFT JOIN latest_calibration s "
        "ON s.contract = v.contract AND s.target = v.target AND s.measure = 'smece' "
        "ORDER BY v.contract, v.evaluated_at DESC, v.target DESC",
    )
    contracts = sorted({v["contract"] for v in verdicts})
    assert contracts == ["injection", "refund", "severity", "spam", "tickets"]
    for contract in contracts:
        values = page_values(read(examples, paths.contract_page(contract)))
        shown: dict[str, dict[str, str]] = {}
        for v in values:
            if "data-col" in v:
                shown.setdefault(v["row"]["data-target"], {})[v["data-col"]] = v["data-value"]
        stored = [v for v in verdicts if v["contract"] == contract]
        assert list(shown) == [v["target"] for v in stored], contract  # newest first
        for v in stored:
            cells = shown[v["target"]]
            assert cells["status"] == v["status"]
            for column in (*COLUMNS, "smece"):
                assert same(number(cells[column]), v[column]), (contract, v["target"], column)
    # the demo contract prices its model: the cost column is not empty everywhere
    assert any(v["cost_per_1000"] is not None for v in verdicts)


def test_index_shows_each_contracts_newest_verdict_and_its_failing_gates(examples, site):
    index = read(examples, paths.INDEX)
    newest = rows(
        examples,
        "SELECT contract, arg_max(target, evaluated_at) AS target, "
        "arg_max(status, evaluated_at) AS status FROM latest_verdicts GROUP BY contract",
    )
    for row in newest:
        block = index[index.index(f'id="contract-{row["contract"]}"') :]
        block = block[: block.index("</tr>")]
        link = re.search(r'class="q-why" href="([^"]+)"', block).group(1)
        assert link == paths.url_path(paths.version_page(row["contract"], row["target"]))
        assert f"chip st-{row['status']}" in block
        failing = rows(
            examples,
            f"SELECT source, gate FROM latest_all_checks WHERE contract = '{row['contract']}' "
            f"AND target = '{row['target']}' AND status = 'fail'",
        )
        for check in failing[:4]:  # named <suite>.<gate>, as the verdict names them
            assert f".{check['gate']}" in block


def test_comparison_with_the_regression_baseline_is_the_stored_diff(examples, site):
    diffs = rows(examples, "SELECT * FROM latest_diffs WHERE baseline_target IS NOT NULL")
    assert len(diffs) >= 5
    for diff in diffs:
        page = read(examples, paths.compare_page(diff["contract"], diff["target"],
                                                 diff["baseline_target"]))  # fmt: skip
        values = page_values(page)
        deltas = {v["row"]["data-metric"]: v for v in values if v.get("data-col") == "delta"}
        for metric in ("accuracy", "macro_f1", "ece", "brier", "nll", "error_rate"):
            if diff[f"{metric}_delta"] is None:
                continue
            assert same(number(deltas[metric]["data-value"]), diff[f"{metric}_delta"]), metric
        compared = int(re.search(r'data-compared="(\d+)"', page).group(1))
        assert compared == diff["compared"]
        cells = re.search(r'<table class="matrix".*?</table>', page, re.S).group(0)
        counts = [int(n) for n in re.findall(r'data-value="(\d+)"', cells)]
        k = math.isqrt(len(counts))
        off_diagonal = sum(n for i, n in enumerate(counts) if i // k != i % k)
        assert sum(counts) == diff["compared"] and off_diagonal == diff["answer_flips"]


def test_production_days_are_the_production_tables(examples, site):
    days = rows(
        examples,
        "SELECT r.contract, r.target AS day, r.pending, d.confidence_tv_distance, d.label_psi, "
        "d.accuracy_drop FROM latest_production_runs r "
        "JOIN latest_production_drift d USING (contract, target, run_id)",
    )
    assert {d["day"] for d in days} == {"2026-11-08", "2026-11-09"}
    for d in days:
        page = read(examples, paths.day_page(d["contract"], d["day"]))
        tiles = {v["data-metric"]: v["data-value"] for v in page_values(page) if "data-metric" in v}
        for name in ("confidence_tv_distance", "label_psi", "accuracy_drop"):
            assert same(number(tiles[name]), d[name]), (d["day"], name)
        assert int(tiles["pending"]) == d["pending"]
        segments = rows(
            examples,
            f"SELECT * FROM latest_production_segments WHERE contract = '{d['contract']}' "
            f"AND target = '{d['day']}'",
        )
        shown = {}
        for v in page_values(page):
            if "data-segment" in v["row"] and "data-col" in v:
                shown.setdefault(v["row"]["data-segment"], {})[v["data-col"]] = v["data-value"]
        assert len(shown) == len(segments) > 0
        for s in segments:
            cells = shown[f"{s['segment_key']}={s['segment_value']}"]
            assert same(number(cells["accuracy"]), s["accuracy"])
            low, high = cells["interval"].split(",")
            assert same(float(low), s["accuracy_low"]) and same(float(high), s["accuracy_high"])
            assert int(cells["pending"]) == s["pending"]
        shares = rows(
            examples,
            f"SELECT label, value FROM latest_production_extensions WHERE contract = "
            f"'{d['contract']}' AND target = '{d['day']}' AND section = 'label_drift' "
            f"AND metric = 'current_share'",
        )
        shown_shares = {v["row"]["data-label"]: v["data-value"] for v in page_values(page)
                        if v.get("data-col") == "current_share"}  # fmt: skip
        assert {k: float(v) for k, v in shown_shares.items()} == {
            s["label"]: s["value"] for s in shares
        }


def test_usage_page_is_every_targets_newest_run(examples, site):
    runs = rows(examples, "SELECT contract, target, prompt_tokens, completion_tokens, "
                          "cost_per_run, cost_per_1000 FROM latest_runs")  # fmt: skip
    shown = {}
    for v in page_values(read(examples, paths.USAGE)):
        if "data-col" in v:
            shown.setdefault(v["row"]["data-target"], {})[v["data-col"]] = v["data-value"]
    assert set(shown) == {f"{r['contract']}/{r['target']}" for r in runs}
    priced = 0
    for r in runs:
        cells = shown[f"{r['contract']}/{r['target']}"]
        for name in ("prompt_tokens", "completion_tokens", "cost_per_run", "cost_per_1000"):
            assert same(number(cells[name]), r[name]), (r["target"], name)
        priced += r["cost_per_1000"] is not None
    assert priced >= 3  # the tickets example's priced backends


def test_every_page_is_written_and_links_only_pages_that_exist(examples, site):
    assert site.notes == []
    for page in site.pages:
        text = read(examples, page)
        for link in re.findall(r'(?:href|src)="([^"#]+)', text):
            if link.startswith("data:"):  # inline (the empty favicon)
                continue
            assert "://" not in link, (page, link)  # offline: nothing outside the site
            target = (examples.site / page).parent / link.replace("%40", "@")
            assert target.resolve().is_file(), (page, link)


def test_dagster_materialisations_link_their_site_page(examples, site):
    with dg.DagsterInstance.from_config(str(examples.folder / "home")) as instance:

        def link(key: list[str], partition: str | None = None) -> str:
            event = instance.get_latest_materialization_event(dg.AssetKey(key))
            if partition is not None:  # that partition's newest materialisation
                records = instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition]),
                    limit=1,
                ).records
                event = records[0].event_log_entry
            return event.asset_materialization.metadata["site"].url

        newest = rows(examples, "SELECT arg_max(target, evaluated_at) AS t FROM latest_verdicts "
                                "WHERE contract = 'refund'")[0]["t"]  # fmt: skip
        for asset in ("case_results", "golden_metrics", "report", "verdict"):
            url = link(["refund", asset], newest)
            assert url == f"{SITE_URL}/{paths.url_path(paths.version_page('refund', newest))}"
        sql = f"SELECT baseline_target FROM latest_diffs WHERE target = '{newest}'"
        baseline = rows(examples, sql)[0]["baseline_target"]
        compared = paths.url_path(paths.compare_page("refund", newest, baseline))
        assert link(["refund", "regression_diff"], newest) == f"{SITE_URL}/{compared}"
        assert link(["refund", "scoreboard"]) == f"{SITE_URL}/contracts/refund/index.html"
        assert link(["refund", "contract"]) == f"{SITE_URL}/contracts/refund/index.html"
        day = link(["refund", "production_check"], "2026-11-09")
        assert day == f"{SITE_URL}/contracts/refund/production/2026-11-09.html"
    for url in (day, f"{SITE_URL}/{paths.url_path(paths.version_page('refund', newest))}"):
        assert (examples.site / url.removeprefix(SITE_URL + "/").replace("%40", "@")).is_file()

"""The site's rendering: templates escape every value from the warehouse, the URL scheme's
relative links, the charts' thresholds and bounded label counts."""

from __future__ import annotations

from datetime import UTC, datetime

from decguard_pipeline.core.site import charts, paths
from decguard_pipeline.core.site.render import number, render, signed

HOSTILE = '<script>alert("x")</script>'


def test_values_from_the_warehouse_are_escaped():
    row = {
        "contract": "refund", "target": "default@v1", "provider": HOSTILE, "model": "m",
        **{k: None for k in ("n_cases", "n_errored", "requests", "retries", "prompt_tokens",
                             "completion_tokens", "cost_per_run", "cost_per_1000", "wall_s")},
    }  # fmt: skip
    totals = {"prompt_tokens": None, "completion_tokens": None, "cost_per_run": None}
    page = render("usage.html", paths.USAGE, rows=[row], totals=totals, as_of="–",
                  warehouse=HOSTILE, crumbs=[])  # fmt: skip
    assert "<script>alert" not in page
    assert page.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") == 2


def test_links_are_relative_to_the_page_and_percent_encoded():
    page = paths.version_page("refund", "default@v1")
    assert page == "contracts/refund/versions/default@v1.html"
    assert paths.relative(page, paths.INDEX) == "../../../index.html"
    assert paths.relative(paths.INDEX, paths.compare_page("c", "a@1 x", "b@2")) == (
        "contracts/c/compare/a@1%20x/b@2.html"
    )
    assert paths.absolute("http://localhost:3002/", page) == (
        "http://localhost:3002/contracts/refund/versions/default@v1.html"
    )


def test_numbers_never_show_binary_noise_or_minus_zero():
    assert number(0.17510000000000003) == "0.1751"
    assert number(None) == "–" and number(float("nan")) == "–" and number(1234) == "1,234"
    assert signed(-0.0001) == "+0.000" and signed(-0.25) == "-0.250"


def test_history_draws_each_gate_and_escapes_names():
    at = [datetime(2026, 1, d, tzinfo=UTC) for d in (1, 2, 3)]
    series = [
        charts.Series(
            HOSTILE, [charts.Point(t, v, "v") for t, v in zip(at, (0.9, 0.8, 0.95), strict=True)]
        )
    ]
    svg = charts.history_chart(
        "accuracy", series, [charts.Threshold(0.85, "requirement", "min_accuracy")]
    )
    assert svg.count("<circle") == 3 and "<script>" not in svg
    assert 'class="gate gate-req"' in svg and "min_accuracy 0.85" in svg
    assert "2026-01-01" in svg and "2026-01-03" in svg  # the time axis, in UTC

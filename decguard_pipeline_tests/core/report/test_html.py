"""The static HTML report (``--html``): what the page holds, that it loads nothing and runs
nothing it did not bring, that hostile text stays text, that the flag changes nothing else, and
that the file is written atomically. The page in a real browser: test_html_browser.py."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from decguard_pipeline_tests.conftest import EXAMPLES, same_text
from decguard_pipeline_tests.support.html_reports import (
    COUNTS,
    HOSTILE_INPUT,
    HOSTILE_LABEL,
    HOSTILE_META,
    LABELS,
    MIXED_MODEL,
    PageParts,
    visible_rows,
    write_mixed,
)

REFUND = EXAMPLES / "refund" / "decguard.yaml"
INJECTION = EXAMPLES / "injection" / "decguard.yaml"
# the only elements a page is made of (no img, iframe, link, object, form, ...)
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "div", "h1", "h2", "h3", "p",
    "section", "nav", "a", "main", "footer", "span", "ul", "li", "dl", "dt", "dd", "table",
    "thead", "tbody", "tr", "th", "td", "details", "summary", "figure", "figcaption", "svg",
    "line", "rect", "text", "polyline", "circle", "g", "script", "noscript", "b",
}  # fmt: skip


def fmt4(value: float) -> str:
    """4 significant digits, written independently of the code under test."""
    mantissa, e, exponent = f"{value:.4g}".partition("e")
    return mantissa + (f"e{int(exponent)}" if e else "")


def run_page(ours, tmp_path: Path, *args: object, name: str = "r") -> tuple[dict, str, object]:
    out, html = tmp_path / f"{name}.json", tmp_path / f"{name}.html"
    ran = ours(*args, "-o", out, "--html", html)
    assert ran.exit_code in (0, 1), ran.stderr
    assert ran.stderr.endswith(f"HTML report written to {html}\n")
    return json.loads(out.read_text()), html.read_text(encoding="utf-8"), ran


@pytest.fixture
def mixed(ours, tmp_path, loopback):
    """The mixed report (every kind of case, hostile text), ``test --all``: doc, page."""
    server = loopback(MIXED_MODEL, labels=LABELS)
    contract = write_mixed(tmp_path / "mixed", server, properties=True)
    doc, page, _ = run_page(ours, tmp_path, "test", contract, "--all", name="mixed")
    return doc, page


# -- numbers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.13899999999999998, "0.139"), (0.008487499968623524, "0.008487"), (1.0, "1"),
     (0.7272727272727273, "0.7273"), (12345.678, "1.235e4"), (3.2e-7, "3.2e-7"), (0.0, "0"),
     (-0.0, "0"), (12345, "12,345"), (None, "n/a"), (float("nan"), "NaN"), (True, "n/a")],
)  # fmt: skip
def test_numbers_show_four_significant_digits(value, shown):
    from decguard_pipeline.core.html.markup import sig

    assert sig(value) == shown


def test_array_rounding_is_the_scalar_rounding():
    """The case table rounds whole columns at once; each value must equal '%.4g'."""
    from decguard_pipeline.core.html.markup import rounded_array

    rng = np.random.default_rng(7)
    values = np.concatenate([
        rng.random(50_000), rng.random(2_000) * 1e-6, rng.random(2_000) * 1e7,
        -rng.random(2_000), [0.0, 0.96, 0.85, 0.65, 1.0, 1e-300, 5e300],
    ])  # fmt: skip
    got = rounded_array(values)
    assert got == [float(f"{v:.4g}") for v in values.tolist()]
    assert all(math.isnan(v) for v in rounded_array(np.array([np.nan, np.inf, -np.inf])))
    assert rounded_array(np.array([[0.123456, np.nan]])) == [[0.1235, pytest.approx(np.nan,
                                                              nan_ok=True)]]  # fmt: skip


# -- what the page holds ------------------------------------------------------------------


def test_golden_page_holds_the_reports_verdict_gates_and_cases(ours, tmp_path):
    doc, page, ran = run_page(ours, tmp_path, "test", REFUND, "-b", "order_sensitive")
    parts = PageParts(page)
    assert ran.exit_code == 1 and doc["status"] == "fail"
    assert parts.attr("div", "data-verdict") == ["fail"]
    text = parts.plain()
    assert "FAIL: at least one requirement does not hold" in text
    for check in doc["checks"]:
        assert check["gate"] in text and check["message"] in text
    statuses = parts.attr("tr", "data-status")
    assert sorted(statuses) == sorted(c["status"] for c in doc["checks"])
    # metric tiles: the values, 4 significant digits
    tiles = {a["data-metric"] for t, a in parts.tags if t == "div" and "data-metric" in a}
    assert {"accuracy", "ECE (equal-width)", "coverage", "error rate"} <= tiles
    assert fmt4(doc["metrics"]["calibration"]["ece"]) in text
    # the case table: every case, in dataset order, flags as the report defines them
    cases = parts.blocks()["table-cases"]
    assert cases["rows"]["id"] == [r["case_id"] for r in doc["results"]]
    assert cases["rows"]["input"] == [r["input"] for r in doc["results"]]
    mismatches = sum(f["kind"] == "mismatch" for f in doc["failures"])
    assert visible_rows(cases, "mismatches") == mismatches == 0
    selective = doc["metrics"]["selective"]
    low = selective["n"] - round(selective["coverage"] * selective["n"])
    assert visible_rows(cases, "low confidence") == low == 5
    assert visible_rows(cases, "all") == doc["dataset"]["n_cases"]
    confidence = [r["result"]["confidence"] for r in doc["results"]]
    assert cases["rows"]["confidence"] == [float(fmt4(c)) for c in confidence]


def test_page_loads_nothing_and_runs_only_its_own_script(ours, tmp_path):
    _, page, _ = run_page(ours, tmp_path, "test", REFUND)
    parts = PageParts(page)
    assert {tag for tag, _ in parts.tags} <= ALLOWED_TAGS
    for tag, attrs in parts.tags:
        assert "src" not in attrs and not any(name.startswith("on") for name in attrs)
        if tag == "a":
            assert str(attrs["href"]).startswith("#")
    assert "url(" not in page and "@import" not in page and "http://" not in page.replace(
        "http://www.w3.org/2000/svg", "")  # fmt: skip
    executable = [body for attrs, body in parts.scripts if attrs.get("type") != "application/json"]
    assert len(executable) == 1
    (csp,) = [
        a["content"] for t, a in parts.tags if a.get("http-equiv") == "Content-Security-Policy"
    ]
    digest = base64.b64encode(hashlib.sha256(executable[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in str(csp)
    assert "default-src 'none'" in str(csp) and "connect-src" not in str(csp)


def test_hostile_text_stays_text(mixed):
    doc, page = mixed
    # nothing hostile reaches the markup: no element, attribute or script of its making
    assert "<img" not in page and "<script>window" not in page and HOSTILE_META not in page
    parts = PageParts(page)
    assert {tag for tag, _ in parts.tags} <= ALLOWED_TAGS
    assert not any(name.startswith("on") for _, attrs in parts.tags for name in attrs)
    assert sum(a.get("type") != "application/json" for a, _ in parts.scripts) == 1
    # ... and the text itself survives, exactly, for the page's script to show as text
    blocks = parts.blocks()
    cases = blocks["table-cases"]
    assert HOSTILE_INPUT in cases["rows"]["input"]
    assert HOSTILE_LABEL in cases["columns"][3]["vocab"]
    assert any(HOSTILE_META in (m or "") for m in cases["rows"]["metadata"])
    assert HOSTILE_LABEL in parts.plain()  # the per-label table, escaped
    assert doc["contract"]["labels"] == list(LABELS)


def test_mixed_case_filters_count_what_the_report_counts(mixed):
    doc, page = mixed
    cases = PageParts(page).blocks()["table-cases"]
    kinds = [f["kind"] for f in doc["failures"]]
    assert visible_rows(cases, "mismatches") == kinds.count("mismatch") == COUNTS["mismatches"]
    assert visible_rows(cases, "errors") == kinds.count("error") == COUNTS["errors"]
    assert visible_rows(cases, "low confidence") == COUNTS["low confidence"]
    assert visible_rows(cases, "all") == COUNTS["all"]
    errors = [e for e in cases["rows"]["error"] if e]
    assert errors == [f["error"] for f in doc["failures"] if f["kind"] == "error"]
    # properties: every pair, the summary's errors
    pairs = PageParts(page).blocks()["table-pairs"]
    section = doc["properties"]
    assert pairs["n"] == len(section["pairs"])
    assert visible_rows(pairs, "errors") == section["summaries"][0]["n_errors"]


def _dots(svg: str) -> list[tuple[int, str, str]]:
    return [
        (int(n.replace(",", "")), conf, acc)
        for n, conf, acc in re.findall(
            r"<circle[^>]*><title>confidence [^:]*: ([\d,]+) cases, mean confidence (\S+), "
            r"accuracy ([^<]+)</title>", svg)
    ]  # fmt: skip


def test_reliability_diagrams_draw_the_reports_bins_and_cores_equal_mass_bins(ours, tmp_path):
    from decguard_pipeline.core.calibration import equal_mass_reliability
    from decguard_pipeline.core.report.verify import load_report

    doc, page, _ = run_page(ours, tmp_path, "test", INJECTION, "-d",
                            EXAMPLES / "injection" / "adversarial.jsonl")  # fmt: skip
    svgs = re.findall(r"<svg[^>]*class=\"chart reliability\".*?</svg>", page, flags=re.S)
    assert len(svgs) == 2
    assert all('width="360"' in s and 'height="350"' in s for s in svgs)
    width = [b for b in doc["metrics"]["calibration"]["reliability"] if b["count"]]
    assert _dots(svgs[0]) == [
        (b["count"], fmt4(b["mean_confidence"]), fmt4(b["accuracy"])) for b in width
    ]
    report = load_report(tmp_path / "r.json")
    results = report.results
    labeled = results.ok & (results.expected_index >= 0)
    mass = equal_mass_reliability(
        results.confidence[labeled],
        results.selected[labeled] == results.expected_index[labeled],
        doc["evaluation"]["calibration_bins"],
    )
    assert _dots(svgs[1]) == [
        (b["count"], fmt4(b["mean_confidence"]), fmt4(b["accuracy"])) for b in mass
    ]
    assert sum(n for n, _, _ in _dots(svgs[1])) == doc["metrics"]["calibration"]["n"]


def test_intervals_come_from_the_sidecar(ours, tmp_path, write):
    contract = tmp_path / "stat" / "decguard.yaml"
    shutil.copytree(EXAMPLES / "refund", contract.parent)
    with contract.open("a") as out:
        out.write("\npipeline:\n  statistics: {bootstrap_resamples: 200}\n")
    _, page, _ = run_page(ours, tmp_path, "test", contract, "-b", "order_sensitive", "--all")
    sidecar = json.loads((tmp_path / "r.pipeline.json").read_text())
    text = PageParts(page).plain()
    accuracy = sidecar["statistics"]["intervals"]["accuracy"]
    assert f"[{fmt4(accuracy['low'])}, {fmt4(accuracy['high'])}] wilson" in text
    for summary in sidecar["properties"]["summaries"]:
        low, high = summary["violation_rate_interval"]
        assert f"{fmt4(summary['violation_rate'])} [{fmt4(low)}, {fmt4(high)}]" in text
    assert "95% wilson intervals" in text


def test_a_malformed_sidecar_is_named_not_fatal(ours, tmp_path):
    from decguard_pipeline.core.report.html import render_report_html
    from decguard_pipeline.core.report.verify import load_report

    out = tmp_path / "r.json"
    assert ours("test", REFUND, "-o", out).exit_code == 0
    report = load_report(out)
    odd = {"statistics": {"intervals": 5, "confidence": "x"}, "evaluations": [{"suite": 1}],
           "status": "fail"}  # fmt: skip
    page = render_report_html(report, odd)
    parts = PageParts(page)
    assert parts.attr("div", "data-verdict") == ["pass"]
    text = parts.plain()
    assert "The sidecar's statistics section could not be read" in text
    assert "The sidecar's guard section could not be read" in text


def test_a_stored_report_uses_only_its_own_sidecar(ours, tmp_path):
    from decguard_pipeline.core.report.html import read_sidecar
    from decguard_pipeline.core.report.verify import load_report

    out = tmp_path / "fuzz.json"
    ours("fuzz", REFUND, "-b", "order_sensitive", "-o", out)
    report = load_report(out)
    assert read_sidecar(out, report)["properties"]["interval_method"] == "wilson"
    sidecar = tmp_path / "fuzz.pipeline.json"
    data = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**data, "created_at": "2001-01-01T00:00:00+00:00"}))
    assert read_sidecar(out, report) is None  # another run's
    sidecar.write_text("{not json")
    assert read_sidecar(out, report) is None
    moved = tmp_path / "moved.json"
    shutil.copy(out, moved)
    (tmp_path / "moved.pipeline.json").write_text(json.dumps(data))  # names fuzz.json
    assert read_sidecar(moved, report) is None


def test_fuzz_page_has_properties_and_says_golden_gates_do_not_apply(ours, tmp_path):
    doc, page, ran = run_page(ours, tmp_path, "fuzz", REFUND, "-b", "order_sensitive")
    parts = PageParts(page)
    assert ran.exit_code == 1 and parts.attr("div", "data-verdict") == ["fail"]
    assert "fuzz mode: golden gates are not applied" in parts.plain()
    pairs = parts.blocks()["table-pairs"]
    assert pairs["n"] == len(doc["properties"]["pairs"])
    violating = sum(bool(p["violations"]) for p in doc["properties"]["pairs"])
    assert visible_rows(pairs, "violations") == violating == 27
    assert pairs["start"] == 0  # violations shown first
    assert parts.attr("tr", "data-property") == [s["property"] for s in
                                                 doc["properties"]["summaries"]]  # fmt: skip


def test_guard_contract_page_shows_the_extension_verdict(ours, tmp_path):
    _, page, _ = run_page(ours, tmp_path, "test", INJECTION)
    sidecar = json.loads((tmp_path / "r.pipeline.json").read_text())
    parts = PageParts(page)
    # the badge is the pipeline's verdict, what the command exits with and prints last;
    # DecGuard's own verdict over its gates under it
    assert parts.attr("div", "data-verdict") == ["warn"]
    assert parts.attr("span", "data-pipeline-verdict") == ["warn"]
    assert parts.attr("span", "data-extension-status") == [sidecar["status"]] == ["warn"]
    text = parts.plain()
    assert (
        "Pipeline verdict: WARN — clear.max_confidence_gap, adversarial.max_fnr, "
        "adversarial.max_confidence_gap, adversarial.min_accuracy" in text
    )
    assert "DecGuard's gates: PASS — 3 of 3 gates hold" in text
    for evaluation in sidecar["evaluations"]:
        for check in evaluation["checks"]:
            assert f"{check['gate']} [{evaluation['suite']}]" in text


# -- the CLI: --html changes nothing else -------------------------------------------------


def test_html_flag_leaves_output_and_exit_code_alone(ours, tmp_path):
    plain = ours("test", REFUND, "-b", "order_sensitive", "--all")
    html = tmp_path / "page.html"
    with_html = ours("test", REFUND, "-b", "order_sensitive", "--all", "--html", html)
    assert plain.exit_code == with_html.exit_code == 1
    # both are our outputs: same_text reads our program name as DecGuard's on one side only
    ours_only = with_html.stdout.replace("`decguard-pipeline ", "`decguard ")
    a, b = same_text(plain.stdout, ours_only)
    assert a == b
    assert (plain.stderr, with_html.stderr) == ("", f"HTML report written to {html}\n")
    assert PageParts(html.read_text()).attr("div", "data-verdict") == ["fail"]


def test_report_command_renders_the_stored_report(ours, tmp_path):
    stored = tmp_path / "stored.json"
    ours("test", REFUND, "-b", "order_sensitive", "--all", "-o", stored)
    before = stored.read_bytes()
    plain = ours("report", stored, "-o", tmp_path / "a.json")
    html = tmp_path / "stored.html"
    with_html = ours("report", stored, "-o", tmp_path / "b.json", "--html", html)
    assert (plain.exit_code, plain.stdout) == (with_html.exit_code, with_html.stdout)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert stored.read_bytes() == before
    page = html.read_text()
    assert "rates with 95% wilson intervals (pipeline.json)" in page  # its own sidecar
    # re-evaluated against an edited contract: the page shows the new verdict
    edited = tmp_path / "edited" / "decguard.yaml"
    shutil.copytree(EXAMPLES / "refund", edited.parent)
    text = edited.read_text().replace("max_ece: 0.15", "max_ece: 0.5")
    edited.write_text(re.sub(r"properties:\n(  .*\n)+", "", text))
    ran = ours("report", stored, "-c", edited, "--html", html)
    assert ran.exit_code == 0  # no property gates, a looser ECE gate
    parts = PageParts(html.read_text())
    assert parts.attr("div", "data-verdict") == ["pass"]
    assert "rates with 95% wilson" not in parts.plain()  # the sidecar was another verdict's


def test_an_unwritable_html_path_is_a_clear_error(ours, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    ran = ours("test", REFUND, "--html", blocker / "page.html")
    assert ran.exit_code == 2 and "Traceback" not in ran.stderr
    assert ran.stderr.startswith(f"error: {blocker / 'page.html'}: cannot write HTML report")
    assert not list(tmp_path.glob("**/.page.html.*"))


# -- diff ---------------------------------------------------------------------------------


@pytest.fixture
def two_runs(ours, tmp_path):
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    ours("test", REFUND, "-o", base)
    ours("test", REFUND, "-b", "strong_model", "-o", cand)
    return base, cand


def test_diff_page_flip_matrix_and_changed_cases(ours, tmp_path, two_runs):
    from decguard_pipeline.core.diff import load_and_diff
    from decguard_pipeline.core.diff.html import render_diff_html

    base, cand = two_runs
    html = tmp_path / "diff.html"
    plain = ours("diff", base, cand, "-c", REFUND, "-o", tmp_path / "a.json")
    ran = ours("diff", base, cand, "-c", REFUND, "-o", tmp_path / "b.json", "--html", html)
    assert (plain.exit_code, plain.stdout) == (ran.exit_code, ran.stdout) == (1, ran.stdout)
    doc = json.loads((tmp_path / "b.json").read_text())
    parts = PageParts(html.read_text())
    assert parts.attr("div", "data-verdict") == ["fail"]
    changes = parts.blocks()["table-changes"]
    counts = doc["counts"]
    assert changes["rows"]["id"] == [c["case_id"] for c in doc["changes"]]
    assert visible_rows(changes, "flips") == counts["answer_flips"] == 6
    assert visible_rows(changes, "newly wrong") == counts["newly_wrong"] == 5
    assert visible_rows(changes, "newly correct") == counts["newly_correct"]
    assert visible_rows(changes, "newly errored") == counts["newly_errored"]
    # the whole flip matrix (from the Diff) ...
    matrix = load_and_diff(base, cand, contract=REFUND).flip_matrix()
    text = parts.plain()
    assert matrix == [[5, 0, 0], [3, 0, 0], [3, 0, 0]]
    assert "baseline ↓ · candidate →" in text
    # ... and from the document alone: the flips, without the unchanged answers per label
    page = render_diff_html(doc)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page.split('id="flips"')[1].split("</table>")[0])
    assert cells == ["–", "0", "0", "3", "–", "0", "3", "0", "–"]
    assert "5 compared cases kept their answer" in page


# -- atomic write -------------------------------------------------------------------------

WRITER = """
import sys
from decguard_pipeline.core.html.page import write_html
path = sys.argv[1]
pages = ["A" * 40_000_000 + "</html>\\n", "B" * 40_000_000 + "</html>\\n"]
print("ready", flush=True)
i = 0
while True:
    write_html(path, pages[i % 2])
    i += 1
"""


@pytest.mark.slow
def test_a_killed_writer_never_leaves_a_partial_page(tmp_path):
    """kill -9 while 40 MB pages are written over each other: the page is always one whole
    version (or the first one not yet there), never a mix or a cut."""
    target = tmp_path / "page.html"
    rng = np.random.default_rng(3)
    for _ in range(8):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(target)],
                                 stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        time.sleep(float(rng.uniform(0.05, 0.6)))
        child.send_signal(signal.SIGKILL)
        child.wait()
        if target.exists():
            data = target.read_text()
            assert data in ("A" * 40_000_000 + "</html>\n", "B" * 40_000_000 + "</html>\n")
    # only hidden temporary files of killed writers may remain, never under the page's name
    assert all(p.name.startswith(".page.html.") for p in tmp_path.iterdir() if p != target)

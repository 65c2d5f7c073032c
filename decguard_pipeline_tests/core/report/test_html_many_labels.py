"""Pages of a decision with thousands of labels stay small: the confusion and flip matrices
and each case's probabilities show the labels that matter most and pool the others, with a
note; the counts shown are the report's own. Before, a page grew with labels squared (2,000
labels: 43 MB and 541 MB of memory; 10,000: killed at 1.8 GB)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

LABELS = [f"label-{i:04d}" for i in range(2500)]
TOP_LABELS = 20  # core.label_fold.TOP_LABELS (checked below)
CASES = 150
MAX_PAGE_BYTES = 400_000  # measured: 210 kB for the report page, 170 kB for the diff


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    from click.testing import CliRunner

    from decguard_pipeline.cli import cli

    folder = tmp_path_factory.mktemp("many")
    rng = random.Random(7)
    with (folder / "cases.jsonl").open("w") as out:
        for i in range(CASES):
            case = {"id": f"c{i}", "input": f"text {i}", "expected": rng.choice(LABELS[:40])}
            out.write(json.dumps(case) + "\n")
    contract = {
        "schema_version": "0.1",
        "decision": {"name": "many", "type": "choice", "options": LABELS},
        # no rules: each input gets its own hashed distribution over every label
        "backend": {"provider": "mock", "model": "hash-v1"},
        "backends": {"other": {"provider": "mock", "model": "hash-v2"}},
        "dataset": "cases.jsonl",
        "requirements": {"min_accuracy": 0.0},
    }
    (folder / "decguard.json").write_text(json.dumps(contract))

    def run(*args: object) -> None:
        ran = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
        assert ran.exit_code in (0, 1), ran.stderr

    run("test", folder / "decguard.json", "-o", folder / "a.json", "--html", folder / "a.html")
    run("test", folder / "decguard.json", "-b", "other", "-o", folder / "b.json")
    run("diff", folder / "a.json", folder / "b.json", "--html", folder / "d.html")
    return folder


def _section(page: str, anchor: str) -> str:
    start = page.index(f'id="{anchor}"')
    return page[start : page.index("</section>", start)]


def _matrix(section: str) -> list[list[str]]:
    """The cells of the heat table in ``section`` (header row first)."""
    table = section[section.rindex("<table") :]
    rows = re.findall(r"<tr.*?</tr>", table, re.S)
    return [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S) for row in rows]


def test_the_report_page_is_bounded_and_its_counts_are_the_reports(pages):
    page = (pages / "a.html").read_text()
    assert len(page.encode()) < MAX_PAGE_BYTES, len(page.encode())
    from decguard_pipeline.core import label_fold

    assert label_fold.TOP_LABELS == TOP_LABELS
    report = json.loads((pages / "a.json").read_text())
    results = [r for r in report["results"] if r["result"] is not None]
    others = len(LABELS) - TOP_LABELS
    labels = _section(page, "labels")
    assert f"the other {others:,} pooled" in labels
    matrix = _matrix(labels)
    assert len(matrix) == TOP_LABELS + 3  # header, the shown labels, the pooled one, totals
    assert all(len(row) == TOP_LABELS + 3 for row in matrix)  # name, labels, pooled, total
    shown = matrix[0][1 : TOP_LABELS + 1]
    assert matrix[0][TOP_LABELS + 1] == f"{others:,} other labels"
    # every shown cell is the report's count; the pooled row and column hold the rest
    full = np.zeros((len(LABELS), len(LABELS)), dtype=np.int64)
    index = {label: i for i, label in enumerate(LABELS)}
    for r in results:
        full[index[r["expected"]], index[r["result"]["selected"]]] += 1
    where = [index[name] for name in shown]
    for i, name in enumerate(shown):
        row = [int(v.replace(",", "")) for v in matrix[i + 1][1 : TOP_LABELS + 2]]
        assert row[:-1] == full[index[name], where].tolist(), name
        assert row[-1] == full[index[name]].sum() - full[index[name], where].sum()
    assert int(matrix[-1][-1].replace(",", "")) == len(results)
    # the labels shown are those with the most cases (expected or chosen)
    weight = full.sum(axis=0) + full.sum(axis=1)
    assert min(weight[where]) >= max(np.delete(weight, where))
    # each case's probabilities: the largest ones and the others' sum
    block = re.search(r'id="table-cases"[^>]*>(.*?)</script>', page, re.S)
    assert block is not None
    spec = json.loads(block.group(1))
    assert [d["kind"] for d in spec["details"] if d["key"] == "probs"] == ["topprobs"]
    first = spec["rows"]["probs"][0]
    assert len(first) == TOP_LABELS + 1 and first[-1][0] == -1
    case = report["results"][0]["result"]["probabilities"]
    top = sorted(case.items(), key=lambda item: (-item[1], index[item[0]]))[:TOP_LABELS]
    vocab = spec["labels"]  # the labels the rows name, not all 2,500
    assert spec["label_count"] == len(LABELS) and len(vocab) < len(LABELS)
    assert [vocab[i] for i, _ in first[:-1]] == [name for name, _ in top]
    expected = [vocab[i] for i in spec["rows"]["expected"]]
    assert expected == [r["expected"] for r in report["results"]]
    assert first[-1][1] == pytest.approx(sum(case.values()) - sum(p for _, p in top), abs=1e-3)


def test_the_diff_page_is_bounded(pages):
    page = (pages / "d.html").read_text()
    assert len(page.encode()) < MAX_PAGE_BYTES, len(page.encode())
    flips = _section(page, "flips")
    assert f"the other {len(LABELS) - TOP_LABELS:,} share the last ones" in flips
    matrix = _matrix(flips)
    assert len(matrix[0]) == TOP_LABELS + 3
    compared = json.loads((pages / "b.json").read_text())["metrics"]["counts"]["succeeded"]
    assert int(matrix[-1][-1].replace(",", "")) == compared


@pytest.mark.browser
@pytest.mark.slow
def test_the_page_shows_the_pooled_probabilities_in_a_browser(pages, chromium):
    report = json.loads((pages / "a.json").read_text())
    page, seen = chromium.open(pages / "a.html", ready="body[data-ready]")
    cases = page.locator('[data-table="table-cases"]')
    first = cases.locator("tbody tr.row").first
    assert report["results"][0]["expected"] in first.inner_text()
    first.click()
    lines = cases.locator("tr.detail .prob .prob-label").all_inner_texts()
    assert len(lines) == TOP_LABELS + 1
    assert lines[-1] == f"{len(LABELS) - TOP_LABELS:,} other labels"
    assert lines[0] == report["results"][0]["result"]["selected"]  # the largest first
    assert seen.problems() == []

"""Wall time of ``diff`` on two 100,000-case reports, ours beside decguard 0.1.1's, and of the
``pipeline.statistics`` extension (paired bootstrap with 2,000 resamples, McNemar, segments).

    python bench/diff_stats.py [--cases 100000] [--resamples 2000] [--repeat 3]

Both diffs run in this process on the same pair of report files (written once by our core),
each as its CLI would: load and verify both reports, compare, render the text and write the
JSON document. Best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np

LABELS = ("refund", "reject", "review")
CONTRACT = """\
schema_version: "0.1"
decision:
  name: bench
  type: choice
  options: [refund, reject, review]
backend:
  provider: mock
  default: {refund: 0.4, reject: 0.3, review: 0.3}
evaluation:
  confidence_threshold: 0.6
regression:
  max_answer_flip_rate: 0.1
  max_accuracy_drop: 0.01
  max_ece_increase: 0.02
  max_brier_increase: 0.02
  warnings:
    max_segment_accuracy_drop: 0.05
  segment_by: [locale]
"""
STATISTICS = """\
pipeline:
  statistics:
    gate_mode: significant
    bootstrap_resamples: {resamples}
"""


def timed(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def write_pair(tmp: Path, n: int) -> tuple[Path, Path, Path, Path]:
    from decguard_pipeline.core.contract import DecisionSpec, load_contract
    from decguard_pipeline.core.report.golden import build_report, dataset_info, result_records
    from decguard_pipeline.core.report.jsonio import write_document
    from decguard_pipeline.core.results import CaseResults

    plain = tmp / "plain.yaml"
    plain.write_text(CONTRACT, encoding="utf-8")
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, size=n)
    locales = ["en", "de", "fr", "es", "it"]
    metadata = [{"locale": locales[i % 5]} for i in range(n)]
    expected = [LABELS[t] if i % 10 else None for i, t in enumerate(truth)]
    n_labeled = sum(e is not None for e in expected)
    paths = []
    for name, skill, seed in (("base", 1.6, 1), ("cand", 1.5, 2)):
        r = np.random.default_rng(seed)
        logits = r.normal(size=(n, 3))
        logits[np.arange(n), truth] += skill
        probs = np.round(np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True), 6)
        errored = r.random(n) < 0.01
        selected = np.where(errored, -1, probs.argmax(axis=1))
        probs[errored] = np.nan
        results = CaseResults(
            spec=DecisionSpec("bench", "choice", LABELS),
            backend="default",
            provider="mock",
            case_ids=[f"case-{i}" for i in range(n)],
            inputs=[f"ticket text {i}" for i in range(n)],
            expected=expected,
            metadata=metadata,
            probs=probs,
            selected=selected,
            confidence=np.where(errored, np.nan, probs[np.arange(n), np.maximum(selected, 0)]),
            latency_ms=np.where(errored, np.nan, r.gamma(2.0, 20.0, size=n)),
            model=[f"m-{name}"] * n,
            model_version=[None] * n,
            result_metadata=[{} for _ in range(n)],
            error_kind=["timeout" if e else None for e in errored],
            error_message=["took too long" if e else None for e in errored],
        )
        report = build_report(
            load_contract(plain),
            dataset_info("cases.jsonl", "sha256:" + "0" * 64, n, n_labeled),
            {"name": "default", "provider": "mock", "model": f"m-{name}", "model_version": None,
             "details": {}},
            results,
        )  # fmt: skip
        path = tmp / f"{name}.json"
        write_document(path, report.document, stream_key="results", items=result_records(results))
        paths.append(path)
    return paths[0], paths[1], plain, tmp / "statistics.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-diff-"))
    try:
        run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, tmp: Path) -> None:
    base, cand, plain, with_stats = write_pair(tmp, args.cases)
    with_stats.write_text(CONTRACT + STATISTICS.format(resamples=args.resamples), encoding="utf-8")
    size = base.stat().st_size / 1e6
    print(f"{args.cases:,} matched cases, 3 labels; reports of {size:.0f} MB each")

    from decguard.regression.diff import load_and_diff as ref_diff
    from decguard.regression.diff import render_diff_text, write_diff

    from decguard_pipeline.core.contract import load_contract
    from decguard_pipeline.core.diff import (
        diff_reports,
        load_and_diff,
        render_diff,
        render_statistics,
    )
    from decguard_pipeline.core.diff.sidecar import diff_statistics
    from decguard_pipeline.core.diff.statistics import block_statistics, paired_columns
    from decguard_pipeline.core.report.jsonio import write_document
    from decguard_pipeline.core.report.verify import load_report

    def reference() -> None:
        result = ref_diff(base, cand, contract=plain)
        write_diff(result, tmp / "ref-diff.json")
        render_diff_text(result)

    def ours(contract: Path) -> Callable[[], None]:
        def run() -> None:
            result = load_and_diff(base, cand, contract=contract)
            write_document(tmp / "diff.json", result.document, what="diff")
            text = render_diff(result.document)
            if result.statistics is not None:
                write_document(tmp / "diff.pipeline.json", result.statistics)
                text += render_statistics(result.statistics)

        return run

    with redirect_stdout(io.StringIO()):
        t_ref = timed(reference, args.repeat)
        t_ours = timed(ours(plain), args.repeat)
        t_stats = timed(ours(with_stats), args.repeat)

    # the statistics alone, on already loaded reports: the paired bootstrap of all matched
    # cases, then everything (overall and the 5 locale segments, McNemar, gate modes)
    b, c = load_report(base), load_report(cand)
    diff = diff_reports(b, c, contract=load_contract(plain))
    settings = load_contract(with_stats).contract.pipeline.statistics
    doc = diff.document
    every_row = np.arange(len(diff.pairs.cand))
    exact = {"metrics": doc["metrics"], "shift": doc["shift"]}

    def overall_only() -> None:
        block_statistics(paired_columns(diff), every_row, diff, settings, 0, exact)

    def statistics_only() -> None:
        diff_statistics(
            diff, settings, metrics=doc["metrics"], shift=doc["shift"], segments=doc["segments"]
        )

    t_overall = timed(overall_only, args.repeat)
    t_all_stats = timed(statistics_only, args.repeat)

    rows = [
        ("diff: load+verify both, compare, text, JSON (-o)", t_ours, t_ref),
        (f"diff + pipeline.statistics ({args.resamples} resamples)", t_stats, t_ref),
        (f"paired bootstrap, {args.cases:,} pairs x {args.resamples}", t_overall, None),
        ("all statistics: overall + 5 segments, tests, gates", t_all_stats, None),
    ]
    print(f"\n{'step':<56} {'ours s':>8} {'decguard s':>11} {'ratio':>7}")
    for name, mine, theirs in rows:
        other = "-" if theirs is None else f"{theirs:.2f}"
        ratio = "" if theirs is None else f"{theirs / mine:.1f}x"
        print(f"{name:<56} {mine:>8.2f} {other:>11} {ratio:>7}")
    print(f"(load average {', '.join(f'{v:.1f}' for v in os.getloadavg())}; {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()

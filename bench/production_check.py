"""Benchmark of ``check`` (production records): decguard_pipeline against decguard==0.1.1.

Generates typed JSONL record sets (ids, timestamps, text inputs, three-label distributions,
outcomes on 70% of records, routing fields, latency, two metadata segments), then runs each
CLI as a child process and prints wall time and peak memory (the child's ru_maxrss):

  (a) ours on 10,000,000 records, ``check`` (text), and ``check -o report.json`` unless
      ``--skip-output``;
  (b) the reference on 100,000 records (it builds one pydantic object per record), and ours
      on the same file;
  (c) the per-record time ratio between (b)'s reference run and (a).

    .venv/bin/python bench/production_check.py                # everything (a few minutes)
    .venv/bin/python bench/production_check.py --records 2000000 --skip-output
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PY = sys.executable
OURS = [PY, "-m", "decguard_pipeline"]
REF = [PY, "-m", "decguard"]

CONTRACT = """\
schema_version: "0.1"
decision: {name: refund_request, type: choice, options: [refund, reject, review]}
backend: {provider: mock}
evaluation: {confidence_threshold: 0.8}
production:
  segments: [locale, channel]
  requirements: {min_accuracy: 0.3, max_ece: 0.5, max_fallback_rate: 0.6}
  warnings: {min_threshold_coverage: 0.2, max_abstention_rate: 0.3}
  segment_requirements: {min_accuracy: 0.2}
"""
INPUTS = [
    "The kettle arrived damaged.",
    "My parcel never arrived.",
    "I changed my mind.",
    "Can someone call me about my invoice?",
    "Used it for a week, want to return it.",
]
LOCALES = ['"en"', '"it"', '"de"', '"fr"']
CHANNELS = ['"web"', '"email"', '"phone"']
ACTIONS = ['"accept"', '"abstain"', '"fallback"', '"human_review"']
LABELS = ["refund", "reject", "review"]


def generate(path: Path, n: int, seed: int = 0) -> None:
    """``n`` valid records, written in chunks (about 330 bytes each)."""
    rng = np.random.default_rng(seed)
    chunk = 200_000
    with path.open("w") as out:
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            cents = rng.multinomial(100, [0.5, 0.3, 0.2], size=m)
            best = np.argmax(cents, axis=1)
            outcome = np.where(rng.random(m) < 0.8, best, rng.integers(0, 3, m))
            has_outcome = rng.random(m) < 0.7
            action = rng.integers(0, 4, m)
            latency = np.round(rng.gamma(2.0, 20.0, m), 1)
            minutes = rng.integers(0, 60 * 24 * 28, m)
            pick = rng.integers(0, 1 << 30, m)
            lines = []
            for i in range(m):
                c = cents[i]
                mins = int(minutes[i])
                stamp = f"2026-11-{1 + mins // 1440:02d}T{mins // 60 % 24:02d}:{mins % 60:02d}:00Z"
                p = pick[i]
                tail = f', "outcome": "{LABELS[outcome[i]]}"' if has_outcome[i] else ""
                lines.append(
                    f'{{"id": "r{start + i}", "timestamp": "{stamp}", '
                    f'"decision": "refund_request", "input": "{INPUTS[p % 5]}", '
                    f'"probabilities": {{"refund": {c[0] / 100}, "reject": {c[1] / 100}, '
                    f'"review": {c[2] / 100}}}, "selected": "{LABELS[best[i]]}", '
                    f'"model": "refund-model", "model_version": "v{1 + p % 2}", '
                    f'"action": {ACTIONS[action[i]]}, "latency_ms": {latency[i]}{tail}, '
                    f'"metadata": {{"locale": {LOCALES[p % 4]}, "channel": {CHANNELS[p % 3]}}}}}\n'
                )
            out.write("".join(lines))


def run(command: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB (of this child alone) and exit code."""
    script = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
        "wall = time.perf_counter() - t\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(wall, rss, rc)\n"
    )
    done = subprocess.run(
        [PY, "-c", script, *command], cwd=cwd, capture_output=True, text=True, check=True
    )
    wall, rss, rc = done.stdout.split()
    return float(wall), float(rss), int(rc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--ref-records", type=int, default=100_000)
    parser.add_argument("--skip-output", action="store_true", help="no check -o run")
    parser.add_argument("--keep", type=Path, help="directory to keep the generated files in")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-check-"))
    work.mkdir(parents=True, exist_ok=True)
    contract = work / "decguard.yaml"
    contract.write_text(CONTRACT)
    big, small = work / f"records-{args.records}.jsonl", work / f"records-{args.ref_records}.jsonl"
    for path, n in ((big, args.records), (small, args.ref_records)):
        if not path.exists():
            t = time.perf_counter()
            generate(path, n)
            size = path.stat().st_size / 1e6
            print(f"generated {n:,} records ({size:,.0f} MB) in {time.perf_counter() - t:.1f}s")

    print(f"\n(a) decguard_pipeline check, {args.records:,} records")
    wall, rss, rc = run([*OURS, "check", str(contract), "-d", str(big)], work)
    print(f"    check            {wall:7.1f}s   peak RSS {rss:7.0f} MB   exit {rc}")
    per_record_ours = wall / args.records
    if not args.skip_output:
        out = work / "report.json"
        wall_o, rss_o, rc = run([*OURS, "check", str(contract), "-d", str(big), "-o", str(out)],
                                work)  # fmt: skip
        size = out.stat().st_size / 1e6
        print(f"    check -o         {wall_o:7.1f}s   peak RSS {rss_o:7.0f} MB   exit {rc}"
              f"   ({size:,.0f} MB report)")  # fmt: skip
        out.unlink()

    print(f"\n(b) same command, {args.ref_records:,} records")
    wall_r, rss_r, rc_r = run([*REF, "check", str(contract), "-d", str(small)], work)
    print(f"    decguard 0.1.1   {wall_r:7.1f}s   peak RSS {rss_r:7.0f} MB   exit {rc_r}")
    wall_s, rss_s, rc_s = run([*OURS, "check", str(contract), "-d", str(small)], work)
    print(f"    decguard_pipeline{wall_s:7.1f}s   peak RSS {rss_s:7.0f} MB   exit {rc_s}")

    per_record_ref = wall_r / args.ref_records
    ratio = per_record_ref / per_record_ours
    print(
        f"\n(c) per record: reference {per_record_ref * 1e6:.1f} µs at {args.ref_records:,}, "
        f"ours {per_record_ours * 1e6:.2f} µs at {args.records:,} -> {ratio:.0f}x"
    )
    if args.keep is None:
        for path in work.iterdir():
            os.remove(path)
        work.rmdir()


if __name__ == "__main__":
    main()

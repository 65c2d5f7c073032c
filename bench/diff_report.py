"""The two commands CI runs on every pull request, decguard==0.1.1 beside decguard_pipeline:

  diff    ``diff base.json cand.json -c plain.yaml``: two reports of 100,000 cases each
          (diff_stats.py's pair: 3 labels, 1% errors, 5 locales), loaded, verified, compared;
  report  ``report all.json``: the refund contract's ``test --all`` report of 5,000 cases
          (55k property pairs, properties.py's cases), loaded, verified, printed.

Both CLIs run as child processes (bytecode cached, after a one-case warm-up of each) in
``--repeat`` interleaved rounds, the order turned each round (golden_run.rotated). Printed per
command: each tool's best wall and CPU time and peak memory, the ratio of the bests, each
round's ratio (median, worst, best), and whether our standard output is the reference's byte
for byte (the producer's name and version in the first line aside).

    .venv/bin/python bench/diff_report.py --repeat 5
    .venv/bin/python bench/diff_report.py --only report --report-cases 2000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import diff_stats
import golden_run
import properties
from golden_run import OURS, REF, rotated
from properties import CHILD_ENV, refund_workdir


@dataclass
class Ran:
    seconds: float
    cpu_seconds: float
    max_rss_mib: float
    exit_code: int
    stdout: bytes


def run_child(command: list[str], cwd: Path) -> Ran:
    out = cwd / ".stdout"
    with out.open("wb") as sink:
        start = time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, stdout=sink, stderr=subprocess.PIPE,
                                 env=CHILD_ENV)  # fmt: skip
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    child.returncode = code
    stderr = child.stderr.read().decode() if child.stderr else ""
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {code}:\n{stderr}")
    return Ran(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code,
               out.read_bytes())  # fmt: skip


def comparable(stdout: bytes) -> bytes:
    """The output without the producer's name and version (``DecGuard 0.1.1`` against
    ``DecGuard pipeline-0.1.0``), which is all that may differ."""
    first, _, rest = stdout.partition(b"\n")
    words = first.split(b" ")
    if len(words) > 1 and words[0] == b"DecGuard":
        words[1] = b"<version>"
    return b" ".join(words) + b"\n" + rest


def bench(name: str, work: Path, args: list[str], rounds: int) -> float:
    ours: list[Ran] = []
    refs: list[Ran] = []
    for number in range(rounds):
        for tool_name, tool in rotated([("ours", OURS), ("ref", REF)], number):
            ran = run_child([*tool, *args], work)
            (ours if tool_name == "ours" else refs).append(ran)
    best_ours = min(ours, key=lambda r: r.seconds)
    best_ref = min(refs, key=lambda r: r.seconds)
    same = all(comparable(o.stdout) == comparable(refs[0].stdout) for o in ours)
    codes = {r.exit_code for r in ours} | {r.exit_code for r in refs}
    paired = sorted(r.seconds / o.seconds for r, o in zip(refs, ours, strict=True))
    print(f"{name}: {' '.join(args)}")
    for label, ran in (("reference", best_ref), ("pipeline", best_ours)):
        print(f"    {label:<10} {ran.seconds:8.2f} s wall {ran.cpu_seconds:8.2f} s CPU   "
              f"peak {golden_run.fmt_mib(ran.max_rss_mib)}")  # fmt: skip
    print(f"    speed-up   {best_ref.seconds / best_ours.seconds:8.1f}x wall "
          f"{best_ref.cpu_seconds / best_ours.cpu_seconds:6.1f}x CPU   "
          "(best of each; target >= 10x)")  # fmt: skip
    print(f"    each round, reference / ours: median {statistics.median(paired):.1f}x, "
          f"worst {paired[0]:.1f}x, best {paired[-1]:.1f}x")  # fmt: skip
    print("    rounds (reference / ours, s): " + "  ".join(
        f"{r.seconds:.2f}/{o.seconds:.2f}" for r, o in zip(refs, ours, strict=True)))  # fmt: skip
    print(f"    standard output the reference's, byte for byte: {'yes' if same else 'NO'}; "
          f"exit codes {sorted(codes)}")  # fmt: skip
    print(f"    (load {os.getloadavg()[0]:.1f})")
    return statistics.median(paired)


def warm_up(work: Path, args: list[str]) -> None:
    for tool in (REF, OURS):
        run_child([*tool, *args], work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["diff", "report"], action="append")
    parser.add_argument("--diff-cases", type=int, default=100_000)
    parser.add_argument("--report-cases", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args()
    parts = args.only or ["diff", "report"]
    print(f"python {sys.version.split()[0]} · {os.cpu_count()} CPUs · "
          f"load {os.getloadavg()[0]:.1f} · {args.repeat} interleaved rounds · "
          f"{time.strftime('%F %T')}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="decguard-bench-ci-") as tmp:
        root = Path(tmp)
        if "diff" in parts:
            work = root / "diff"
            work.mkdir()
            diff_stats.write_pair(work, args.diff_cases)
            small = root / "diff-small"
            small.mkdir()
            diff_stats.write_pair(small, 10)
            warm_up(small, ["diff", "base.json", "cand.json", "-c", "plain.yaml"])
            size = (work / "base.json").stat().st_size / 1e6
            print(f"{args.diff_cases:,} cases in each report ({size:.0f} MB)")
            bench("diff", work, ["diff", "base.json", "cand.json", "-c", "plain.yaml"],
                  args.repeat)  # fmt: skip
        if "report" in parts:
            work = refund_workdir(root, args.report_cases)
            properties.warm_up(work)
            made = golden_run.run([*OURS, "test", "decguard.yaml", "--all", "-o", "all.json"],
                                  work, CHILD_ENV)  # fmt: skip
            size = (work / "all.json").stat().st_size / 1e6
            print(f"test --all report of {args.report_cases:,} cases ({size:.0f} MB, "
                  f"exit {made.exit_code})")  # fmt: skip
            bench("report", work, ["report", "all.json"], args.repeat)


if __name__ == "__main__":
    main()

"""Side-by-side benchmark of metamorphic properties: decguard==0.1.1 against decguard_pipeline.

Both CLIs run as child processes (``python -m decguard`` / ``python -m decguard_pipeline``,
the helpers of ``golden_run.py``) on the bundled refund contract (six properties, 11
transformed cases per case) with N generated cases (default 3,000 and 30,000):

  test  ``test decguard.yaml --all -o report.json``: golden gates, then every property
        against the default mock (no violation: nothing to minimise);
  fuzz  ``fuzz decguard.yaml -b order_sensitive -o report.json``: the mock that moves 10%
        of the mass to the option shown first, so option_order pairs fail and are minimised.

Printed per command: the best wall time, CPU time (user + system) and peak memory of each
tool and the ratios, then (with ``--repeat N``) each round's ratio: the rounds interleave
the two tools, alternating which goes first, so a drift of the machine's speed weighs on
both alike. Then whether the reference's ``report`` command accepts our report (same exit code
as our run) and whether both reports hold the same pairs. Both tools run with their bytecode
cached (as installed tools do; this environment sets PYTHONDONTWRITEBYTECODE, which would
make us compile our modules on every start), after a one-case warm-up run.

    .venv/bin/python bench/properties.py                        # 3,000 and 30,000 cases
    .venv/bin/python bench/properties.py --cases 3000 --repeat 3
    .venv/bin/python bench/properties.py --skip-ref-above 10000  # the reference: 3.7 GiB at 30k
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import golden_run
from golden_run import OURS, REF, ROOT, Run, fmt_mib, rotated, run, run_once, write_cases

COMMANDS = {
    "test": ["test", "decguard.yaml", "--all"],
    "fuzz": ["fuzz", "decguard.yaml", "-b", "order_sensitive"],
}
# children compile and cache their bytecode like an installed tool would
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def refund_workdir(root: Path, n: int) -> Path:
    """The bundled refund contract with ``n`` generated cases (golden_run's phrasings)."""
    work = root / f"refund-{n}"
    shutil.copytree(ROOT / "data" / "contracts" / "refund", work)
    write_cases(work / "cases.jsonl", n)
    write_cases(work / "one.jsonl", 1)
    return work


def warm_up(work: Path) -> None:
    """A one-case run of each tool, so both start from cached bytecode."""
    for tool in (REF, OURS):
        run([*tool, *COMMANDS["test"], "-d", "one.jsonl", "-o", "warm.json"], work, CHILD_ENV)


PAIRS = """
import json, sys
def pairs(path):
    section = json.load(open(path))["properties"]
    return [(p["id"], bool(p["violations"]), p["reduced"] is not None) for p in section["pairs"]]
ours = pairs(sys.argv[1])
print(len(ours), ours == pairs(sys.argv[2]) if len(sys.argv) > 2 else "-")
"""


def compare_pairs(work: Path, *reports: str) -> tuple[int, str]:
    """The number of pairs of the first report, and whether the second one holds the same
    pairs, violations and reductions. Read in a child process: a child's peak memory counts
    its parent's at the fork, so this process must stay small."""
    done = subprocess.run(
        [sys.executable, "-c", PAIRS, *reports], cwd=work, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    count, same = done.stdout.split()
    return int(count), same


def line(name: str, figures: Run) -> str:
    return (
        f"    {name:<10} {figures.seconds:8.2f} s wall {figures.cpu_seconds:8.2f} s CPU"
        f"   peak {fmt_mib(figures.max_rss_mib)}"
    )


def interleaved(
    work: Path, args: list[str], rounds: int, with_ref: bool
) -> tuple[list[Run], list[Run]]:
    """``rounds`` rounds of our run and the reference's, side by side, the order turned each
    round (``golden_run.rotated``). Returns each tool's runs, round by round."""
    ours: list[Run] = []
    refs: list[Run] = []
    pair = [("ours", OURS), ("ref", REF)] if with_ref else [("ours", OURS)]
    for number in range(rounds):
        for name, tool in rotated(pair, number):
            # each run writes a new report, as in CI: replacing the previous run's 58 MB
            # file would add the file system's freeing of it (20-40 ms here) to the run
            (work / f"{name}.json").unlink(missing_ok=True)
            figures = run_once([*tool, *args, "-o", f"{name}.json"], work, CHILD_ENV)
            (ours if name == "ours" else refs).append(figures)
    return ours, refs


def bench(work: Path, n: int, command: str, with_ref: bool) -> None:
    args = COMMANDS[command]
    rounds, refs = interleaved(work, args, golden_run.REPEAT, with_ref)
    ours = min(rounds, key=lambda r: r.seconds)
    ref = min(refs, key=lambda r: r.seconds) if refs else None
    n_pairs, same = compare_pairs(work, "ours.json", *(["ref.json"] if ref else []))
    print(f"{command} on {n:,} cases ({n_pairs:,} pairs): {' '.join(args)} -o report.json")
    if ref is not None:
        print(line("reference", ref))
    print(line("pipeline", ours))
    if ref is not None:
        print(
            f"    speed-up   {ref.seconds / ours.seconds:8.1f}x wall "
            f"{ref.cpu_seconds / ours.cpu_seconds:6.1f}x CPU   (target >= 10x; best of each)"
        )
        if len(rounds) > 1:
            paired = sorted(r.seconds / o.seconds for r, o in zip(refs, rounds, strict=True))
            print(f"    each round, reference / ours: median {statistics.median(paired):.1f}x, "
                  f"worst {paired[0]:.1f}x, best {paired[-1]:.1f}x")  # fmt: skip
            print("    rounds (reference / ours, s): " + "  ".join(
                f"{r.seconds:.2f}/{o.seconds:.2f}" for r, o in zip(refs, rounds, strict=True)
            ))  # fmt: skip
        print(f"    same pairs, violations and reductions as the reference: {same}")
    verified = run([*REF, "report", "ours.json"], work, CHILD_ENV)
    accepted = "accepted" if verified.exit_code == ours.exit_code else "NOT accepted"
    print(f"    our report {accepted} by the reference's report command "
          f"(exit {verified.exit_code}, ours {ours.exit_code})")  # fmt: skip
    for name in ("ours.json", "ref.json"):
        (work / name).unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[3000, 30000])
    parser.add_argument("--only", choices=sorted(COMMANDS), action="append")
    parser.add_argument("--repeat", type=int, default=1,
                        help="N interleaved rounds of each command (best of N, and each "
                             "round's ratio)")  # fmt: skip
    parser.add_argument("--skip-ref-above", type=int, default=None, metavar="N",
                        help="no reference run for more than N cases")  # fmt: skip
    args = parser.parse_args()
    golden_run.REPEAT = max(1, args.repeat)
    print(
        f"python {sys.version.split()[0]} · {os.cpu_count()} CPUs · "
        f"load {os.getloadavg()[0]:.1f} · {golden_run.REPEAT} interleaved rounds · "
        f"{time.strftime('%F %T')}"
    )
    with tempfile.TemporaryDirectory(prefix="decguard-bench-props-") as tmp:
        for n in args.cases:
            work = refund_workdir(Path(tmp), n)
            warm_up(work)
            with_ref = args.skip_ref_above is None or n <= args.skip_ref_above
            for command in args.only or list(COMMANDS):
                bench(work, n, command, with_ref)
            print(f"    (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()

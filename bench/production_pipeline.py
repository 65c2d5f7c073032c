"""A production day through the pipeline, side by side with ``check`` on the same records.

What is compared: one day of production records (``production_check.generate``: typed JSONL
records with ids, timestamps, text inputs, three-label distributions, outcomes on 70%,
routing fields, latency, two metadata segments) taken

  check        by ``decguard-pipeline check CONTRACT -d DAY`` (text) and by ``check ... -o
               REPORT`` (the same report file the pipeline writes), each a whole process;
  steps        by the pipeline's steps without Dagster, as the day's multi-asset calls them:
               ``ingest_day`` (check the records, store them in ``production_records``) then
               ``check_day`` on the columns just ingested (against the baseline, the report
               file and its sidecar, metrics, drift, segments and checks stored);
  dagster      by the contract's ``production_<contract>`` job as ``evaluate`` runs it
               (``execute_in_process`` on a persistent SQLite instance opened and tuned by
               ``open_instance``; one step: both assets and the gate checks).

For the pipeline two figures are printed. The **day** is its marginal cost: what a running
pipeline (``evaluate``, the daily schedule) pays for one more day once its code is imported
and its warehouse and instance exist; the child first runs a tiny warm-up day (a later day:
the measured day's baseline stays "none", as for ``check``) and then times the day alone. The
**process** is the whole child (interpreter, imports, a fresh warehouse, the warm-up day and
the day), comparable with ``check`` as a process. Peak RSS is the child's ``ru_maxrss``.

    .venv/bin/python bench/production_pipeline.py --repeat 3       # 100,000 records
    .venv/bin/python bench/production_pipeline.py --big            # and 10,000,000
    .venv/bin/python bench/production_pipeline.py --records 1000000 --keep /tmp/days

Each command runs ``--repeat`` times, in rounds that run every command once (best kept, and
with several rounds the median of each round's day over that round's ``check``); the first
line gives the load average (and the last line the load at the end), since figures are only
comparable on an idle machine.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_run import rotated
from production_check import CONTRACT, generate

PY = sys.executable
OURS = [PY, "-m", "decguard_pipeline"]
DAY = "2026-11-02"
WARM_UP = "2026-11-03"  # later than DAY: DAY's baseline ("previous") stays none
KEY = "shop"


def _child_steps(work: Path) -> None:
    """The pipeline's steps for the day, as the day's multi-asset calls them (no Dagster),
    after a warm-up day."""
    from decguard_pipeline.defs.huge_pages import no_huge_pages
    from decguard_pipeline.steps.base import Step
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.steps.production.check import check_day
    from decguard_pipeline.steps.production.ingest import ingest_day
    from decguard_pipeline.warehouse import Warehouse

    no_huge_pages()  # as the pipeline's processes run (the CLI and the code location do)
    entry = discover_contracts(str(work / "contracts"))[0]
    warehouse = Warehouse(work / "warehouse")
    warehouse.query("SELECT 1")  # the catalog made once per warehouse, not per day
    warm = Step(warehouse, "warm-up")
    check_day(entry, WARM_UP, warm, ingest_day(entry, WARM_UP, warm))
    step = Step(warehouse, "bench")
    start, cpu = time.perf_counter(), time.process_time()
    ingested = ingest_day(entry, DAY, step)
    middle, cpu_middle = time.perf_counter(), time.process_time()
    n = ingested.n
    checked = check_day(entry, DAY, step, ingested)
    end, cpu_end = time.perf_counter(), time.process_time()
    print(
        f"day {end - start:.3f} (ingest {middle - start:.2f}s, check {end - middle:.2f}s; "
        f"CPU {cpu_middle - cpu:.2f}s + {cpu_end - cpu_middle:.2f}s; {n} records, "
        f"{checked.status})",
        file=sys.stderr,
    )


def _child_dagster(work: Path) -> None:
    """The day's production job through Dagster as ``evaluate`` runs it (a persistent SQLite
    instance opened by ``open_instance``, its commits as cheap as evaluate's), after a
    warm-up day."""
    import warnings

    os.environ["DAGSTER_HOME"] = str(work / "dagster_home")
    shutil.rmtree(work / "dagster_home", ignore_errors=True)
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.assets.production import job_name
    from decguard_pipeline.defs.instance import open_instance
    from decguard_pipeline.defs.job_runs import run_job
    from decguard_pipeline.defs.sqlite_commits import cheaper_commits
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.warehouse import Warehouse

    warnings.filterwarnings("ignore")
    cheaper_commits()
    with open_instance() as instance:
        entry = discover_contracts(str(work / "contracts"))[0]
        Warehouse(work / "warehouse").query("SELECT 1")
        defs = build_definitions([entry], warehouse_root=str(work / "warehouse"))
        job = defs.resolve_job_def(job_name(entry))
        for day in (WARM_UP, DAY):
            start = time.perf_counter()
            outcome = run_job(job, instance, entry.key, day, {})
            wall = time.perf_counter() - start
            if not outcome.success:
                raise SystemExit(f"the production job failed for {day}: {outcome.errors}")
    print(f"day {wall:.3f} (the job, as evaluate runs it)", file=sys.stderr)


def _fresh(work: Path) -> None:
    shutil.rmtree(work / "warehouse", ignore_errors=True)


_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "wall = time.perf_counter() - t\n"
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "sys.stderr.buffer.write(done.stderr)\n"
    "print(wall, usage.ru_maxrss / 1024, done.returncode, usage.ru_utime + usage.ru_stime)\n"
)


class _Runs:
    """One command's runs: the best wall time (with that run's peak RSS, CPU and last stderr
    line), the best time the child reported for the day (``day <seconds>`` on its last
    stderr line) and every run's figure, in round order."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.wall = self.rss = self.cpu = float("inf")
        self.said = ""
        self.day: float | None = None
        self.day_said = ""
        self.rounds: list[float] = []  # the day when the child reports one, else the wall

    def run(self, cwd: Path, env: dict[str, str]) -> None:
        _fresh(cwd)
        done = subprocess.run(
            [PY, "-c", _MEASURE, *self.command], cwd=cwd, capture_output=True, text=True,
            env={**os.environ, **env},
        )  # fmt: skip
        wall, rss, rc, cpu = done.stdout.split()
        if int(rc) not in (0, 1):
            raise SystemExit(f"{' '.join(self.command)} exited {rc}:\n{done.stderr}")
        said = (done.stderr.strip().splitlines() or [""])[-1]
        day = float(said.split()[1]) if said.startswith("day ") else None
        if day is not None and (self.day is None or day < self.day):
            self.day, self.day_said = day, said
        if float(wall) < self.wall:
            self.wall, self.rss, self.cpu, self.said = float(wall), float(rss), float(cpu), said
        self.rounds.append(day if day is not None else float(wall))


def _interleaved(runs: list[_Runs], cwd: Path, repeat: int, env: dict[str, str]) -> None:
    """``repeat`` rounds, each running every command once (``golden_run.rotated``)."""
    for r in range(repeat):
        for command in rotated(runs, r):
            command.run(cwd, env)


def _row(
    name: str, wall: float, rss: float | None, check: float, check_o: float, cpu: float | None
) -> str:
    memory = f"{rss:8,.0f} MiB" if rss is not None else " " * 12
    used = f"{cpu:9.1f}s" if cpu is not None else ""
    return f"  {name:<34}{wall:8.2f}s{memory}{wall / check:8.2f}x{wall / check_o:11.2f}x{used}"


def bench(work: Path, n: int, repeat: int, dagster: bool) -> None:
    contract = work / "contracts" / KEY / "decguard.yaml"
    contract.parent.mkdir(parents=True, exist_ok=True)
    contract.write_text(CONTRACT)
    day = work / "production" / KEY / f"{DAY}.jsonl"
    if not day.exists():
        day.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        generate(day, n)
        print(f"generated {n:,} records ({day.stat().st_size / 1e6:,.0f} MB) "
              f"in {time.perf_counter() - start:.1f}s")  # fmt: skip
    warm = day.with_name(f"{WARM_UP}.jsonl")
    if not warm.exists():
        generate(warm, 100, seed=1)
    env = {"DECGUARD_PRODUCTION": str(work / "production"), "DECGUARD_PRODUCTION_START": DAY}
    me = [PY, str(Path(__file__).resolve())]
    report = work / "report.json"
    print(f"\n{n:,} records ({day.stat().st_size / 1e6:,.0f} MB), best of {repeat} "
          f"interleaved rounds, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    check = _Runs([*OURS, "check", str(contract), "-d", str(day)])
    check_o = _Runs([*OURS, "check", str(contract), "-d", str(day), "-o", str(report)])
    children = [("steps", "pipeline steps")] + (
        [("dagster", "pipeline in Dagster")] if dagster else []
    )
    kids = [_Runs([*me, "--child", child, "--work", str(work)]) for child, _ in children]
    _interleaved([check, check_o, *kids], work, repeat, env)
    size = report.stat().st_size / 1e6
    report.unlink(missing_ok=True)
    c, o = check.wall, check_o.wall
    print(f"  {'':34}{'wall':>9}{'peak RSS':>12}{'/ check':>9}{'/ check -o':>11}{'CPU':>10}")
    print(_row("check (a process)", c, check.rss, c, o, check.cpu))
    print(_row(f"check -o (a process, {size:,.0f} MB report)", o, check_o.rss, c, o,
               check_o.cpu))  # fmt: skip
    for (_, name), kid in zip(children, kids, strict=True):
        if kid.day is not None:
            print(
                _row(f"{name}: the day", kid.day, None, c, o, None)
                + f"   {kid.day_said.split(' ', 2)[2]}"
            )
        print(_row(f"{name}: whole process", kid.wall, kid.rss, c, o, kid.cpu))
    if repeat > 1:  # each round's day over that round's check: the drift cancels out
        for (_, name), kid in zip(children, kids, strict=True):
            paired = sorted(d / w for d, w in zip(kid.rounds, check.rounds, strict=True))
            print(f"  {name}, the day / check of the same round: median "
                  f"{statistics.median(paired):.2f}x, best {paired[0]:.2f}x, worst "
                  f"{paired[-1]:.2f}x")  # fmt: skip
    _fresh(work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--big", action="store_true", help="also 10,000,000 records")
    parser.add_argument("--big-records", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-dagster", action="store_true", help="skip the Dagster job")
    parser.add_argument("--keep", type=Path, help="directory to keep the generated days in")
    parser.add_argument("--child", choices=("steps", "dagster"), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        (_child_steps if args.child == "steps" else _child_dagster)(args.work)
        return
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-production-"))
    sizes = [args.records] + ([args.big_records] if args.big else [])
    try:
        for n in sizes:
            bench(root / f"day-{n}", n, args.repeat, not args.no_dagster)
        print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

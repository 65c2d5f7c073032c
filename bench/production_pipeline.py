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

Each command runs ``--repeat`` times (best kept); the first line gives the load average (and
the last line the load at the end), since figures are only comparable on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from production_check import CONTRACT, generate

PY = sys.executable
OURS = [PY, "-m", "decguard_pipeline"]
DAY = "2026-11-02"
WARM_UP = "2026-11-03"  # later than DAY: DAY's baseline ("previous") stays none
KEY = "shop"


def _child_steps(work: Path) -> None:
    """The pipeline's steps for the day, as the day's multi-asset calls them (no Dagster),
    after a warm-up day."""
    from decguard_pipeline.steps.base import Step
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.steps.production.check import check_day
    from decguard_pipeline.steps.production.ingest import ingest_day
    from decguard_pipeline.warehouse import Warehouse

    entry = discover_contracts(str(work / "contracts"))[0]
    warehouse = Warehouse(work / "warehouse")
    warehouse.ensure_catalog()  # made once per warehouse, not per day
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
    instance opened by ``open_instance``, the collector held), after a warm-up day."""
    import warnings

    os.environ["DAGSTER_HOME"] = str(work / "dagster_home")
    shutil.rmtree(work / "dagster_home", ignore_errors=True)
    from decguard_pipeline.core.collector import held
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.assets.production import job_name
    from decguard_pipeline.defs.instance import open_instance
    from decguard_pipeline.defs.job_runs import run_job
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.warehouse import Warehouse

    warnings.filterwarnings("ignore")
    with held() as settle, open_instance() as instance:
        entry = discover_contracts(str(work / "contracts"))[0]
        Warehouse(work / "warehouse").ensure_catalog()
        defs = build_definitions([entry], warehouse_root=str(work / "warehouse"))
        job = defs.resolve_job_def(job_name(entry))
        settle()
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


def _timed(
    command: list[str], cwd: Path, repeat: int, env: dict[str, str]
) -> tuple[float, float, float | None, str]:
    """Over ``repeat`` runs of a child process: the best wall time, the peak RSS (MiB, of
    that child alone) of that run, the best time the child reported for the day
    (``day <seconds>`` on its last stderr line) and that run's line."""
    best: tuple[float, float, str, float] = (float("inf"), 0.0, "", 0.0)
    day: float | None = None
    day_said = ""
    for _ in range(repeat):
        _fresh(cwd)
        done = subprocess.run(
            [PY, "-c", _MEASURE, *command], cwd=cwd, capture_output=True, text=True,
            env={**os.environ, **env},
        )  # fmt: skip
        wall, rss, rc, cpu = done.stdout.split()
        if int(rc) not in (0, 1):
            raise SystemExit(f"{' '.join(command)} exited {rc}:\n{done.stderr}")
        said = (done.stderr.strip().splitlines() or [""])[-1]
        if said.startswith("day ") and (day is None or float(said.split()[1]) < day):
            day, day_said = float(said.split()[1]), said
        best = min(best, (float(wall), float(rss), said, float(cpu)))
    return best[0], best[1], day, day_said or best[2], best[3]


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
    print(f"\n{n:,} records ({day.stat().st_size / 1e6:,.0f} MB), best of {repeat}, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    check, rss, _, _, cpu = _timed(
        [*OURS, "check", str(contract), "-d", str(day)], work, repeat, env
    )
    check_o, rss_o, _, _, cpu_o = _timed(
        [*OURS, "check", str(contract), "-d", str(day), "-o", str(report)], work, repeat, env
    )
    size = report.stat().st_size / 1e6
    report.unlink(missing_ok=True)
    print(f"  {'':34}{'wall':>9}{'peak RSS':>12}{'/ check':>9}{'/ check -o':>11}{'CPU':>10}")
    print(_row("check (a process)", check, rss, check, check_o, cpu))
    print(_row(f"check -o (a process, {size:,.0f} MB report)", check_o, rss_o, check, check_o,
               cpu_o))  # fmt: skip
    children = [("steps", "pipeline steps")] + (
        [("dagster", "pipeline in Dagster")] if dagster else []
    )
    for child, name in children:
        wall, rss, day_s, said, cpu = _timed([*me, "--child", child, "--work", str(work)], work,
                                        repeat, env)  # fmt: skip
        if day_s is not None:
            print(
                _row(f"{name}: the day", day_s, None, check, check_o, None)
                + f"   {said.split(' ', 2)[2]}"
            )
        print(_row(f"{name}: whole process", wall, rss, check, check_o, cpu))
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

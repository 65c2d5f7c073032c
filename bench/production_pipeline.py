"""A production day through the pipeline, side by side with ``check`` on the same records.

Generates a day of typed JSONL records (``production_check.generate``: ids, timestamps, text
inputs, three-label distributions, outcomes on 70%, routing fields, latency, two metadata
segments), then runs each as a child process and prints wall time, peak memory (the child's
``ru_maxrss``) and the ratios:

  check      ``decguard-pipeline check CONTRACT -d DAY`` (text) and ``check ... -o REPORT``
             (the same report file the pipeline writes);
  steps      the pipeline's steps without Dagster: ``ingest_day`` (check the records, store
             them in ``production_records``) then ``check_day`` (read them back, check
             against the baseline, write the report, verify it block by block, store the
             metrics, drift, segments and checks), on a fresh warehouse;
  dagster    the contract's ``production_<contract>`` job for the day through
             ``execute_in_process`` (both assets and the gate checks).

    .venv/bin/python bench/production_pipeline.py                  # 100,000 records
    .venv/bin/python bench/production_pipeline.py --big            # and 10,000,000
    .venv/bin/python bench/production_pipeline.py --records 1000000 --keep /tmp/days

Each command runs ``--repeat`` times (best kept); the first line gives the load average, since
figures are only comparable on an otherwise idle machine.
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
KEY = "shop"


def _child_steps(work: Path) -> None:
    """The pipeline's two steps for the day, as the assets call them (no Dagster)."""
    from decguard_pipeline.steps.base import Step
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.steps.production.check import check_day
    from decguard_pipeline.steps.production.ingest import ingest_day
    from decguard_pipeline.warehouse import Warehouse

    entry = discover_contracts(str(work / "contracts"))[0]
    warehouse = Warehouse(work / "warehouse")
    warehouse.ensure_catalog()  # made once per warehouse, not per day
    step = Step(warehouse, "bench")
    start = time.perf_counter()
    ingested = ingest_day(entry, DAY, step)
    middle = time.perf_counter()
    checked = check_day(entry, DAY, step)
    end = time.perf_counter()
    print(
        f"ingest {middle - start:.2f}s, check {end - middle:.2f}s ({ingested.n} records, "
        f"{ingested.data.columnar} columnar, {checked.status})",
        file=sys.stderr,
    )


def _child_dagster(work: Path) -> None:
    """The day's production job through Dagster (an ephemeral instance)."""
    import warnings

    import dagster as dg

    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.assets.production import job_name
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.warehouse import Warehouse

    warnings.filterwarnings("ignore")
    entry = discover_contracts(str(work / "contracts"))[0]
    Warehouse(work / "warehouse").ensure_catalog()
    defs = build_definitions([entry], warehouse_root=str(work / "warehouse"))
    job = defs.resolve_job_def(job_name(entry))
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    with dg.DagsterInstance.ephemeral() as instance:
        start = time.perf_counter()
        result = job.execute_in_process(
            instance=instance, partition_key=DAY, raise_on_error=False, run_config=quiet
        )
    print(f"job {time.perf_counter() - start:.2f} success {result.success}", file=sys.stderr)


def _fresh(work: Path) -> None:
    shutil.rmtree(work / "warehouse", ignore_errors=True)


_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "wall = time.perf_counter() - t\n"
    "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
    "sys.stderr.buffer.write(done.stderr)\n"
    "print(wall, rss, done.returncode)\n"
)


def _timed(
    command: list[str], cwd: Path, repeat: int, env: dict[str, str]
) -> tuple[float, float, str]:
    """Best wall time, its peak RSS (MB, of that child alone) and what it said on stderr,
    over ``repeat`` runs of a child process."""
    best = (float("inf"), 0.0, "")
    for _ in range(repeat):
        _fresh(cwd)
        done = subprocess.run(
            [PY, "-c", _MEASURE, *command], cwd=cwd, capture_output=True, text=True,
            env={**os.environ, **env},
        )  # fmt: skip
        wall, rss, rc = done.stdout.split()
        if int(rc) not in (0, 1):
            raise SystemExit(f"{' '.join(command)} exited {rc}:\n{done.stderr}")
        best = min(best, (float(wall), float(rss), done.stderr.strip().splitlines()[-1:]))
    wall, rss, said = best
    return wall, rss, said[0] if said else ""


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
    env = {"DECGUARD_PRODUCTION": str(work / "production"), "DECGUARD_PRODUCTION_START": DAY}
    me = [PY, str(Path(__file__).resolve())]
    report = work / "report.json"
    rows = []
    check = _timed([*OURS, "check", str(contract), "-d", str(day)], work, repeat, env)
    rows.append(("check (text)", *check))
    check_o = _timed([*OURS, "check", str(contract), "-d", str(day), "-o", str(report)], work,
                     repeat, env)  # fmt: skip
    report.unlink(missing_ok=True)
    rows.append(("check -o report", *check_o))
    steps = _timed([*me, "--child", "steps", "--work", str(work)], work, repeat, env)
    rows.append(("pipeline steps", *steps))
    if dagster:
        rows.append(("pipeline in Dagster", *_timed(
            [*me, "--child", "dagster", "--work", str(work)], work, repeat, env
        )))  # fmt: skip
    print(f"\n{n:,} records ({day.stat().st_size / 1e6:,.0f} MB)")
    print(f"  {'':22}{'wall':>8}{'peak RSS':>11}{'/ check':>9}{'/ check -o':>12}")
    for name, wall, rss, said in rows:
        print(f"  {name:<22}{wall:7.2f}s{rss:8.0f} MB{wall / check[0]:8.2f}x"
              f"{wall / check_o[0]:11.2f}x   {said if 'check' not in name else ''}")  # fmt: skip
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
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

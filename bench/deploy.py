"""What the team deployment costs and buys (docs/deploy.md): PostgreSQL against SQLite for the
Dagster instance, and `evaluate --workers 2` against one process.

    python bench/deploy.py [--repeat 3] [--runs 8] [--skip-evaluate]

1. per run: one target's job (spam, default@spam-mock-v1) through `execute_in_process`,
   `--runs` times, on the instance `evaluate` generates (SQLite in its folder) and on a
   PostgreSQL instance; beside it the same work without Dagster (the steps the assets call),
   so dagster - steps is Dagster's own cost per run. The server is Debian's PostgreSQL on
   loopback with its default durability (fsync, synchronous commit), started here as in the
   tests, or the one $DAGSTER_PG_URL names (its database must be empty);
2. end to end: `decguard-pipeline evaluate` on the bundled examples as a fresh process with a
   fresh instance and warehouse, SQLite and PostgreSQL, `--workers 1` and `--workers 2`, best
   of `--repeat`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "default@spam-mock-v1"


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def per_run(home: Path, env: dict[str, str], runs: int, wh_root: Path) -> dict[str, float]:
    """Seconds per run of the spam target's job, and of the same steps without Dagster."""
    os.environ.update(env)
    os.environ["DAGSTER_HOME"] = str(home)
    import dagster as dg
    from pipeline import run_steps  # bench/pipeline.py: the same steps, the same order

    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.instance import ensure_dagster_home, storage_kind
    from decguard_pipeline.defs.job_runs import QUIET
    from decguard_pipeline.defs.jobs import job_name
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.warehouse import Warehouse

    ensure_dagster_home()
    entries = [e for e in discover_contracts(str(ROOT / "data" / "contracts")) if e.key == "spam"]
    (entry,) = entries
    wh = Warehouse(wh_root)
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    job = defs.resolve_job_def(job_name(entry))
    with dg.DagsterInstance.get() as instance:
        kind = storage_kind(instance)
        instance.add_dynamic_partitions("spam_targets", [TARGET])

        def by_dagster() -> None:
            result = job.execute_in_process(instance=instance, partition_key=TARGET,
                                            run_config=QUIET, raise_on_error=False)  # fmt: skip
            assert result.success

        def by_steps() -> None:
            run_steps(wh, entry, TARGET)

        by_dagster()  # first run: table creation, caches
        dagster = [timed(by_dagster) for _ in range(runs)]
        plain = [timed(by_steps) for _ in range(runs)]
        events = len(instance.all_logs(instance.get_runs(limit=1)[0].run_id))
    for name in ("DAGSTER_PG_URL", "DAGSTER_HOME"):
        os.environ.pop(name, None)
    return {"kind": kind, "dagster": statistics.median(dagster), "dagster_min": min(dagster),
            "steps": statistics.median(plain), "events": events}  # fmt: skip


def connection_ms(url: str, n: int = 50) -> float:
    import psycopg2

    start = time.perf_counter()
    for _ in range(n):
        connection = psycopg2.connect(url)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        connection.close()
    return (time.perf_counter() - start) / n * 1000


def evaluate(fresh: Callable[[], dict[str, str]], workers: int, repeat: int) -> float:
    """Best wall time of `evaluate`; ``fresh()``: the environment of a fresh instance."""
    best = float("inf")
    for _ in range(repeat):
        tmp = Path(tempfile.mkdtemp(prefix="bench-deploy-"))
        run_env = {**os.environ, **fresh(), "DAGSTER_HOME": str(tmp / "home"),
                   "DECGUARD_WAREHOUSE": str(tmp / "wh")}  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "decguard_pipeline", "evaluate", "--workers", str(workers)],
            cwd=ROOT, env=run_env, capture_output=True, text=True,
        )  # fmt: skip
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"evaluate failed:\n{done.stdout}\n{done.stderr}")
        best = min(best, wall)
    return best


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from decguard_pipeline_tests.support import postgres

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--skip-evaluate", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")

    server = None
    url = os.environ.pop("DAGSTER_PG_URL", "")
    if not url:
        server = postgres.start(durable=True)
    try:
        tmp = Path(tempfile.mkdtemp(prefix="bench-deploy-"))
        sqlite = per_run(tmp / "sqlite", {}, args.runs, tmp / "wh-sqlite")
        pg = per_run(tmp / "pg", {"DAGSTER_PG_URL": url or server.create_database("perrun")},
                     args.runs, tmp / "wh-pg")  # fmt: skip
        trust = postgres.start(durable=True, auth="trust") if server is not None else None
        if trust is not None:
            try:
                pg_trust = per_run(tmp / "pg-trust", {"DAGSTER_PG_URL": trust.create_database()},
                                   args.runs, tmp / "wh-pg-trust")  # fmt: skip
                pg_trust["kind"] = "postgres, no password check"
                trust_connect = connection_ms(trust.url())
            finally:
                trust.stop()
        print(f"\n1. one target's run (spam {TARGET}), median of {args.runs}, seconds")
        print(f"  {'instance':<28} {'dagster':>8} {'(min)':>7} {'steps':>7} {'dagster-steps':>14} "
              f"{'events/run':>11}")  # fmt: skip
        for row in (sqlite, pg, *([pg_trust] if trust is not None else [])):
            print(f"  {row['kind']:<28} {row['dagster']:>8.3f} {row['dagster_min']:>7.3f} "
                  f"{row['steps']:>7.3f} {row['dagster'] - row['steps']:>14.3f} "
                  f"{row['events']:>11}")  # fmt: skip
        extra = pg["dagster"] - sqlite["dagster"]
        print(f"  PostgreSQL - SQLite: {extra:+.3f} s per run "
              f"({pg['dagster'] / sqlite['dagster']:.2f}x)")  # fmt: skip
        connect = connection_ms(url or server.url())
        print(f"  one PostgreSQL connection (connect, authenticate, SELECT 1, close): "
              f"{connect:.1f} ms; dagster-postgres opens one per storage call")  # fmt: skip
        if trust is not None:
            print(f"  the same without a password check (trust): {trust_connect:.1f} ms")
        if args.skip_evaluate:
            return
        print(f"\n2. `evaluate` on the bundled examples, fresh process, best of {args.repeat}, s")
        print(f"  {'instance':<12} {'--workers 1':>12} {'--workers 2':>12} {'speed-up':>9}")
        instances: dict[str, Callable[[], dict[str, str]]] = {"sqlite": dict}
        if server is not None:  # a fresh database for every evaluation
            instances["postgres"] = lambda: {"DAGSTER_PG_URL": server.create_database()}
        else:
            print("  (postgres: $DAGSTER_PG_URL's database, not fresh between evaluations)")
            instances["postgres"] = lambda: {"DAGSTER_PG_URL": url}
        for kind, fresh in instances.items():
            walls = [evaluate(fresh, workers, args.repeat) for workers in (1, 2)]
            print(f"  {kind:<12} {walls[0]:>12.2f} {walls[1]:>12.2f} "
                  f"{walls[0] / walls[1]:>8.2f}x")  # fmt: skip
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()

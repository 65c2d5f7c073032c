"""Benchmark of the warehouse on object storage against the same work on a local folder.

Starts moto's S3 server on loopback (the test extra), then for both warehouses: ``evaluate``
of one small contract (mock backend, a fresh Dagster home each time: first run on an empty
warehouse, then a second run), and ``sql`` on ``latest_metrics`` from a new process (what an
analyst pays per query), best of ``--repeat``. Prints seconds and the S3/local ratio; the first
line gives the load average, since figures are only comparable on an otherwise idle machine.
moto answers from memory on the same machine: a real bucket adds its network round trips (one
per listed folder and per file read), so read these as the floor.

    .venv/bin/python bench/object_store.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from decguard_pipeline_tests.support.evaluate_places import MOCK, write_contract  # noqa: E402
from decguard_pipeline_tests.support.object_store import start  # noqa: E402

QUERY = "SELECT contract, target, metric, value FROM latest_metrics ORDER BY ALL"


def timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    begin = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "decguard_pipeline", *args],
        env=env, cwd=cwd, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{args[0]} failed: {done.stdout}{done.stderr}")
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    server = start()
    try:
        bucket = server.create_bucket()
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            write_contract(work / "contracts" / "tiny", MOCK)
            rows: dict[str, dict[str, float]] = {}
            for name, root in (("local", str(work / "wh")), ("s3", f"s3://{bucket}/wh")):
                env = {**os.environ, **server.env(), "DECGUARD_WAREHOUSE": root}
                env["DECGUARD_CONTRACTS"] = str(work / "contracts")
                figures = {}
                for run in ("first", "second"):
                    env["DAGSTER_HOME"] = str(work / f"home-{name}-{run}")
                    figures[f"evaluate ({run} run)"] = timed(["evaluate"], env, work)
                figures["sql latest_metrics"] = min(
                    timed(["sql", QUERY], env, work) for _ in range(options.repeat)
                )
                rows[name] = figures
            print(f"{'':28} {'local s':>8} {'s3 s':>8} {'s3/local':>9}")
            for key in rows["local"]:
                local, remote = rows["local"][key], rows["s3"][key]
                print(f"{key:28} {local:8.2f} {remote:8.2f} {remote / local:9.2f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""Wall time of the main job on the bundled examples, and the ratio of pipeline time to the
core's time for the same work.

    python bench/pipeline.py [--repeat 3]

* end to end: `decguard-pipeline evaluate` as a fresh process (fresh instance and warehouse);
* in process, per target: the core alone (run the dataset through the backend, compute
  metrics and gates, write and verify the report) against the same target through Dagster
  (`execute_in_process` on a persistent instance, warehouse writes included).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    env = {**os.environ, "DAGSTER_HOME": str(tmp / "home"),
           "DECGUARD_WAREHOUSE": str(tmp / "wh-cli")}  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "decguard_pipeline", "evaluate"], cwd=ROOT, env=env,
        capture_output=True, text=True,
    )  # fmt: skip
    end_to_end = time.perf_counter() - start
    print(done.stdout)
    print(f"main job, end to end (fresh process, instance and warehouse): {end_to_end:.2f} s")

    warnings.filterwarnings("ignore")
    os.environ["DAGSTER_HOME"] = str(tmp / "home")
    import dagster as dg

    from decguard_pipeline.core.report.golden import result_records
    from decguard_pipeline.core.report.jsonio import write_document
    from decguard_pipeline.core.report.verify import load_report
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.jobs import job_name
    from decguard_pipeline.defs.main_job import QUIET
    from decguard_pipeline.evaluation import run_test
    from decguard_pipeline.pipeline.contracts import discover_contracts
    from decguard_pipeline.pipeline.targets import backend_of
    from decguard_pipeline.warehouse import Warehouse

    entries = discover_contracts(str(ROOT / "data" / "contracts"))
    wh = Warehouse(tmp / "wh")
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    instance = dg.DagsterInstance.get()
    jobs = [
        (e, key)
        for e in entries
        for key in instance.get_dynamic_partitions(f"{e.key}_targets")
    ]
    core_total = pipeline_total = 0.0
    print(f"\n{'target':<42} {'core s':>8} {'pipeline s':>11} {'ratio':>7}")
    for entry, key in jobs:

        def core(entry=entry, key=key) -> None:
            report = run_test(entry.require(), backend=backend_of(key))
            path = tmp / "core" / f"{entry.key}-{key}.json"
            write_document(path, report.document, stream_key="results",
                           items=result_records(report.results))  # fmt: skip
            load_report(path)

        def pipeline(entry=entry, key=key) -> None:
            defs.resolve_job_def(job_name(entry)).execute_in_process(
                instance=instance, partition_key=key, raise_on_error=False, run_config=QUIET
            )

        c, p = timed(core, args.repeat), timed(pipeline, args.repeat)
        core_total += c
        pipeline_total += p
        print(f"{entry.key + '/' + key:<42} {c:>8.3f} {p:>11.3f} {p / c:>7.1f}")
    print(f"{'total':<42} {core_total:>8.3f} {pipeline_total:>11.3f} "
          f"{pipeline_total / core_total:>7.1f}")  # fmt: skip
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

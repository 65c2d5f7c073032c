"""The main job's wall time on the bundled examples, and where the pipeline's time goes.

    python bench/pipeline.py [--repeat 2] [--cases 20000]

1. end to end: `decguard-pipeline evaluate` as a fresh process (fresh instance and warehouse);
2. per target of the examples, three ways of doing the same evaluation:
   * core: `run_test` (golden, plus properties when the contract has them) — no warehouse;
   * steps: the functions the assets call (steps/golden.py and the feature steps) in job order,
     without Dagster — core plus the warehouse's Parquet writes and reads;
   * dagster: the target's job through `execute_in_process` on a persistent instance;
   the difference dagster - steps is Dagster's own bookkeeping (run and event storage, step
   orchestration, check evaluations);
3. the same three on the refund contract with `--cases` generated cases, where the fixed cost
   is small against the work.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def scaled_refund(directory: Path, n: int) -> Path:
    """The refund contract with n generated cases (four phrasings, three labels)."""
    shutil.copytree(ROOT / "data" / "contracts" / "refund", directory / "refund")
    phrasings = [
        ("The blender arrived damaged #{}", "refund"),
        ("My parcel never arrived, order {}", "refund"),
        ("I changed my mind about item {}", "reject"),
        ("Please call me about invoice {}", "review"),
    ]
    with open(directory / "refund" / "cases.jsonl", "w") as out:
        for i in range(n):
            text, label = phrasings[i % 4]
            case = {"id": f"c{i}", "input": text.format(i), "expected": label,
                    "metadata": {"locale": "en"}}  # fmt: skip
            out.write(json.dumps(case) + "\n")
    return directory


def run_steps(wh, entry, key: str) -> None:
    """One target's evaluation through the steps the assets call, in asset order, without
    Dagster (what a run costs beyond its steps is Dagster's own)."""
    from decguard_pipeline.steps import golden, guard
    from decguard_pipeline.steps.base import Step
    from decguard_pipeline.steps.diff import diff_target
    from decguard_pipeline.steps.properties import has_properties, run_target

    loaded = entry.require()
    step = Step(wh, f"steps-{time.perf_counter_ns()}")
    golden.record_contract(entry, step)
    golden.record_dataset(entry, step)
    golden.evaluate_target(entry, key, step)
    golden.score_target(entry, key, step)
    if has_properties(loaded):
        run_target(entry, key, step)
    diff_target(entry, key, step)
    if loaded.contract.pipeline is not None and loaded.contract.pipeline.guard:
        guard.measure_target(entry, key, step)
    golden.write_report(entry, key, step)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cases", type=int, default=20000)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    env = {**os.environ, "DAGSTER_HOME": str(tmp / "home"),
           "DECGUARD_WAREHOUSE": str(tmp / "wh-cli")}  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "decguard_pipeline", "evaluate"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    end_to_end = time.perf_counter() - start
    print(done.stdout)
    print(f"1. main job end to end (fresh process, instance and warehouse): {end_to_end:.2f} s\n")

    warnings.filterwarnings("ignore")
    os.environ["DAGSTER_HOME"] = str(tmp / "home")
    import dagster as dg

    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.job_runs import QUIET
    from decguard_pipeline.defs.jobs import job_name
    from decguard_pipeline.runs.golden import run_test
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.steps.properties import has_properties
    from decguard_pipeline.steps.targets import backend_of
    from decguard_pipeline.warehouse import Warehouse

    instance = dg.DagsterInstance.get()

    def measure(contracts_dir: Path, title: str, only: str | None = None) -> None:
        entries = discover_contracts(str(contracts_dir))
        wh = Warehouse(tmp / f"wh-{title}")
        defs = build_definitions(entries, warehouse_root=str(wh.root))
        print(title)
        print(f"  {'target':<44} {'core s':>8} {'steps s':>8} {'dagster s':>10} {'overhead':>9}")
        totals = [0.0, 0.0, 0.0]
        for entry in entries:
            keys = instance.get_dynamic_partitions(f"{entry.key}_targets")
            if only is not None:
                keys = [k for k in keys if k == only] or ([only] if entry.key == "refund" else [])
                instance.add_dynamic_partitions(f"{entry.key}_targets", keys)
            loaded = entry.require()
            for key in keys:
                mode = "all" if has_properties(loaded) else "test"

                def core(key=key, loaded=loaded, mode=mode) -> None:
                    run_test(loaded, backend=backend_of(key), mode=mode)

                def by_steps(entry=entry, key=key) -> None:
                    run_steps(wh, entry, key)

                def by_dagster(entry=entry, key=key) -> None:
                    defs.resolve_job_def(job_name(entry)).execute_in_process(
                        instance=instance, partition_key=key, raise_on_error=False,
                        run_config=QUIET,
                    )  # fmt: skip

                row = [best(core, args.repeat), best(by_steps, args.repeat),
                       best(by_dagster, args.repeat)]  # fmt: skip
                totals = [t + r for t, r in zip(totals, row, strict=True)]
                print(f"  {entry.key + '/' + key:<44} {row[0]:>8.3f} {row[1]:>8.3f} "
                      f"{row[2]:>10.3f} {row[2] - row[1]:>9.3f}")  # fmt: skip
        ratio = totals[2] / totals[0]
        print(f"  {'total':<44} {totals[0]:>8.3f} {totals[1]:>8.3f} {totals[2]:>10.3f} "
              f"{totals[2] - totals[1]:>9.3f}   dagster/core {ratio:.1f}x\n")  # fmt: skip

    measure(ROOT / "data" / "contracts", "2. the examples, per target")
    scaled = scaled_refund(tmp / "scaled", args.cases)
    measure(scaled, f"3. refund with {args.cases} cases", only="default@refund-mock-v1")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

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

Part 1 runs side by side, alternating, ``--repeat`` times: the main job on a fresh instance and
warehouse (what ``make run`` does after install), the main job again on that instance (a
second ``make run``), and the same evaluations through the CLI: one ``decguard-pipeline test``
process per target (``--all`` when the contract has properties), one after the other. It
prints the best of each, the ratios main job / CLI (issue 15: at most 1.5x) and Dagster's
cost per run, (main job - CLI) / runs. ``--workers N`` passes ``evaluate --workers N`` and
runs N CLI processes at a time. ``--before DIR`` also times ``evaluate`` from another checkout
(``git archive main | tar -x -C DIR``) in the same rounds. ``--only-end-to-end`` skips parts 2
and 3.
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

from timing import best  # bench/ is on sys.path: the scripts run as files

ROOT = Path(__file__).resolve().parents[1]


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


def cli_commands(contracts_dir: Path, reports: Path | None = None) -> list[list[str]]:
    """One ``test`` command per target ``evaluate`` would run (the backends it can reach);
    with ``reports``, each writes its report there (``-o``: the JSON, and for a guard
    contract its pictures and sidecar, as the pipeline writes them)."""
    from decguard_pipeline.demo.autostart import demo_server_for
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.steps.golden import load_golden
    from decguard_pipeline.steps.properties import has_properties
    from decguard_pipeline.steps.targets import discover_targets

    commands = []
    for entry in discover_contracts(str(contracts_dir)):
        loaded = entry.require()
        data = load_golden(entry)
        # a contract on the bundled demo LLM server (tickets) is discovered with it running,
        # as `evaluate` discovers it (each `test` process starts its own, as `evaluate` does)
        with demo_server_for([loaded.contract]):
            canary = data.inputs[0] if len(data) else None
            targets, _ = discover_targets(loaded, canary_input=canary)
        every = ["--all"] if has_properties(loaded) else []
        for target in targets:
            out = (
                []
                if reports is None
                else ["-o", str(reports / f"{entry.key}.{target.backend}.json")]
            )
            commands.append([sys.executable, "-m", "decguard_pipeline", "test", *every,
                             str(entry.path), "-b", target.backend, *out])  # fmt: skip
    return commands


def production_days(contracts_dir: Path) -> int:
    """How many production-day runs ``evaluate`` adds to the targets' runs."""
    from decguard_pipeline.defs.assets.production import production_days as days_of
    from decguard_pipeline.steps.contracts import discover_contracts

    return sum(len(days_of(entry)) for entry in discover_contracts(str(contracts_dir)))


def run_cli(commands: list[list[str]], workers: int) -> float:
    """Wall time of the commands, ``workers`` at a time; exit 0 or 1 (a gate failed)."""
    start = time.perf_counter()
    pending, running = list(commands), []
    while pending or running:
        while pending and len(running) < workers:
            running.append(subprocess.Popen(pending.pop(0), cwd=ROOT, stdout=subprocess.DEVNULL))
        running[0].wait()
        if running[0].returncode not in (0, 1):
            raise SystemExit(f"{running[0].args} exited {running[0].returncode}")
        running.pop(0)
    return time.perf_counter() - start


def run_evaluate(home: Path, warehouse: Path, workers: int, tree: Path = ROOT) -> tuple[float, str]:
    """Wall time and summary of ``evaluate`` run from ``tree`` (a checkout of this project:
    another commit's code, with its bundled examples)."""
    env = {**os.environ, "DAGSTER_HOME": str(home), "DECGUARD_WAREHOUSE": str(warehouse),
           "PYTHONPATH": str(tree)}  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "decguard_pipeline", "evaluate", "--workers", str(workers)],
        cwd=tree, env=env, capture_output=True, text=True,
    )  # fmt: skip
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"evaluate exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return took, done.stdout


def end_to_end(tmp: Path, repeat: int, workers: int, before: Path | None) -> None:
    commands = cli_commands(ROOT / "data" / "contracts")
    (tmp / "reports").mkdir()
    with_reports = cli_commands(ROOT / "data" / "contracts", tmp / "reports")
    trees = {"": ROOT, **({"before: ": before} if before is not None else {})}
    times: dict[str, list[float]] = {}
    summary = ""
    for i in range(repeat):
        row = {}
        for label, tree in trees.items():
            home, wh = tmp / f"home-{label}{i}", tmp / f"wh-{label}{i}"
            took, out = run_evaluate(home, wh, workers, tree)
            summary = summary or out
            row[f"{label}evaluate, fresh instance and warehouse"] = took
            row[f"{label}evaluate again on that instance"] = run_evaluate(home, wh, workers, tree)[
                0
            ]
        row["CLI, one `test` process per target"] = run_cli(commands, workers)
        row["CLI, the same writing its report (-o)"] = run_cli(with_reports, workers)
        for name, took in row.items():
            times.setdefault(name, []).append(took)
        print(f"  round {i + 1} (load {os.getloadavg()[0]:.2f}): "
              + ", ".join(f"{name} {took:.2f} s" for name, took in row.items()))  # fmt: skip
    runs = len(commands) + production_days(ROOT / "data" / "contracts")
    print(summary)
    best = {name: min(took) for name, took in times.items()}
    cli = best["CLI, one `test` process per target"]
    cli_o = best["CLI, the same writing its report (-o)"]
    print(f"1. main job vs CLI on the examples ({len(commands)} targets, {runs} Dagster runs, "
          f"workers {workers}), best of {repeat}:")  # fmt: skip
    for name, took in best.items():
        ratio = "" if name.startswith("CLI") else (
            f"   {took / cli:.2f}x the CLI, {took / cli_o:.2f}x with -o")  # fmt: skip
        print(f"  {name:<51} {took:7.2f} s{ratio}")
    for label in trees:
        warm = best[f"{label}evaluate again on that instance"]
        print(f"  {label}Dagster's cost per run (evaluate again - CLI -o) / runs: "
              f"{(warm - cli_o) / runs * 1000:.0f} ms")  # fmt: skip
    print()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cases", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--only-end-to-end", action="store_true")
    parser.add_argument("--skip-end-to-end", action="store_true")
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout (git archive REV | tar -x)")  # fmt: skip
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    if not args.skip_end_to_end:
        end_to_end(tmp, args.repeat, args.workers, args.before)
    if args.only_end_to_end:
        shutil.rmtree(tmp, ignore_errors=True)
        return

    warnings.filterwarnings("ignore")
    os.environ["DAGSTER_HOME"] = str(tmp / "home")
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.instance import open_instance
    from decguard_pipeline.defs.job_runs import QUIET
    from decguard_pipeline.defs.jobs import job_name
    from decguard_pipeline.defs.main_job import MainJobResult, register_targets
    from decguard_pipeline.defs.sqlite_commits import cheaper_commits
    from decguard_pipeline.runs.golden import run_test
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.steps.properties import has_properties
    from decguard_pipeline.steps.targets import backend_of
    from decguard_pipeline.warehouse import Warehouse

    def measure(contracts_dir: Path, title: str, only: str | None = None) -> None:
        entries = discover_contracts(str(contracts_dir))
        wh = Warehouse(tmp / f"wh-{title}")
        defs = build_definitions(entries, warehouse_root=str(wh.root))
        print(title)
        print(f"  {'target':<44} {'core s':>8} {'steps s':>8} {'dagster s':>10} {'overhead':>9}")
        totals = [0.0, 0.0, 0.0]
        for entry in entries:
            keys = register_targets(entry, instance, wh, MainJobResult())
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

    cheaper_commits()  # as evaluate commits (defs/sqlite_commits.py)
    with open_instance() as instance:  # as evaluate opens it
        measure(ROOT / "data" / "contracts", "2. the examples, per target")
        if args.cases:  # --cases 0 skips part 3
            scaled = scaled_refund(tmp / "scaled", args.cases)
            measure(scaled, f"3. refund with {args.cases} cases", only="default@refund-mock-v1")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""What ``make run`` pays around its runs, piece by piece (issue 15, item 1): a new warehouse's
first catalog, a new Dagster instance's opening, and ``evaluate``'s start-up (imports and the
definitions). Each is timed in a fresh process; ``--before DIR`` times another checkout
(``git archive REV | tar -x -C DIR``) in the same rounds, so both see the same load. Prints
the best and the median of ``--repeat`` rounds and the load average of each round.

    .venv/bin/python bench/fresh_start.py --repeat 5 --before /tmp/main
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Each prints the seconds its part took, measured inside the process (imports it needs first).
PARTS = {
    "first catalog of a new warehouse": """
        import sys, time
        import duckdb, pandas  # imported by then in `evaluate` (not this part's cost)
        from decguard_pipeline.warehouse import Warehouse
        wh = Warehouse(sys.argv[1] + "/wh")
        start = time.perf_counter()
        wh.query("SELECT 1")
        print(time.perf_counter() - start)
    """,
    "opening a new instance": """
        import os, sys, time
        os.environ["DAGSTER_HOME"] = sys.argv[1] + "/home"
        from decguard_pipeline.defs.instance import open_instance
        start = time.perf_counter()
        with open_instance():
            pass
        print(time.perf_counter() - start)
    """,
    "opening it again (new process)": """
        import os, sys, time
        os.environ["DAGSTER_HOME"] = sys.argv[1] + "/home"
        from decguard_pipeline.defs.instance import open_instance
        with open_instance():
            pass
        start = time.perf_counter()
        with open_instance():
            pass
        print(time.perf_counter() - start)
    """,
    "evaluate's imports and definitions": """
        import sys, time
        start = time.perf_counter()
        import decguard_pipeline.cli.project_cmd
        from decguard_pipeline.steps.contracts import discover_contracts
        from decguard_pipeline.defs.instance import open_instance
        from decguard_pipeline.defs.main_job import evaluate_all
        from decguard_pipeline.definitions import build_definitions
        build_definitions(discover_contracts())
        print(time.perf_counter() - start)
    """,
}


def timed(script: str, tree: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-fresh-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        env.pop("DAGSTER_HOME", None)
        env.pop("DECGUARD_WAREHOUSE", None)
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script), tmp],
            cwd=tree, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout (git archive REV | tar -x)")  # fmt: skip
    args = parser.parse_args()
    trees = {"after": ROOT, **({"before": args.before} if args.before is not None else {})}
    times: dict[tuple[str, str], list[float]] = {}
    for i in range(args.repeat):
        cells = []
        for part, script in PARTS.items():
            for label, tree in trees.items():
                took = timed(script, tree)
                times.setdefault((part, label), []).append(took)
                cells.append(f"{part} ({label}) {took:.3f}")
        print(f"round {i + 1} (load {os.getloadavg()[0]:.2f}): " + ", ".join(cells))
    print(f"\nbest / median of {args.repeat} (seconds):")
    for part in PARTS:
        row = []
        for label in trees:
            took = times[(part, label)]
            row.append(f"{label} {min(took):.3f} / {statistics.median(took):.3f}")
        print(f"  {part:<38} " + "   ".join(row))


if __name__ == "__main__":
    main()

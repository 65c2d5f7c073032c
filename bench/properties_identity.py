"""Before/after byte comparison of property runs: the code of a git revision against the
working tree, on generated contracts and the scaled examples.

Every generated contract (``decguard_pipeline_tests/support/property_contracts.py``, one per seed)
and the refund/severity/spam examples with ``--cases`` generated cases run through ``fuzz``
and ``test --all`` (other backends, seeds, selections, ``--no-minimize``) in both code trees,
each in its own child process; the reports (``-o``), sidecars, ``-f json`` output, terminal
text, stderr and exit codes must be the same bytes once latencies and timestamps are
neutralised (``normalised_text``).

    .venv/bin/python bench/properties_identity.py --base main --seeds 300
    .venv/bin/python bench/properties_identity.py --base HEAD~3 --seeds 50 --cases 3000
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # after PYTHONPATH: the worker imports the tree it is given

from decguard_pipeline_tests.support.property_contracts import (  # noqa: E402
    commands,
    normalised_text,
    write,
)

EXAMPLE_RUNS = {
    "refund": [
        ["test", "decguard.yaml", "--all"],
        ["fuzz", "decguard.yaml", "-b", "order_sensitive"],
        ["fuzz", "decguard.yaml", "-b", "order_sensitive", "--seed", "7", "-p", "whitespace"],
    ],
    "severity": [["test", "decguard.yaml", "--all"], ["fuzz", "decguard.yaml", "-b", "candidate"]],
    "spam": [["test", "decguard.yaml", "--all"], ["fuzz", "decguard.yaml", "-b", "candidate"]],
}


def scaled_example(root: Path, name: str, n: int) -> Path:
    """An example contract whose dataset is its own cases repeated to ``n`` (new ids)."""
    folder = root / f"{name}-{n}"
    shutil.copytree(ROOT / "data" / "contracts" / name, folder)
    path = folder / "cases.jsonl"
    if path.exists():
        cases = [json.loads(line) for line in path.read_text().splitlines()]
    else:
        path = folder / "cases.json"
        cases = json.loads(path.read_text())
    scaled = [{**cases[i % len(cases)], "id": f"c{i}"} for i in range(n)]
    if path.suffix == ".json":
        path.write_text(json.dumps(scaled))
    else:
        path.write_text("".join(json.dumps(case) + "\n" for case in scaled))
    return folder


def run_jobs(jobs_file: Path) -> None:
    """Child: run each job in-process (``decguard-pipeline ARGS`` in its directory), writing
    stdout, stderr and the exit code next to the job's outputs."""
    from click.testing import CliRunner

    import decguard_pipeline
    from decguard_pipeline.cli import cli

    print(f"worker: {Path(decguard_pipeline.__file__).parent}", file=sys.stderr)
    for job in json.loads(jobs_file.read_text()):
        os.chdir(job["cwd"])
        for variant, extra in (("o", ["-o", f"{job['tag']}.json"]), ("json", ["-f", "json"]),
                               ("text", [])):  # fmt: skip
            ran = CliRunner().invoke(cli, [*job["args"], *extra], catch_exceptions=True)
            stem = f"{job['cwd']}/{job['tag']}-{variant}"
            Path(f"{stem}.stdout").write_text(ran.stdout)
            Path(f"{stem}.stderr").write_text(ran.stderr)
            Path(f"{stem}.code").write_text(str(ran.exit_code))


def _tree(rev: str, into: Path) -> Path:
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", rev, "decguard_pipeline"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="git revision to compare against")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=300, help="cases of the scaled examples")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_jobs(args.worker)
        return
    tmp = Path(tempfile.mkdtemp(prefix="props-identity-"))
    base_code = _tree(args.base, tmp / "base-code")
    started = time.perf_counter()
    jobs: dict[str, list[dict[str, object]]] = {"base": [], "new": []}
    for side in jobs:
        runs = tmp / side
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            folder = write(runs, seed).parent
            for i, cmd in enumerate(commands(seed)):
                jobs[side].append({"cwd": str(folder), "args": cmd, "tag": f"run{i}"})
        for name, cmds in EXAMPLE_RUNS.items():
            folder = scaled_example(runs, name, args.cases)
            for i, cmd in enumerate(cmds):
                jobs[side].append({"cwd": str(folder), "args": cmd, "tag": f"run{i}"})
    children = []
    for side, path in (("base", base_code), ("new", ROOT)):
        jobs_file = tmp / f"{side}-jobs.json"
        jobs_file.write_text(json.dumps(jobs[side]))
        env = {**os.environ, "PYTHONPATH": str(path)}
        children.append(
            subprocess.Popen([sys.executable, __file__, "--worker", str(jobs_file)], env=env)
        )
    if any(child.wait() for child in children):
        raise SystemExit("a worker failed")
    compared = differing = 0
    for file in sorted((tmp / "base").rglob("*")):
        if not file.is_file() or file.suffix in (".yaml", ".jsonl"):
            continue
        other = tmp / "new" / file.relative_to(tmp / "base")
        compared += 1
        a = normalised_text(file.read_text())
        b = normalised_text(other.read_text()) if other.exists() else None
        if a != b:
            differing += 1
            if differing <= 10:
                print(f"DIFFERENT: {file.relative_to(tmp / 'base')}")
    n_jobs = len(jobs["base"])
    print(
        f"{args.seeds} generated contracts + {len(EXAMPLE_RUNS)} scaled examples, {n_jobs} runs "
        f"x 3 outputs: {compared} files compared, {differing} different "
        f"({time.perf_counter() - started:.0f} s; base {args.base})"
    )
    if args.keep or differing:
        print(f"kept in {tmp}")
    else:
        shutil.rmtree(tmp)
    if differing:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

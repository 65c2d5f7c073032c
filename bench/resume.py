"""What the response cache costs and saves (issue 13), as child processes of our CLI:

(a) 100,000 mock cases, ``test -o report.json``: without the cache, with a cold cache (a new
    directory: every answer recorded) and with a warm one (every answer replayed). Prints
    the requests asked, the wall time of each and the cold cache's overhead as a share of
    the uncached run (target < 20%); the warm run must beat asking the mock. Then the same
    three in-process, timing only the decisions (the cache's own cost, without start-up,
    dataset loading and report writing).
(b) 10,000 cases against the loopback HTTP model answering in 20 ms at 64 in flight: the
    cold cache journals every answer as it arrives; its throughput next to the uncached
    run's, and the warm run, which asks nothing.

  .venv/bin/python bench/resume.py                # both parts
  .venv/bin/python bench/resume.py --only a --repeat 3
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import golden_run as g

OURS = g.OURS


def best(command: list[str], cwd: Path, repeat: int, before=None) -> g.Run:  # type: ignore[no-untyped-def]
    """Best of ``repeat`` runs; ``before()`` runs ahead of each (a fresh cache directory)."""
    runs = []
    for _ in range(repeat):
        if before is not None:
            before()
        runs.append(g.run_once(command, cwd, {**os.environ, "DECGUARD_CACHE": ""}))
    return min(runs, key=lambda r: r.seconds)


def cache_section(report: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(report.with_name(report.stem + ".pipeline.json").read_text())["cache"]


def same_results(a: Path, b: Path) -> bool:
    """The two reports' results, latencies aside."""
    one, two = json.loads(a.read_text()), json.loads(b.read_text())
    for doc in (one, two):
        for record in doc["results"]:
            if record["result"] is not None:
                record["result"].pop("latency_ms")
    return one["results"] == two["results"] and one["metrics"]["counts"] == two["metrics"]["counts"]


def part_a(root: Path, n: int, repeat: int) -> None:
    work = g.mock_workdir(root, n)
    cache = work / "cache"

    def fresh() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    test = [*OURS, "test", "decguard.yaml"]
    base = best([*test, "-o", "base.json"], work, repeat)
    cold = best([*test, "--cache", "cache", "-o", "cold.json"], work, repeat, fresh)
    warm = best([*test, "--cache", "cache", "-o", "warm.json"], work, repeat)
    cold_stats, warm_stats = cache_section(work / "cold.json"), cache_section(work / "warm.json")
    overhead = (cold.seconds - base.seconds) / base.seconds
    cpu_overhead = (cold.cpu_seconds - base.cpu_seconds) / base.cpu_seconds
    print(f"(a) {n:,} mock cases, test -o report.json, best of {repeat} (wall; CPU of the child)")
    print(f"    no cache     {base.seconds:6.2f} s  cpu {base.cpu_seconds:5.2f} s   asked {n:,}")
    print(
        f"    cold cache   {cold.seconds:6.2f} s  cpu {cold.cpu_seconds:5.2f} s   "
        f"asked {cold_stats['asked']:,}, stored {cold_stats['stored']:,}"
    )
    print(f"                 overhead {overhead:+.1%} wall, {cpu_overhead:+.1%} CPU (target < 20%)")
    print(
        f"    warm cache   {warm.seconds:6.2f} s  cpu {warm.cpu_seconds:5.2f} s   "
        f"asked {warm_stats['asked']:,}, from cache {warm_stats['answers_from_cache']:,}"
    )
    print(
        f"                 {base.seconds / warm.seconds:.2f}x wall, "
        f"{base.cpu_seconds / warm.cpu_seconds:.2f}x CPU the uncached run (target > 1)"
    )
    print(f"    warm report = uncached report (latencies aside): "
          f"{same_results(work / 'base.json', work / 'warm.json')}")  # fmt: skip
    size = sum(p.stat().st_size for p in (cache / "responses").rglob("*.parquet"))
    print(f"    cache size   {size / 1e6:.1f} MB for {n:,} answers")
    in_process(work, repeat)


def in_process(work: Path, repeat: int) -> None:
    """Only the decisions: the cache's own work (keys, lookup, recording, publishing)."""
    from decguard_pipeline.core.contract import load_contract
    from decguard_pipeline.runs.cache import CacheOptions
    from decguard_pipeline.runs.golden import decide_dataset, make_backend, resolve_dataset

    loaded = load_contract(work / "decguard.yaml")
    data = resolve_dataset(loaded, None)
    directory = work / "cache-in-process"

    def decide(options: CacheOptions | None) -> float:
        backend = make_backend(loaded, None, cache=options)
        start = time.process_time()  # one thread: CPU time, steadier than wall on a busy box
        decide_dataset(loaded, data, backend)
        return time.process_time() - start

    figures: dict[str, list[float]] = {"none": [], "cold": [], "warm": []}
    for _ in range(repeat):
        shutil.rmtree(directory, ignore_errors=True)
        figures["none"].append(decide(None))
        figures["cold"].append(decide(CacheOptions(directory, "bench")))
        figures["warm"].append(decide(CacheOptions(directory, "bench")))
    none, cold, warm = (min(figures[k]) for k in ("none", "cold", "warm"))
    print("    decisions only (in-process, CPU seconds):")
    print(f"      no cache {none:6.2f} s   cold {cold:6.2f} s ({(cold - none) / none:+.0%})"
          f"   warm {warm:6.2f} s ({none / warm:.2f}x faster)")  # fmt: skip


def part_b(root: Path, n: int, repeat: int) -> None:
    work = root / "http"
    work.mkdir()
    port = g._free_port()
    server = subprocess.Popen(
        [g.PY, "-m", "decguard_pipeline_tests.support.loopback", "--delay-ms",
         str(g.SERVER_MS), "--port", str(port)],
        cwd=g.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        g._wait_for(f"http://127.0.0.1:{port}/healthz")
        contract = g.HTTP_CONTRACT.replace("URL", f"http://127.0.0.1:{port}/decide")
        (work / "decguard.yaml").write_text(contract)
        g.write_cases(work / "cases.jsonl", n, text_only=True)
        args = [*OURS, "test", "decguard.yaml", "--max-concurrency", "64", "--no-healthcheck"]
        cache = work / "cache"

        def fresh() -> None:
            shutil.rmtree(cache, ignore_errors=True)

        base = best([*args, "-o", "base.json"], work, repeat)
        cold = best([*args, "--cache", "cache", "-o", "cold.json"], work, repeat, fresh)
        warm = best([*args, "--cache", "cache", "-o", "warm.json"], work, repeat)
    finally:
        server.terminate()
        server.wait(10)
    stats = cache_section(work / "cold.json"), cache_section(work / "warm.json")
    print(f"(b) {n:,} HTTP cases, 20 ms each, 64 in flight, best of {repeat}")
    print(f"    no cache     {base.seconds:6.2f} s   cpu {base.cpu_seconds:5.2f} s")
    print(f"    cold cache   {cold.seconds:6.2f} s   cpu {cold.cpu_seconds:5.2f} s   "
          f"asked {stats[0]['asked']:,} (every answer journaled as it arrived)")  # fmt: skip
    print(f"    warm cache   {warm.seconds:6.2f} s   cpu {warm.cpu_seconds:5.2f} s   "
          f"asked {stats[1]['asked']:,}, "
          f"from cache {stats[1]['answers_from_cache']:,}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", choices=["a", "b"])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--http-cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.only in (None, "a"):
            part_a(root, args.cases, args.repeat)
        if args.only in (None, "b"):
            part_b(root, args.http_cases, args.repeat)


if __name__ == "__main__":
    main()

"""Side-by-side benchmark of the golden path: decguard==0.1.1 against decguard_pipeline.

Both CLIs run as child processes on the same generated contract and dataset:

  (a) 100,000 mock cases, ``test -o report.json``, end to end: wall time of each, ratio.
  (b) 1,000,000 mock cases: wall time and peak memory (the child's ru_maxrss).
  (c) 10,000 cases against a loopback HTTP model answering in 20 ms, ``--max-concurrency 64``:
      requests/s once process start-up (a 1-case run of the same command) is taken out,
      as a share of the ideal 64 / 20 ms = 3,200/s, and the p50 latency each one reports.

    .venv/bin/python bench/golden_run.py                 # all three, reference included
    .venv/bin/python bench/golden_run.py --only c        # one part
    .venv/bin/python bench/golden_run.py --skip-ref-1m   # (b) without the slow reference run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
OURS = [PY, "-m", "decguard_pipeline"]
REF = [PY, "-m", "decguard"]
IDEAL_RPS = 64 / 0.020
SERVER_MS = 20.0

MOCK_CONTRACT = """\
schema_version: "0.1"
decision:
  name: refund_request
  type: choice
  options: [refund, reject, review]
backend:
  provider: mock
  model: refund-mock-v1
  rules:
    - {contains: damaged, probabilities: {refund: 0.96, reject: 0.01, review: 0.03}}
    - {contains: never arrived, probabilities: {refund: 0.90, reject: 0.02, review: 0.08}}
    - {contains: changed my mind, probabilities: {refund: 0.05, reject: 0.85, review: 0.10}}
dataset: cases.jsonl
evaluation: {confidence_threshold: 0.8}
requirements: {min_accuracy: 0.3, max_ece: 0.5}
warnings: {min_coverage: 0.2, max_latency_p95_ms: 500}
"""

HTTP_CONTRACT = """\
schema_version: "0.1"
decision: {name: is_urgent, type: noul}
backend: {provider: http, url: "URL", timeout_s: 30}
dataset: cases.jsonl
"""

PHRASES = (
    "The blender arrived damaged and won't turn on.",
    "My parcel never arrived, tracking stopped two weeks ago.",
    "I changed my mind about the colour, please take it back.",
    "The invoice shows a different price than the website did.",
)
LABELS = ("refund", "reject", "review")


@dataclass
class Run:
    seconds: float
    max_rss_mib: float
    exit_code: int
    cpu_seconds: float = 0.0  # user + system time of the child


REPEAT = 1  # --repeat: best of N, the machine may be shared


def rotated(items: list[Any], round_number: int) -> list[Any]:
    """``items`` in their order for round ``round_number`` of interleaved rounds: turned by
    one each round, so a drift of the machine's speed (this VM's last minutes) weighs on
    every command alike instead of on the one whose repeats fell in the slow minutes."""
    turn = round_number % len(items) if items else 0
    return items[turn:] + items[:turn]


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Run:
    """The best of ``REPEAT`` runs of a child: wall time and its own peak resident memory."""
    return min((run_once(command, cwd, env) for _ in range(REPEAT)), key=lambda r: r.seconds)


def run_once(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Run:
    start = time.perf_counter()
    child = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    child.returncode = code
    stderr = child.stderr.read().decode() if child.stderr else ""
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {code}:\n{stderr}")
    return Run(seconds, usage.ru_maxrss / 1024, code, usage.ru_utime + usage.ru_stime)


def write_cases(path: Path, n: int, *, seed: int = 0, text_only: bool = False) -> None:
    rng = random.Random(seed)
    with path.open("w") as out:
        for i in range(n):
            text = f"{rng.choice(PHRASES)} (order {i})"
            case: dict[str, object] = {"id": f"c{i}", "input": text}
            if text_only:
                case["expected"] = rng.choice(("yes", "no"))
            elif i % 10:
                case["expected"] = rng.choice(LABELS)
            out.write(json.dumps(case) + "\n")


def mock_workdir(root: Path, n: int) -> Path:
    work = root / f"mock-{n}"
    work.mkdir()
    (work / "decguard.yaml").write_text(MOCK_CONTRACT)
    write_cases(work / "cases.jsonl", n)
    return work


def fmt_mib(mib: float) -> str:
    return f"{mib / 1024:.2f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def part_a(root: Path, n: int) -> None:
    work = mock_workdir(root, n)
    ref = run([*REF, "test", "decguard.yaml", "-o", "ref.json"], work)
    ours = run([*OURS, "test", "decguard.yaml", "-o", "ours.json"], work)
    verified = run([*REF, "report", "ours.json"], work)
    print(f"(a) {n:,} mock cases, test -o report.json")
    print(f"    reference   {ref.seconds:7.2f} s   peak {fmt_mib(ref.max_rss_mib)}")
    print(f"    pipeline    {ours.seconds:7.2f} s   peak {fmt_mib(ours.max_rss_mib)}")
    print(f"    speed-up    {ref.seconds / ours.seconds:7.1f}x   (target >= 10x)")
    print(f"    our report verified by the reference: exit {verified.exit_code}")


def part_b(root: Path, n: int, with_ref: bool) -> None:
    work = mock_workdir(root, n)
    ours = run([*OURS, "test", "decguard.yaml", "-o", "ours.json"], work)
    print(f"(b) {n:,} mock cases, test -o report.json")
    print(
        f"    pipeline    {ours.seconds:7.2f} s   peak {fmt_mib(ours.max_rss_mib)}"
        "   (target < 2 GiB)"
    )
    if with_ref:
        ref = run([*REF, "test", "decguard.yaml", "-o", "ref.json"], work)
        print(f"    reference   {ref.seconds:7.2f} s   peak {fmt_mib(ref.max_rss_mib)}")
        print(f"    speed-up    {ref.seconds / ours.seconds:7.1f}x")
    else:
        print("    reference   skipped (--skip-ref-1m)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the loopback server did not come up at {url}")


def _server_stats(port: int) -> dict[str, Any]:
    """The lean server's own latency figures since the last look (reset by looking)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as reply:
        return json.loads(reply.read())


def _http_round(
    tool: list[str],
    work: Path,
    n: int,
    name: str,
    startup: float,
    port: int | None,
    env: dict[str, str] | None = None,
) -> tuple[float, float, float | None, int]:
    """(requests/s without start-up, reported p50 ms, the server's own p50 ms, errored)."""
    args = ["test", "decguard.yaml", "--max-concurrency", "64", "--no-healthcheck"]
    if port is not None:
        _server_stats(port)  # forget the start-up runs' requests
    full = run_once([*tool, *args, "-o", f"{name}.json"], work, env)
    metrics = json.loads((work / f"{name}.json").read_text())["metrics"]
    served = _server_stats(port)["p50_ms"] if port is not None else None
    rps = n / max(full.seconds - startup, 1e-9)
    return rps, metrics["latency"]["p50_ms"], served, metrics["counts"]["errored"]


def part_c(root: Path, n: int, server_kind: str = "lean", with_aiohttp: bool = False) -> None:
    work = root / "http"
    work.mkdir()
    port = _free_port()
    if server_kind == "lean":  # raw asyncio: leaves the client under test the most CPU
        command = [PY, str(ROOT / "bench" / "lean_loopback.py"), "--port", str(port),
                   "--delay-ms", str(SERVER_MS)]  # fmt: skip
    else:
        command = [PY, "-m", "decguard_pipeline_tests.support.loopback", "--delay-ms",
                   str(SERVER_MS), "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_for(f"http://127.0.0.1:{port}/healthz")
        contract = HTTP_CONTRACT.replace("URL", f"http://127.0.0.1:{port}/decide")
        (work / "decguard.yaml").write_text(contract)
        write_cases(work / "cases.jsonl", n, text_only=True)
        write_cases(work / "one.jsonl", 1, text_only=True)
        print(f"(c) {n:,} cases, loopback HTTP model ({server_kind}) answering in "
              f"{SERVER_MS:g} ms, --max-concurrency 64 (ideal {IDEAL_RPS:,.0f} requests/s), "
              f"{REPEAT} interleaved rounds")  # fmt: skip
        args = ["test", "decguard.yaml", "--max-concurrency", "64", "--no-healthcheck"]
        tools: list[tuple[str, list[str], dict[str, str] | None]] = [
            ("reference", REF, None), ("pipeline", OURS, None)]  # fmt: skip
        if with_aiohttp:  # our batch client before the lean one, on the same rounds
            tools.append(("aiohttp", OURS, {**os.environ, "DECGUARD_HTTP_CLIENT": "aiohttp"}))
        startup = {
            name: min(run_once([*tool, *args, "-d", "one.jsonl"], work, env).seconds
                      for _ in range(2))
            for name, tool, env in tools
        }  # fmt: skip
        stats_port = port if server_kind == "lean" else None
        rounds: dict[str, list[tuple[float, float, float | None, int]]] = {
            name: [] for name, _, _ in tools
        }
        for number in range(REPEAT):
            for name, tool, env in rotated(tools, number):
                rounds[name].append(
                    _http_round(tool, work, n, name, startup[name], stats_port, env)
                )
        for name, _, _ in tools:
            figures = rounds[name]
            share = sorted(f[0] / IDEAL_RPS for f in figures)
            p50s = sorted(f[1] for f in figures)
            served = [f[2] for f in figures if f[2] is not None]
            bias = sorted(f[1] / f[2] - 1 for f in figures if f[2])
            errored = sum(f[3] for f in figures)
            line = (
                f"    {name:<10} efficiency median {statistics.median(share):6.1%} "
                f"(worst {share[0]:.1%})   p50 median {statistics.median(p50s):5.1f} ms "
                f"(worst {p50s[-1]:.1f})"
            )
            if served:
                line += (f"   server's own p50 {statistics.median(served):.2f} ms: recorded "
                         f"{statistics.median(bias):+.1%} (worst {bias[-1]:+.1%})")  # fmt: skip
            print(line + f"   start-up {startup[name]:.2f} s"
                  + (f"   {errored} errored" if errored else ""))  # fmt: skip
        print("    targets: pipeline >= 85% of ideal, p50 within 10% of the server's latency")
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["a", "b", "c"], action="append")
    parser.add_argument("--skip-ref-1m", action="store_true")
    parser.add_argument("--cases-a", type=int, default=100_000)
    parser.add_argument("--cases-b", type=int, default=1_000_000)
    parser.add_argument("--cases-c", type=int, default=10_000)
    parser.add_argument("--server", choices=["lean", "aiohttp"], default="lean",
                        help="(c): bench/lean_loopback.py or the tests' aiohttp one")  # fmt: skip
    parser.add_argument("--with-aiohttp", action="store_true",
                        help="(c): our run on aiohttp too (DECGUARD_HTTP_CLIENT)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs of each command")
    args = parser.parse_args()
    global REPEAT
    REPEAT = max(1, args.repeat)
    parts = args.only or ["a", "b", "c"]
    load = os.getloadavg()[0]
    print(
        f"python {sys.version.split()[0]} · {os.cpu_count()} CPUs · load {load:.1f} · "
        f"best of {REPEAT} · {time.strftime('%F %T')}"
    )
    with tempfile.TemporaryDirectory(prefix="decguard-bench-") as tmp:
        root = Path(tmp)
        if "a" in parts:
            part_a(root, args.cases_a)
        if "b" in parts:
            part_b(root, args.cases_b, not args.skip_ref_1m)
        if "c" in parts:
            part_c(root, args.cases_c, args.server, args.with_aiohttp)


if __name__ == "__main__":
    main()

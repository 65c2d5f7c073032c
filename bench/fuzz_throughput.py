"""Fuzz throughput against a loopback HTTP model: is a fuzz run as fast per request as a
golden run? decguard_pipeline and decguard==0.1.1 side by side.

A decguard.http/0.1 server (decguard_pipeline_tests/support/loopback.py) answers in 20 ms in its own
process, with a 10% bias towards the option shown first so option_order pairs fail and get
minimised. Each CLI's own command (click / typer, in this process, after a 1-case warm-up so
imports are not timed) runs on the same contract and N cases (default 3,000):

  golden  ``test --max-concurrency 64 -o golden.json``  N requests
  fuzz    ``fuzz --max-concurrency 64 -o fuzz.json``  N golden + transformed + minimisation

Requests are counted from our sidecar; both tools make the same calls (their pairs,
violations and minimisation calls are compared, leaving out pairs that errored). The best
of ``--repeat`` interleaved runs is kept, since other work on the machine only ever slows a
run down.

    .venv/bin/python bench/fuzz_throughput.py
    .venv/bin/python bench/fuzz_throughput.py --cases 5000 --repeat 3 --skip-reference
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
LABELS = ("refund", "reject", "review")
SERVER = {"default": {"refund": 0.2, "reject": 0.15, "review": 0.65}, "position_bias": 0.1}

CONTRACT = """\
schema_version: "0.1"
decision: {name: refund_request, type: choice, options: [refund, reject, review]}
backend: {provider: http, url: "URL", timeout_s: 30}
dataset: cases.jsonl
fuzz: {seed: 42}
properties:
  option_order: {samples: 2, max_tv_distance: 0.03}
  label_format: {samples: 1, max_tv_distance: 0.03}
  irrelevant_context: {insertions: 2, samples: 1, max_tv_distance: 0.05}
  whitespace: {samples: 1, max_tv_distance: 0.02}
"""

PHRASES = (
    "The blender arrived damaged and won't turn on. I want my money back.",
    "My parcel never arrived, tracking stopped two weeks ago.",
    "I changed my mind about the colour. Please take it back!",
    "The invoice shows a different price than the website did.",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, delay_ms: float) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [PY, "-m", "decguard_pipeline_tests.support.loopback", "--port", str(port),
         "--delay-ms", str(delay_ms), "--labels", ",".join(LABELS),
         "--settings", json.dumps(SERVER)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.1)
    server.terminate()
    raise SystemExit("the loopback server did not start")


def write_case_set(folder: Path, n: int, url: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"id": f"c{i}", "input": f"{PHRASES[i % len(PHRASES)]} (order {i})"})
        for i in range(n)
    ]
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n")
    contract = folder / "decguard.yaml"
    contract.write_text(CONTRACT.replace("URL", url))
    return contract


def invoke(tool: str, args: list[str], cwd: Path) -> float:
    """Wall time of one command of ``tool`` ("ours" or "ref"), output discarded."""
    import click

    if tool == "ours":
        from decguard_pipeline.cli import cli as command
    else:
        from decguard.cli import app
        from typer.main import get_command

        command = get_command(app)
    previous = os.getcwd()
    os.chdir(cwd)
    sink = io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            code = command.main(args, standalone_mode=False)
    except SystemExit as exc:
        code = exc.code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    finally:
        os.chdir(previous)
    seconds = time.perf_counter() - start
    if code not in (0, 1, None):
        raise SystemExit(f"{tool} {' '.join(args)} exited {code}:\n{sink.getvalue()[-2000:]}")
    return seconds


def requests_of(sidecar: Path, n_cases: int) -> int:
    section = json.loads(sidecar.read_text())["properties"]
    return n_cases + int(section["backend_calls"])


def compare_pairs(ours: Path, ref: Path) -> str:
    """How the two fuzz reports agree, leaving out pairs that errored on either side (a
    loaded machine can make either tool's requests fail)."""

    def pairs(path: Path) -> dict[str, dict[str, object]]:
        found = json.loads(path.read_text())["properties"]["pairs"]
        return {p["id"]: p for p in found}

    a, b = pairs(ours), pairs(ref)
    errored = {i for d in (a, b) for i, p in d.items() if p["error"] is not None}

    def key(p: dict[str, object]) -> tuple[object, ...]:
        reduced = p["reduced"] or {}
        return (p["steps"], p["input"], p["violations"], reduced.get("backend_calls"))  # type: ignore[union-attr]

    shared = [i for i in a if i in b and i not in errored]
    different = sum(key(a[i]) != key(b[i]) for i in shared)
    errors = {
        name: sum(p["error"] is not None for p in d.values())
        for name, d in (("ours", a), ("ref", b))
    }
    return (
        f"pairs: {len(a)} ours, {len(b)} reference; {different} of {len(shared)} decided pairs "
        f"differ; errored pairs: {errors['ours']} ours, {errors['ref']} reference"
    )


def measure(tool: str, contract: Path, concurrency: str) -> dict[str, float]:
    common = ["--max-concurrency", concurrency, "--no-healthcheck"]
    return {
        "golden": invoke(
            tool, ["test", str(contract), *common, "-o", "golden.json"], contract.parent
        ),
        "fuzz": invoke(tool, ["fuzz", str(contract), *common, "-o", "fuzz.json"], contract.parent),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--max-concurrency", default="64")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--ref-repeat", type=int, default=1, help="the reference is slow")
    parser.add_argument("--skip-reference", action="store_true")
    args = parser.parse_args()

    port = free_port()
    server = start_server(port, args.delay_ms)
    url = f"http://127.0.0.1:{port}/decide"
    tools = ["ours"] if args.skip_reference else ["ours", "ref"]
    best: dict[str, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="fuzz-bench-") as tmp:
            root = Path(tmp)
            contracts = {tool: write_case_set(root / tool, args.cases, url) for tool in tools}
            for tool in tools:  # warm-up: imports, first connections
                measure(tool, write_case_set(root / tool / "warm", 1, url), args.max_concurrency)
            for round_ in range(args.repeat):
                for tool in tools:
                    if tool == "ref" and round_ >= args.ref_repeat:
                        continue
                    timed = measure(tool, contracts[tool], args.max_concurrency)
                    best[tool] = {k: min(v, best.get(tool, timed)[k]) for k, v in timed.items()}
            requests = requests_of(root / "ours" / "fuzz.pipeline.json", args.cases)
            if "ref" in tools:
                print(compare_pairs(root / "ours" / "fuzz.json", root / "ref" / "fuzz.json"))
    finally:
        server.terminate()
        server.wait(10)

    ideal = float(args.max_concurrency) / (args.delay_ms / 1000.0)
    print(
        f"{args.cases} cases · {requests} requests in the fuzz run · server {args.delay_ms:g} ms"
        f" · max-concurrency {args.max_concurrency} (ideal {ideal:,.0f} req/s)"
    )
    names = {"ours": "decguard_pipeline", "ref": "decguard 0.1.1"}
    print(f"{'':<20}{'golden req/s':>14}{'fuzz req/s':>12}{'fuzz/golden':>13}")
    rates = {}
    for tool, r in best.items():
        golden, fuzz = args.cases / r["golden"], requests / r["fuzz"]
        rates[tool] = (golden, fuzz)
        print(f"{names[tool]:<20}{golden:>14,.0f}{fuzz:>12,.0f}{fuzz / golden:>13.2f}")
    if len(rates) == 2:
        (og, of), (rg, rf) = rates["ours"], rates["ref"]
        print(f"{'ours / reference':<20}{og / rg:>14.2f}{of / rf:>12.2f}")


if __name__ == "__main__":
    main()

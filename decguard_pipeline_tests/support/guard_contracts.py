"""Datasets for the guard tests: labelled cases with a ``difficulty`` to split by, a partial
run's cases (some answered by the loopback server with a 500), and the size of a PNG."""

from __future__ import annotations

import json
import struct
from pathlib import Path

# a noul decision over HTTP (the loopback server) whose partial_runs settings flag the run
PARTIAL = """\
schema_version: "0.1"
decision: {{name: flagged, type: noul}}
backend: {{provider: http, url: "{url}"}}
dataset: partial.jsonl
requirements: {{max_error_rate: 0.5}}
pipeline:
  partial_runs: {{warn_from: 0.05, partial_above: 0.2{extra}}}
"""


def cases(rows: list[tuple[str, str]], prefix: str) -> str:
    """JSONL of ``(input, expected)`` rows; every other case is ``hard``."""
    return "".join(
        json.dumps(
            {"id": f"{prefix}{i}", "input": text, "expected": label,
             "metadata": {"difficulty": "hard" if i % 2 else "easy"}}
        ) + "\n"
        for i, (text, label) in enumerate(rows)
    )  # fmt: skip


def partial_contract(
    folder: Path, url: str, failures: int, extra: str = "", *, name: str = "decguard.yaml"
) -> Path:
    """``partial.jsonl`` (20 yes/no cases, the first ``failures`` answered with HTTP 500 by the
    loopback server: their id asks for it) and the contract ``name`` in ``folder``; ``extra``
    is added to the ``partial_runs`` settings."""
    rows = [
        {"id": f"status=500-{i}" if i < failures else f"ok-{i}", "input": f"message {i}",
         "expected": "yes" if i % 2 else "no"}
        for i in range(20)
    ]  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "partial.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = folder / name
    path.write_text(PARTIAL.format(url=url, extra=extra))
    return path


def png_size(data: bytes) -> tuple[int, int]:
    """``(width, height)`` from a PNG's header (which must be one)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])

"""Stored reports that are hostile: too large, not an object, nested deeper than DecGuard's
parser reads. Every command that loads a stored report (report, diff, replay, check
--baseline) refuses them before parsing, with exit 2 and a clear message; the nesting
message is DecGuard's own, at the same line and column (pydantic is the oracle)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from decguard_pipeline.core.json_limits import structure_problem, too_deep
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.faults import run_measured

BIN = Path(sys.executable).parent
ANY = TypeAdapter(Any)


def pydantic_says(raw: bytes) -> str | None:
    """DecGuard's parser on ``raw``: its error message, or None when it reads it."""
    try:
        ANY.validate_json(raw)
    except ValidationError as exc:
        return str(exc.errors()[0]["msg"])
    return None


# -- the nesting check against the parser DecGuard reads reports with ---------------------


def _random_document(rng: random.Random, depth: int) -> Any:
    """A JSON value nested exactly ``depth`` containers deep somewhere, with decoys: strings
    full of brackets, quotes and backslashes, unicode, empty containers, object keys."""
    tricky = ['a"b', "[[{{", "\\", '\\"]', "}]", "é😀\n", "\\\\", ""]

    def leaf() -> Any:
        return rng.choice([rng.choice(tricky), 1, -2.5, None, True, [], {}])

    value: Any = leaf()
    for _ in range(depth):
        siblings = [leaf() for _ in range(rng.randint(0, 2))]
        if rng.random() < 0.5:
            items = [*siblings, value] if rng.random() < 0.5 else [value, *siblings]
            value = items
        else:
            value = {rng.choice(tricky) + str(i): s for i, s in enumerate(siblings)} | {
                rng.choice(tricky) + "k[": value
            }
    return value


@pytest.mark.parametrize("seed", range(40))
def test_nesting_limit_is_the_parsers(seed):
    rng = random.Random(seed)
    depth = rng.randint(195, 206)
    value = {"wrapper": _random_document(rng, depth)}
    indent = rng.choice([None, 1, 2, "\t"])
    raw = json.dumps(value, indent=indent, ensure_ascii=rng.random() < 0.5).encode("utf-8")
    said = pydantic_says(raw)
    found = structure_problem(raw)
    if said is None:
        assert found is None
    else:
        assert said.startswith("Invalid JSON: recursion limit exceeded at line"), said
        assert found == f"(root): {said}"


def test_nesting_positions_match_the_parser_exactly():
    cases = [
        '{"a":' + "[" * 201 + "]" * 201 + "}",
        '{"a":' + "[" * 200 + "]" * 200 + "}",  # the deepest array is empty: readable
        '{"a":' + '{"b":' * 200 + "1" + "}" * 200 + "}",
        '{"é":"ü", "a":' + "[ \n" * 201 + "]" * 201 + "}",
        '{"a":' + "[1," * 200 + '[[], [], "x"]' + "]" * 200 + "}",
        '{"a":' + "[1," * 200 + '{"k\\"[[" : 5}' + "]" * 200 + "}",
        '{"s": "' + "[" * 500 + '\\"' + '", "t": 1}',  # brackets inside a string
    ]
    for text in cases:
        raw = text.encode()
        said = pydantic_says(raw)
        assert structure_problem(raw) == (None if said is None else f"(root): {said}"), text


def test_chunks_never_split_an_escape(monkeypatch):
    """Backslash runs across the scan's chunk boundaries are decided in one chunk."""
    from decguard_pipeline.core import json_limits

    monkeypatch.setattr(json_limits, "_CHUNK", 7)
    for run in range(1, 6):
        text = '{"x": "' + "\\" * (2 * run) + '", "y": ' + "[" * 201 + "]" * 201 + "}"
        raw = text.encode()
        assert structure_problem(raw) == f"(root): {pydantic_says(raw)}"
    assert too_deep(b'{"a": "\\\\\\" [[[[["}', limit=2) is None


# -- through the commands, against the reference -------------------------------------------


@pytest.fixture
def stored(tmp_path, monkeypatch, ours) -> Path:
    """A copy of the refund example with a test report, a fuzz report and a check report."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(EXAMPLES / "refund", "refund")
    assert ours("test", "refund/decguard.yaml", "-o", "test.json").exit_code in (0, 1)
    assert ours("fuzz", "refund/decguard.yaml", "-o", "fuzz.json").exit_code in (0, 1)
    checked = ours(
        "check", "refund/decguard.yaml", "-d", "refund/production.jsonl", "-o", "check.json"
    )
    assert checked.exit_code in (0, 1), checked.stderr
    return tmp_path


def _nest_metadata(path: str, depth: int, out: str) -> None:
    """The report at ``path`` with the first result's metadata nested ``depth`` deep (written
    as text, so any depth works)."""
    doc = json.loads(Path(path).read_text())
    doc["results"][0]["result"]["metadata"] = {"deep": "MARK"}
    text = json.dumps(doc, indent=2)
    Path(out).write_text(text.replace('"MARK"', "[" * depth + "0" + "]" * depth, 1))


@pytest.mark.parametrize("depth", [190, 200, 400, 900])
def test_deep_metadata_is_refused_as_decguard_refuses_it(stored, ours, ref, depth):
    _nest_metadata("test.json", depth, "deep.json")
    a, b = ours("report", "deep.json"), ref("report", "deep.json")
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    if depth == 190:
        assert a.exit_code == 0  # readable, and the refund example passes
    else:
        assert a.exit_code == 2
        assert "Invalid JSON: recursion limit exceeded at line" in a.stderr


def test_deeper_than_python_recurses_is_a_clear_error(stored, ours, ref):
    """DecGuard dies in json.loads (RecursionError, internal error); we give its parser's
    message, for every command that reads a report."""
    _nest_metadata("test.json", 5000, "deep.json")
    assert ref("report", "deep.json").stderr.startswith("internal error: RecursionError")
    want = "  (root): Invalid JSON: recursion limit exceeded at line"
    for args in (
        ["report", "deep.json"],
        ["diff", "test.json", "deep.json"],
        ["replay", "deep.json"],
    ):
        ran = ours(*args)
        assert ran.exit_code == 2, args
        assert ran.stderr.startswith("error: deep.json: not a DecGuard 0.1 report:\n" + want)
    deep_check = json.loads(Path("check.json").read_text())
    deep_check["records"][0]["metadata"] = {"deep": "MARK"}
    Path("deep_check.json").write_text(
        json.dumps(deep_check).replace('"MARK"', "[" * 5000 + "]" * 5000, 1)
    )
    ran = ours(
        "check", "refund/decguard.yaml", "-d", "refund/production.jsonl",
        "--baseline", "deep_check.json",
    )  # fmt: skip
    assert ran.exit_code == 2
    assert ran.stderr.startswith(
        "error: deep_check.json: not a DecGuard production report 0.1:\n" + want
    )


def test_size_limit_for_every_command(stored, ours, monkeypatch):
    size = Path("test.json").stat().st_size
    monkeypatch.setenv("DECGUARD_MAX_REPORT_BYTES", "1000")
    tail = (
        "bytes, over the limit of 1000 bytes (set DECGUARD_MAX_REPORT_BYTES to read larger files)"
    )
    for args, what in (
        (["report", "test.json"], "report"),
        (["diff", "fuzz.json", "test.json"], "report"),
        (["replay", "fuzz.json"], "report"),
        (
            ["check", "refund/decguard.yaml", "-d", "refund/production.jsonl",
             "--baseline", "check.json"],
            "production report",
        ),
    ):  # fmt: skip
        ran = ours(*args)
        assert ran.exit_code == 2, (args, ran.stderr)
        name = args[-1] if args[0] != "diff" else "fuzz.json"
        assert ran.stderr.startswith(f"error: {name}: cannot read {what}: it is "), ran.stderr
        assert ran.stderr.endswith(f" {tail}\n")
    assert f"it is {size} bytes" in ours("report", "test.json").stderr
    monkeypatch.setenv("DECGUARD_MAX_REPORT_BYTES", str(size))
    assert ours("report", "test.json").exit_code == 0  # at the limit: read
    monkeypatch.setenv("DECGUARD_MAX_REPORT_BYTES", "lots")
    ran = ours("report", "test.json")
    assert (ran.exit_code, ran.stderr) == (
        2,
        "error: DECGUARD_MAX_REPORT_BYTES must be a positive number of bytes, got 'lots'\n",
    )


def test_a_records_array_is_still_a_baseline(stored, ours, ref):
    """check --baseline tells a records array from a report without parsing it."""
    records = [
        json.loads(line) for line in Path("refund/production.jsonl").read_text().split("\n") if line
    ]
    Path("records.json").write_text(json.dumps(records))
    args = ("check", "refund/decguard.yaml", "-d", "refund/production.jsonl")
    a = ours(*args, "--baseline", "records.json", "-f", "json")
    b = ref(*args, "--baseline", "records.json", "-f", "json")
    assert a.exit_code == b.exit_code
    assert json.loads(a.stdout)["baseline"]["source"] == "dataset"


# -- hostile files: memory stays bounded --------------------------------------------------


HOSTILE_MB = 40


@pytest.mark.parametrize(
    "shape, message",
    [
        ("wide-array", "(root): Input should be an object"),
        ("deep-array", "(root): Input should be an object"),
        ("deep-object", "(root): Invalid JSON: recursion limit exceeded at line 1 column 206"),
    ],
)
def test_hostile_files_are_refused_before_parsing(tmp_path, shape, message):
    """40 MB of nested arrays: refused in about the memory of the file itself. Before these
    checks, 100 MB took 16.4 GB and 75 s."""
    n = HOSTILE_MB << 20
    path = tmp_path / "hostile.json"
    with path.open("wb") as out:
        if shape == "wide-array":
            out.write(b"[" + b"[]," * (n // 3) + b"[]]")
        elif shape == "deep-array":
            out.write(b"[" * (n // 2) + b"]" * (n // 2))
        else:
            out.write(b'{"a":' + b"[" * (n // 2) + b"]" * (n // 2) + b"}")
    code, stderr, peak = run_measured([str(BIN / "decguard-pipeline"), "report", str(path)])
    assert code == 2
    assert stderr == f"error: {path}: not a DecGuard 0.1 report:\n  {message}\n"
    assert peak < 3 * HOSTILE_MB + 150, f"peak {peak} MiB"


# -- files that are not what their size says ----------------------------------------------

_ONE_GIB = 1 << 30


def _capped() -> None:
    """In the child: at most 1 GiB of data, so reading a device for ever fails fast."""
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (_ONE_GIB, _ONE_GIB))


def _command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "decguard-pipeline"), *args],
        capture_output=True, text=True, timeout=120, preexec_fn=_capped,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_a_device_or_fifo_is_refused_before_anything_is_read(stored):
    """``stat()`` gives a device and a FIFO no size: a link to ``/dev/zero`` passed the size
    check and was read until memory ran out (2.7 GB), a FIFO without a writer hung."""
    Path("zero.json").symlink_to("/dev/zero")
    os.mkfifo("fifo.json")
    for name in ("zero.json", "fifo.json"):
        for args, what in (
            (["report", name], "report"),
            (["diff", name, "test.json"], "report"),
            (["replay", name], "report"),
            (
                ["check", "refund/decguard.yaml", "-d", "refund/production.jsonl",
                 "--baseline", name],
                "production report",
            ),
        ):  # fmt: skip
            ran = _command(*args)
            assert (ran.returncode, ran.stderr) == (
                2,
                f"error: {name}: cannot read {what}: it is not a regular file\n",
            ), args
    Path("folder.json").mkdir()
    ran = _command("report", "folder.json")
    assert (ran.returncode, ran.stderr) == (
        2,
        "error: folder.json: cannot read report: it is a directory\n",
    )


def test_the_limit_holds_on_what_is_read_not_on_the_size_reported(stored):
    """A file whose size the file system does not know is read only up to the limit:
    ``/proc/self/pagemap`` reports 0 bytes and holds hundreds of gigabytes (before, it was
    read until memory ran out)."""
    if not os.access("/proc/self/pagemap", os.R_OK):
        pytest.skip("no /proc/self/pagemap here")
    Path("pagemap.json").symlink_to("/proc/self/pagemap")
    limit = {"DECGUARD_MAX_REPORT_BYTES": "4095"}  # pagemap is read in 8-byte entries
    for args in (["report", "pagemap.json"], ["replay", "pagemap.json"]):
        ran = _command(*args, env=limit)
        assert (ran.returncode, ran.stderr) == (
            2,
            "error: pagemap.json: cannot read report: over the limit of 4095 bytes "
            "(set DECGUARD_MAX_REPORT_BYTES to read larger files)\n",
        ), args

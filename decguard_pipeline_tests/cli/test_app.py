"""The command line: entry points, usage errors, output files, error handling and
DECGUARD_DEBUG, compared with decguard==0.1.1 where DecGuard defines the behaviour."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from decguard_pipeline import __version__
from decguard_pipeline_tests.conftest import EXAMPLES, ROOT

REFUND = EXAMPLES / "refund" / "decguard.yaml"


def test_module_entry_point_and_version():
    ran = subprocess.run(
        [sys.executable, "-m", "decguard_pipeline", "--version"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, f"decguard-pipeline {__version__}\n", "")


def test_module_runs_a_test_end_to_end(tmp_path, ref):
    out = tmp_path / "nested" / "dir" / "report.json"
    ran = subprocess.run(
        [sys.executable, "-m", "decguard_pipeline", "test", str(REFUND), "-o", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr == f"report written to {out}\n"
    assert ran.stdout.startswith(f"DecGuard pipeline-{__version__} · refund_request (choice) · ")
    assert ref("report", out).exit_code == 0


def test_no_arguments_prints_help(ours):
    ran = ours()
    assert ran.exit_code in (0, 2)
    assert "Usage: decguard-pipeline" in ran.stdout + ran.stderr
    assert "validate" in ran.stdout + ran.stderr


SHARED_COMMANDS = ("validate", "test", "fuzz", "report", "diff", "replay", "check", "run")


def _help_parts(text: str) -> tuple[str, set[str], list[str]]:
    """The exit-code sentence, the option flags and the argument names of a --help text."""
    import re

    flat = " ".join(text.split())
    codes = re.search(r"Exit codes: .*?error\.", flat)
    flags = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", text.partition("Options:")[2]))
    block = text.partition("Arguments:")[2].partition("Options:")[0]
    names = [m.group(1).lower() for m in re.finditer(r"^  (\S+)", block, flags=re.MULTILINE)]
    return (codes.group(0) if codes else ""), flags, names


def test_top_level_help_states_the_exit_codes_as_decguard_does(ours, ref):
    mine, theirs = ours("--help"), ref("--help")
    assert mine.exit_code == theirs.exit_code == 0
    assert _help_parts(mine.stdout)[0] == _help_parts(theirs.stdout)[0]
    assert "1 = reliability gate failed" in mine.stdout
    for command in SHARED_COMMANDS:
        assert f"  {command} " in mine.stdout


@pytest.mark.parametrize("command", SHARED_COMMANDS)
def test_command_help_lists_what_decguard_lists(command, ours, ref):
    """Every flag and argument the reference documents is documented here (ours may add
    its own, e.g. ``test --suite``); arguments carry a description, as in DecGuard."""
    mine, theirs = ours(command, "--help"), ref(command, "--help")
    assert mine.exit_code == theirs.exit_code == 0
    _, our_flags, our_args = _help_parts(mine.stdout)
    _, ref_flags, ref_args = _help_parts(theirs.stdout)
    assert ref_flags <= our_flags
    assert [name.replace("input_value", "input") for name in ref_args] == our_args
    assert "`decguard " not in mine.stdout  # our hints name our command


@pytest.mark.parametrize(
    "args",
    [
        ["test", str(REFUND), "--format", "xml"],
        ["test", str(REFUND), "--max-concurrency", "0"],
        ["test", str(REFUND), "--max-concurrency", "257"],
        ["test", str(REFUND), "--max-concurrency", "many"],
        ["test", str(REFUND), "--all", "--seed", "-1"],
        ["test"],
        ["test", str(REFUND), "--no-such-flag"],
        ["validate", str(REFUND), "--format", "json"],
        ["report"],
        ["frobnicate"],
    ],
    ids=lambda a: " ".join(a[:1] + a[2:]) or "none",
)
def test_usage_errors_exit_2(args, ours, ref):
    a, b = ours(*args), ref(*args)
    assert a.exit_code == b.exit_code == 2
    assert "Traceback" not in a.stderr and a.stdout == ""


def test_concurrency_bounds_are_accepted(ours):
    for value in ("1", "256"):
        assert ours("test", REFUND, "--max-concurrency", value).exit_code == 0


def test_unknown_backend_name(ours, ref):
    a, b = ours("test", REFUND, "-b", "nope"), ref("test", REFUND, "-b", "nope")
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr) == (2, b.stderr)
    assert a.stderr == (
        "error: unknown backend 'nope'; the contract defines: default, order_sensitive, "
        "strong_model, staging\n"
    )


def test_unwritable_output(tmp_path, ours, ref):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    target = blocker / "report.json"
    a, b = ours("test", REFUND, "-o", target), ref("test", REFUND, "-o", target)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr) == (2, b.stderr)
    assert a.stderr.startswith(f"error: {target}: cannot write report: ")


def test_json_output_is_the_written_report(tmp_path, ours):
    out = tmp_path / "r.json"
    ran = ours("test", REFUND, "-b", "order_sensitive", "-f", "json", "-o", out)
    assert ran.exit_code == 1
    assert ran.stdout == out.read_text()
    doc = json.loads(ran.stdout)
    assert [c["gate"] for c in doc["checks"] if c["status"] == "fail"] == ["max_ece"]


@pytest.mark.parametrize("n", [1, 2048, 2049, 4500])
def test_streamed_report_is_the_document_indented(n, tmp_path, monkeypatch, ours, ref):
    """The streamed writer writes exactly what one indented dump of the whole report is,
    across chunk boundaries, and the reference reads it."""
    monkeypatch.chdir(tmp_path)
    Path("c.yaml").write_text(
        'schema_version: "0.1"\ndecision: {name: d, type: choice, options: [a, "b ü"]}\n'
        "backend: {provider: mock}\ndataset: cases.jsonl\n"
    )
    Path("cases.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "input": f"t{i}" if i % 3 else {"x": [i, None], "ü": "é"},
                    "expected": "a",
                    "metadata": {"i": i},
                }
            )
            + "\n"
            for i in range(n)
        )
    )
    assert ours("test", "c.yaml", "-o", "r.json").exit_code == 0
    text = Path("r.json").read_bytes()
    assert text == orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2) + b"\n"
    assert ref("report", "r.json").exit_code == 0


# -- internal errors and DECGUARD_DEBUG ----------------------------------------------------

CRASHING_PLUGIN = """
from decguard_pipeline.backends import Backend


class Crashing(Backend):
    provider = "crashing"

    @classmethod
    def from_config(cls, config, *, name, decision):
        return cls(name=name, model=config.model)

    def healthcheck(self):
        raise RuntimeError("health probe crashed")
"""


@pytest.fixture
def crashing(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "dg_pipeline_test_crash-1.0.dist-info").mkdir(parents=True)
    (site / "dg_pipeline_test_crash.py").write_text(CRASHING_PLUGIN)
    info = site / "dg_pipeline_test_crash-1.0.dist-info"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dg-pipeline-test-crash\n")
    (info / "entry_points.txt").write_text(
        "[decguard.backends]\ncrashing = dg_pipeline_test_crash:Crashing\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(tmp_path)
    Path("c.yaml").write_text(
        'schema_version: "0.1"\ndecision: {name: d, type: noul}\n'
        "backend: {provider: crashing}\ndataset: cases.jsonl\n"
    )
    Path("cases.jsonl").write_text('{"input": "x"}\n')


def test_internal_error_without_debug(crashing, ours, monkeypatch):
    monkeypatch.delenv("DECGUARD_DEBUG", raising=False)
    ran = ours("test", "c.yaml")
    assert ran.exit_code == 2
    assert ran.stderr == (
        "internal error: RuntimeError: health probe crashed (set DECGUARD_DEBUG=1 for a "
        "traceback)\n"
    )


def test_internal_error_with_debug(crashing, ours, monkeypatch):
    monkeypatch.setenv("DECGUARD_DEBUG", "1")
    ran = ours("test", "c.yaml")
    assert ran.exit_code == 2
    assert ran.stderr.startswith("Traceback (most recent call last):\n")
    assert 'raise RuntimeError("health probe crashed")' in ran.stderr
    assert ran.stderr.endswith(
        "internal error: RuntimeError: health probe crashed (set DECGUARD_DEBUG=1 for a "
        "traceback)\n"
    )


def test_a_mock_run_with_properties_never_imports_the_http_stack(tmp_path):
    """``test --all`` against the mock imports neither httpx nor asyncio: ~50 ms of every
    run (a property run's paraphraser imported the HTTP transport for its TLS context); nor
    subprocess, which the report writer's leftover check had brought in (2 ms)."""
    code = (
        "import sys\n"
        "from decguard_pipeline.cli.app import main\n"
        f"sys.argv = ['decguard-pipeline', 'test', {str(REFUND)!r}, '--all', '-o', "
        f"{str(tmp_path / 'r.json')!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted({'httpx', 'asyncio', 'aiohttp', 'subprocess'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["properties"]["pairs"]


def test_check_without_a_report_file_imports_nothing_of_the_pipeline(tmp_path):
    """``check`` alone loads neither the warehouse nor the steps that ``check -o`` writes its
    report with (~47 ms of every ``check``)."""
    code = (
        "import sys\n"
        "from decguard_pipeline.cli.app import main\n"
        f"sys.argv = ['decguard-pipeline', 'check', {str(REFUND)!r}, '-d', "
        f"{str(EXAMPLES / 'refund' / 'production.jsonl')!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('decguard_pipeline.steps', "
        "'decguard_pipeline.warehouse', 'duckdb'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr
    assert "post-deployment gates" in done.stdout  # the check ran

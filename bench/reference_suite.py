"""Run DecGuard 0.1.1's own test suite against decguard_pipeline, black-box.

    python bench/reference_suite.py                 # downloads the sdist, runs against ours
    python bench/reference_suite.py --reference     # the same selection against decguard itself
    python bench/reference_suite.py --source DIR    # an unpacked sdist or a checkout instead
    python bench/reference_suite.py -- -k policy    # anything after -- goes to pytest

Nothing of the suite is copied into this repository: it is fetched from PyPI with pip
(``decguard==0.1.1``, sdist) into a temporary folder. This file is also the pytest plugin the
suite is run with. Before the suite's modules are imported the plugin swaps in our command
(``decguard.cli.app`` becomes ``decguard_pipeline.cli.cli``, invoked through click's test
runner) and our SDK (``decguard.DecGuard`` becomes ``decguard_pipeline.DecGuard``). The suite's
other imports (helpers that write reports, the reference's mock behind its loopback server)
stay the reference's, which is what makes the run black-box: only the command and the SDK are
ours.

A test counts when it reached our command or SDK; the summary prints how many of those passed
and names the failures. Most of the suite's unit tests never reach either and are not counted;
nor are the three in ``NOT_APPLICABLE``, which test the reference's internals or its name.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SWAP_ENV = "DECGUARD_SUITE_SWAP"  # "1": ours replaces the reference; "0": observe only

# Tests that cannot apply to another implementation: they patch the reference's internals
# (which our command never calls) or check its program name. Run, but reported apart.
CLI_TESTS = "tests/integration/test_cli.py::"
FUZZ_TESTS = "tests/integration/test_fuzz_cli.py::"
NOT_APPLICABLE = {
    CLI_TESTS + "test_version": "prints our program name, decguard-pipeline",
    CLI_TESTS + "test_unexpected_exceptions_exit_2_not_1": "patches decguard.cli.run_test",
    FUZZ_TESTS + "test_transformed_backend_error_replay_semantics": "patches decguard.fuzz.replay",
}

_current: str | None = None  # node id of the running test
_reached: set[str] = set()
_failed: set[str] = set()
_skipped: set[str] = set()
_seen: set[str] = set()


def _note() -> None:
    if _current is not None:
        _reached.add(_current)


def _install() -> None:
    """Point the suite's CLI runner and SDK import at ours (or only observe them)."""
    import decguard
    import decguard.cli
    import decguard.sdk
    import typer.testing

    swap = os.environ.get(SWAP_ENV, "1") == "1"
    invoke = typer.testing.CliRunner.invoke
    if swap:
        import click.testing

        from decguard_pipeline.cli import cli
        from decguard_pipeline.sdk import DecGuard as Guard

        def run_ours(self: Any, app: Any, args: Any = None, **kwargs: Any) -> Any:
            _note()
            return click.testing.CliRunner().invoke(cli, args, **kwargs)

        typer.testing.CliRunner.invoke = run_ours  # type: ignore[method-assign]
        decguard.cli.app = cli  # type: ignore[attr-defined]
    else:
        from decguard.sdk import DecGuard as Guard  # type: ignore[assignment]

        def run_reference(self: Any, app: Any, args: Any = None, **kwargs: Any) -> Any:
            _note()
            return invoke(self, app, args, **kwargs)

        typer.testing.CliRunner.invoke = run_reference  # type: ignore[method-assign]

    class Observed(Guard):  # type: ignore[misc, valid-type]
        """The SDK under test, noting which tests used it."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            _note()
            super().__init__(*args, **kwargs)

    decguard.sdk.DecGuard = Observed  # type: ignore[misc]
    decguard.DecGuard = Observed  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    _install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    global _current
    _current = item.nodeid
    try:
        return (yield)
    finally:
        _current = None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seen.add(report.nodeid)
    if report.failed:
        _failed.add(report.nodeid)
    elif report.skipped:
        _skipped.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    counted = sorted(_reached - _skipped - NOT_APPLICABLE.keys())
    failed = [node for node in counted if node in _failed]
    side = "decguard_pipeline" if os.environ.get(SWAP_ENV, "1") == "1" else "decguard 0.1.1"
    write = terminalreporter.write_line
    write("")
    write(f"black-box tests of {side} (reached its CLI or SDK): {len(counted)} of {len(_seen)}")
    write(f"passed: {len(counted) - len(failed)} of {len(counted)}")
    for node in failed:
        write(f"  FAILED {node}")
    for node, reason in NOT_APPLICABLE.items():
        outcome = "failed" if node in _failed else "passed" if node in _seen else "not run"
        write(f"  not counted ({reason}): {node} {outcome}")


def _download(into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "decguard==0.1.1", "--no-binary", ":all:",
         "--no-deps", "--quiet", "-d", str(into)],
        check=True,
    )  # fmt: skip
    (archive,) = into.glob("decguard-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    (source,) = (path for path in into.iterdir() if path.is_dir())
    return source


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="unpacked decguard 0.1.1 sdist or checkout")
    parser.add_argument("--reference", action="store_true", help="run against decguard itself")
    parser.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="decguard-suite-") as scratch:
        source = args.source.resolve() if args.source else _download(Path(scratch))
        env = {
            **os.environ,
            SWAP_ENV: "0" if args.reference else "1",
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        command = [sys.executable, "-m", "pytest", "tests", "-p", "reference_suite", "-q",
                   "-p", "no:cacheprovider", *args.pytest_args]  # fmt: skip
        return subprocess.run(command, cwd=source, env=env).returncode


if __name__ == "__main__":
    raise SystemExit(main())

"""Shared fixtures: both CLIs in-process, a loopback model server, temporary contracts."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from decguard_pipeline_tests.support.browser import chromium  # noqa: F401
from decguard_pipeline_tests.support.object_store import s3_bucket, s3_server  # noqa: F401
from decguard_pipeline_tests.support.postgres import pg_url, postgres_server  # noqa: F401
from decguard_pipeline_tests.support.team_catalog import pg_catalog  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "data" / "contracts"
EXAMPLE_NAMES = ("refund", "severity", "spam")

# tests use ephemeral or temporary instances; never the project's own .dagster_home
os.environ.pop("DAGSTER_HOME", None)


@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str


def _invoke(app: Any, args: list[str], prog: str) -> Ran:
    runner = CliRunner()
    result = runner.invoke(app, [str(a) for a in args], prog_name=prog, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


@pytest.fixture(autouse=True)
def _no_secrets_across_tests() -> Iterator[None]:
    """Secrets are registered per process (core.secrets); one test's throwaway token must not
    redact another test's output."""
    yield
    from decguard_pipeline.core.secrets import forget_secrets

    forget_secrets()


@pytest.fixture
def ours() -> Callable[..., Ran]:
    """Run ``decguard-pipeline ARGS`` in-process."""
    from decguard_pipeline.cli import cli

    return lambda *args: _invoke(cli, list(args), "decguard-pipeline")


@pytest.fixture
def ref() -> Callable[..., Ran]:
    """Run the reference ``decguard ARGS`` (decguard==0.1.1) in-process."""
    from decguard.cli import app
    from typer.main import get_command

    command = get_command(app)
    return lambda *args: _invoke(command, list(args), "decguard")


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a (dedented) file under tmp_path and return its path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return _write


@pytest.fixture
def loopback() -> Iterator[Callable[..., Any]]:
    """``loopback(mock_settings, labels=..., delay_ms=...)`` starts a model server."""
    from contextlib import ExitStack

    from decguard_pipeline_tests.support.loopback import serve

    with ExitStack() as stack:
        yield lambda *a, **kw: stack.enter_context(serve(*a, **kw))


def same_text(ours_text: str, ref_text: str) -> tuple[list[str], list[str]]:
    """Both outputs with the producer version and latency figures neutralised, and the
    program our hints name (`decguard-pipeline replay` where DecGuard says `decguard replay`)
    read as DecGuard's."""
    import re

    assert "`decguard " not in ours_text, "a hint names DecGuard's command instead of ours"
    ours_text = ours_text.replace("`decguard-pipeline ", "`decguard ")

    def norm(text: str) -> list[str]:
        text = re.sub(r"DecGuard \S+ ·", "DecGuard V ·", text)
        text = re.sub(r"latency_p95_ms [0-9.e+-]+", "latency_p95_ms L", text)
        text = re.sub(r"Latency ms .*", "Latency ms L", text)
        return text.splitlines()

    return norm(ours_text), norm(ref_text)

"""Options shared by several commands, spelled as DecGuard spells them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

F = Callable[..., Any]

PathArg = click.Path(path_type=Path, dir_okay=True)


def dataset_option(f: F) -> F:
    return click.option(
        "--dataset", "-d", type=PathArg, default=None,
        help="Golden dataset (.jsonl/.json); overrides the contract's dataset.",
    )(f)  # fmt: skip


def backend_option(f: F) -> F:
    return click.option(
        "--backend", "-b", default=None,
        help="Named backend from the contract's 'backends' section.",
    )(f)  # fmt: skip


def output_option(f: F) -> F:
    return click.option(
        "--output", "-o", type=PathArg, default=None,
        help="Also write the JSON report to this file.",
    )(f)  # fmt: skip


def html_option(f: F) -> F:
    return click.option(
        "--html", "html", type=PathArg, default=None, metavar="PATH",
        help="Also write a self-contained HTML report to this file (opens offline).",
    )(f)  # fmt: skip


def format_option(f: F) -> F:
    return click.option(
        "--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text",
        show_default=True, help="Report format written to stdout.",
    )(f)  # fmt: skip


def fail_on_warn_option(f: F) -> F:
    return click.option(
        "--fail-on-warn", is_flag=True, default=False,
        help="Exit 1 when warning gates are violated.",
    )(f)  # fmt: skip


def concurrency_option(f: F) -> F:
    return click.option(
        "--max-concurrency", type=click.IntRange(1, 256), default=None,
        help="Parallel backend calls (default: evaluation.max_concurrency).",
    )(f)  # fmt: skip


def healthcheck_option(f: F) -> F:
    return click.option(
        "--healthcheck/--no-healthcheck", default=True, show_default=True,
        help="Check backend health before running.",
    )(f)  # fmt: skip


def fuzz_options(f: F) -> F:
    f = click.option(
        "--minimize/--no-minimize", default=None,
        help="Shrink failing transformations (default: fuzz.minimize).",
    )(f)  # fmt: skip
    f = click.option(
        "--property", "-p", "properties", multiple=True,
        help="Run only this property (repeatable). Default: all enabled.",
    )(f)  # fmt: skip
    return click.option(
        "--seed", type=click.IntRange(min=0), default=None,
        help="Transformation seed (default: fuzz.seed, else 0).",
    )(f)  # fmt: skip

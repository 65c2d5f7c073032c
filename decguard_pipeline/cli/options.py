"""Options shared by several commands, spelled as DecGuard spells them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

F = Callable[..., Any]

PathArg = click.Path(path_type=Path, dir_okay=True)
# a folder or an object-store URL, kept as given (a Path would make s3://b/p a folder "s3:")
CacheArg = click.STRING


class HelpArgument(click.Argument):
    """A positional argument with a help line (click's own arguments carry none)."""

    def __init__(self, param_decls: Sequence[str], help: str = "", **attrs: Any) -> None:
        super().__init__(param_decls, **attrs)
        self.help = help


class DocumentedCommand(click.Command):
    """A command whose help lists its arguments under "Arguments:" before the options, as
    DecGuard's commands do (the same on every click version: click 8.5's own "Positional
    arguments:" section is left out)."""

    def format_arguments(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        pass

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (
                param.human_readable_name,
                f"{param.help}  [required]" if param.required else param.help,
            )
            for param in self.get_params(ctx)
            if isinstance(param, HelpArgument) and param.help
        ]
        if rows:
            with formatter.section("Arguments"):
                formatter.write_dl(rows)
        super().format_options(ctx, formatter)


def argument(name: str, help: str, **attrs: Any) -> Callable[[F], F]:
    """``click.argument`` with a help line."""
    return click.argument(name, cls=HelpArgument, help=help, **attrs)


def contract_argument(f: F) -> F:
    return argument("contract", "The decision contract (.yaml, .yml or .json).", type=PathArg)(f)


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


def run_dir_option(f: F) -> F:
    return click.option(
        "--run-dir", "run_dir", type=PathArg, default=None, metavar="DIR",
        help="Also write a Guard Eval Harness run directory (datasets/<suite>/metrics.json, "
        "summary.json, manifest.json) for the contract's guarded label.",
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


def cache_options(f: F) -> F:
    """The response cache (pipeline extension, docs/cache.md); off unless asked for."""
    f = click.option(
        "--retry-errors", "retry_errors", type=PathArg, default=None, metavar="REPORT",
        help="Ask only the cases that errored in this report (same dataset) and write a "
        "complete new report with its other results.",
    )(f)  # fmt: skip
    f = click.option(
        "--no-cache", is_flag=True, default=False,
        help="Ask every case, even with $DECGUARD_CACHE set.",
    )(f)  # fmt: skip
    return click.option(
        "--cache", "cache", type=CacheArg, default=None, metavar="DIR",
        help="Reuse the answers kept in this directory (or s3://bucket/prefix, with "
        "$DECGUARD_CATALOG) and keep the new ones (default: $DECGUARD_CACHE; off when "
        "neither is set).",
    )(f)  # fmt: skip


def calibrator_option(f: F) -> F:
    """A fitted calibrator applied to every decision (pipeline extension,
    docs/contracts.md#calibrators); default: the contract's pipeline.calibration.apply."""
    return click.option(
        "--calibrator", "calibrator", type=PathArg, default=None, metavar="FILE",
        help="Decide on probabilities calibrated by this calibrator.json (from `calibrate`; "
        "default: the contract's pipeline.calibration.apply). Refused for another model "
        "version.",
    )(f)  # fmt: skip


def warehouse_option(dest: str = "warehouse") -> Callable[[F], F]:
    """``--warehouse``, kept as given (a folder or an object-store URL), into ``dest``."""
    return click.option(
        "--warehouse", dest, default=None,
        help="Warehouse folder or s3://bucket/prefix (default data/warehouse or "
        "$DECGUARD_WAREHOUSE; the catalog: $DECGUARD_CATALOG, else <warehouse>/catalog.sqlite).",
    )  # fmt: skip


def contracts_option(purpose: str = "") -> Callable[[F], F]:
    """``--contracts``: contract files or folders, os.pathsep-separated (``purpose``: what
    the command reads them for, said in its help)."""
    return click.option(
        "--contracts", default=None,
        help=f"Contract files or directories (os.pathsep-separated){purpose}; default "
        "data/contracts or $DECGUARD_CONTRACTS.",
    )  # fmt: skip

"""The response cache on the command line (docs/cache.md): the options of ``test``, ``fuzz``
and ``test --all`` (``--cache DIR``, ``--no-cache``, ``--retry-errors REPORT``) and the
``cache`` commands, ``stats`` and ``prune``. Registered on ``cli`` at import (see
app._register_commands)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from decguard_pipeline.cli.errors import handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import CacheArg

if TYPE_CHECKING:
    from decguard_pipeline.core.contract import LoadedContract
    from decguard_pipeline.runs.cache import CacheOptions


@dataclass
class RunCache:
    loaded: LoadedContract
    cache: CacheOptions


def run_cache_options(
    contract: Path,
    *,
    cache: str | None,
    no_cache: bool,
    retry_errors: Path | None,
    backend: str | None,
    suite: str | None,
    dataset: Path | None,
) -> RunCache | None:
    """The cache of a ``test``/``fuzz`` run, or None when it uses none. The contract is
    loaded here (and handed to the run) to check a ``--retry-errors`` report against it
    before anything is asked."""
    from decguard_pipeline.core.contract import DEFAULT_BACKEND, load_contract
    from decguard_pipeline.core.errors import DecGuardError
    from decguard_pipeline.runs.cache import CacheOptions, cache_directory
    from decguard_pipeline.steps.contracts import contract_key

    directory = cache_directory(cache, no_cache=no_cache)
    if directory is None and retry_errors is None:
        return None
    if isinstance(directory, Path):  # an object store has no folders to make
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DecGuardError(
                f"--cache {directory}: cannot be used as a cache directory: {exc.strerror or exc}"
            ) from exc
    loaded = load_contract(contract)
    retry = None
    if retry_errors is not None:
        from decguard_pipeline.runs.retry import retry_source, run_dataset

        path = run_dataset(loaded, suite=suite, dataset=dataset)
        retry = retry_source(retry_errors, loaded, path, backend or DEFAULT_BACKEND)
    options = CacheOptions(
        directory,
        contract_key(Path(contract).resolve()),
        retry=retry,
        retry_path=None if retry_errors is None else str(retry_errors),
    )
    return RunCache(loaded, options)


@cli.group("cache")
def cache_group() -> None:
    """The response cache: answers kept so that a run never pays twice for one."""


def _directory(cache: str | None) -> Any:
    """``--cache DIR``, else $DECGUARD_CACHE, else the warehouse (the pipeline's cache)."""
    from decguard_pipeline.runs.cache import cache_directory
    from decguard_pipeline.warehouse import Warehouse

    return Warehouse(cache_directory(cache, no_cache=False))


def _events() -> Any:
    """Where ``stats`` and ``prune`` say what they found damaged (stderr)."""
    from decguard_pipeline.core.cache.summary import CacheStats

    return CacheStats(on_warning=lambda message: click.echo(f"warning: {message}", err=True))


_dir_option = click.option(
    "--cache", "cache", type=CacheArg, default=None, metavar="DIR",
    help="Cache directory or s3://bucket/prefix (default: $DECGUARD_CACHE, "
    "else the warehouse: $DECGUARD_WAREHOUSE or data/warehouse).",
)  # fmt: skip


@cache_group.command("stats")
@_dir_option
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")  # fmt: skip
def cache_stats(cache: str | None, fmt: str) -> None:
    """Answers kept per contract and target (backend@model version)."""
    with handled():
        from decguard_pipeline.core.formatting import printable
        from decguard_pipeline.core.report.jsonio import dumps
        from decguard_pipeline.warehouse.responses_upkeep import response_stats

        warehouse = _directory(cache)
        rows = response_stats(warehouse, _events())
        if fmt == "json":
            click.echo(dumps({"directory": str(warehouse.root), "partitions": rows}))
            return
        click.echo(f"cache {warehouse.root}")
        if not rows:
            click.echo("  (no answers kept)")
            return
        for row in rows:
            tokens = row["prompt_tokens"] + row["completion_tokens"]
            span = (
                f"{row['oldest']:%Y-%m-%d %H:%M} .. {row['newest']:%Y-%m-%d %H:%M} UTC"
                if row["oldest"] is not None
                else "-"
            )
            click.echo(
                f"  {printable(row['contract'])} / {printable(row['target'])}: "
                f"{row['distinct_keys']:,} answers ({row['answers']:,} rows) · {tokens:,} tokens"
                f" · {span}" + (f" · {row['journals']} journal(s)" if row["journals"] else "")
            )
        total = sum(row["distinct_keys"] for row in rows)
        click.echo(f"  total {total:,} answers in {len(rows)} partition(s)")


@cache_group.command("prune")
@_dir_option
@click.option("--older-than", "older_than", type=click.FloatRange(min=0.0), required=True,
              metavar="DAYS", help="Drop answers given more than DAYS days ago.")  # fmt: skip
def cache_prune(cache: str | None, older_than: float) -> None:
    """Drop old answers (and duplicate rows), a partition per transaction. Safe while runs
    use the cache; the space goes at the next `warehouse compact`."""
    with handled():
        from decguard_pipeline.warehouse.responses_upkeep import prune

        warehouse = _directory(cache)
        done = prune(
            warehouse,
            older_than_days=older_than,
            run_id=f"prune-{uuid.uuid4().hex[:12]}",
            events=_events(),
        )
        click.echo(
            f"pruned {warehouse.root}: {done.removed:,} rows dropped, {done.kept:,} kept"
            f" ({done.partitions} partition(s) pruned"
            + (f", {done.recovered:,} answers of killed runs committed first" if done.recovered
               else "")
            + ")"
        )  # fmt: skip

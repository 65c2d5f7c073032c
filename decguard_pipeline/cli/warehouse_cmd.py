"""``warehouse``: maintenance of the warehouse (registered on ``cli`` at import; see
app._register_commands)."""

from __future__ import annotations

import click

from decguard_pipeline.cli.errors import handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import warehouse_option


@cli.group("warehouse")
def warehouse_group() -> None:
    """Maintain the warehouse (docs/warehouse.md#compaction)."""


@warehouse_group.command("compact")
@warehouse_option("root")
@click.option(
    "--older-than-days",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Merge the writes at least this old (never a partition's newest).",
)
@click.option(
    "--keep-days",
    type=click.FloatRange(min=0),
    default=None,
    help="Also delete history older than this many days (off by default; never "
    "a partition's newest write, nor the targets and runs tables).",
)
@click.option(
    "--grace-seconds",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="How long the replaced files stay, for queries that started before the switch.",
)
@click.option("--dry-run", is_flag=True, default=False, help="Only print what would be merged.")
def compact_command(
    root: str | None,
    older_than_days: float,
    keep_days: float | None,
    grace_seconds: float,
    dry_run: bool,
) -> None:
    """Merge old writes of every table into one file per month, contract and target.

    Readers keep counting every row exactly once while it runs (the switch is a manifest
    that takes effect a few seconds after it is written); the files it replaced are deleted
    --grace-seconds later, and the command waits for that. Exit codes: 0 done, 2 an error
    (another compaction running, a bad setting)."""
    with handled():
        from decguard_pipeline.core.errors import DecGuardError
        from decguard_pipeline.warehouse import Warehouse
        from decguard_pipeline.warehouse.compaction import Settings, compact

        settings = Settings(
            older_than_days=older_than_days,
            keep_days=keep_days,
            grace_s=grace_seconds,
            dry_run=dry_run,
        )
        wh = Warehouse(root)
        if not wh.exists():
            raise DecGuardError(f"no warehouse at {wh.root}")
        result = compact(wh, settings, log=lambda line: click.echo(line, err=True))
        click.echo(result.render())
        if dry_run:
            click.echo(f"dry run: nothing changed in {wh.root}")

"""``warehouse``: maintenance of the warehouse (registered on ``cli`` at import; see
app._register_commands)."""

from __future__ import annotations

import click

from decguard_pipeline.cli.errors import handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import warehouse_option


@cli.group("warehouse")
def warehouse_group() -> None:
    """Maintain the warehouse (docs/warehouse.md)."""


@warehouse_group.command("compact")
@warehouse_option("root")
@click.option(
    "--keep-days",
    type=click.FloatRange(min=0),
    default=None,
    help="Also delete rows older than this many days (off by default; never a target's "
    "newest write, nor the targets and runs tables).",
)
@click.option(
    "--snapshot-days",
    type=click.FloatRange(min=0),
    default=7.0,
    show_default=True,
    help="Keep this many days of snapshots for time travel; older ones expire.",
)
@click.option("--dry-run", is_flag=True, default=False, help="Only print the files there are.")
def compact_command(
    root: str | None, keep_days: float | None, snapshot_days: float, dry_run: bool
) -> None:
    """Move small writes into files, merge small files, expire old snapshots and delete
    the files nothing reads any more (DuckLake's maintenance; readers and writers go on
    meanwhile). Exit codes: 0 done, 2 an error."""
    with handled():
        from decguard_pipeline.core.errors import DecGuardError
        from decguard_pipeline.warehouse import Warehouse
        from decguard_pipeline.warehouse.maintenance import Settings, compact

        settings = Settings(keep_days=keep_days, snapshot_days=snapshot_days, dry_run=dry_run)
        wh = Warehouse(root)
        if not wh.exists():
            raise DecGuardError(f"no warehouse at {wh.root}")
        result = compact(wh, settings, log=lambda line: click.echo(line, err=True))
        click.echo(result.render())
        if dry_run:
            click.echo(f"dry run: nothing changed in {wh.root}")


@warehouse_group.command("migrate")
@click.option(
    "--from",
    "source",
    default=None,
    help="The Parquet warehouse of an earlier version (default: the warehouse's own folder).",
)
@warehouse_option("root")
def migrate_command(source: str | None, root: str | None) -> None:
    """Copy a Parquet warehouse of an earlier version (tables as folders of files) into the
    warehouse, counting every table's rows before and after: all committed when every count
    is equal, nothing otherwise. Exit codes: 0 migrated, 2 counts differ or an error."""
    with handled():
        from decguard_pipeline.warehouse import Warehouse
        from decguard_pipeline.warehouse.locations import location
        from decguard_pipeline.warehouse.migrate import MOVED, migrate

        wh = Warehouse(root)
        old = location(source) if source else wh.root
        result = migrate(old, wh)
        click.echo(result.render())
        moved = f"; the old files are in {old}/{MOVED}" if source is None or old == wh.root else ""
        click.echo(f"migrated {old} into {wh.root}: every table's rows counted equal{moved}")


@warehouse_group.command("attach")
@warehouse_option("root")
@click.option(
    "--install",
    is_flag=True,
    default=False,
    help="Also install DuckDB's extensions from their wheels into DuckDB's extension "
    "folder (~/.duckdb/extensions), so a plain duckdb on this machine attaches it offline.",
)
def attach_command(root: str | None, install: bool) -> None:
    """Print the SQL that attaches the warehouse, read-only, in a plain DuckDB session:
    duckdb -cmd "$(decguard-pipeline warehouse attach)"."""
    with handled():
        from decguard_pipeline.warehouse import Warehouse
        from decguard_pipeline.warehouse.shell import attach_sql, install_extensions

        wh = Warehouse(root)
        if install:
            for line in install_extensions(wh):
                click.echo(f"installed {line}", err=True)
        click.echo(attach_sql(wh))

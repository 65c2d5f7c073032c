"""The pipeline's own commands: ``evaluate`` (the main job), ``ui`` and ``sql``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from decguard_pipeline.cli.app import cli
from decguard_pipeline.cli.errors import EXIT_ERROR, EXIT_GATE_FAILED, handled


@cli.command()
@click.option(
    "--contracts",
    default=None,
    help="Contract files or directories (os.pathsep-separated); default data/contracts "
    "or $DECGUARD_CONTRACTS.",
)
@click.option(
    "--backend",
    "-b",
    "backends",
    multiple=True,
    help="Evaluate only these backends (repeatable). Default: every usable backend.",
)
@click.option(
    "--warehouse",
    type=click.Path(path_type=Path),
    default=None,
    help="Warehouse directory (default data/warehouse or $DECGUARD_WAREHOUSE).",
)
@click.option(
    "--fail-on-gate",
    is_flag=True,
    default=False,
    help="Exit 1 when a requirement gate (regression and production gates included) fails.",
)
def evaluate(
    contracts: str | None, backends: tuple[str, ...], warehouse: Path | None, fail_on_gate: bool
) -> None:
    """Register every contract's current targets and materialise all their assets and checks
    through Dagster (persistent instance in $DAGSTER_HOME, default .dagster_home), then print
    a summary per contract and target."""
    with handled():
        if contracts is not None:
            os.environ["DECGUARD_CONTRACTS"] = contracts
        if warehouse is not None:
            os.environ["DECGUARD_WAREHOUSE"] = str(warehouse)
        from decguard_pipeline.defs.main_job import ensure_dagster_home

        home = ensure_dagster_home()
        import dagster as dg

        from decguard_pipeline.definitions import build_definitions
        from decguard_pipeline.defs.main_job import evaluate_all
        from decguard_pipeline.pipeline.contracts import discover_contracts
        from decguard_pipeline.pipeline.summary import (
            render_production,
            render_summary,
            summarise,
            summarise_production,
        )
        from decguard_pipeline.warehouse import Warehouse

        entries = discover_contracts()
        if not entries:
            raise click.ClickException("no contracts found")
        wh = Warehouse()
        defs = build_definitions(entries, warehouse_root=str(wh.root))
        with dg.DagsterInstance.get() as instance:
            result = evaluate_all(defs, entries, instance, wh, backends=list(backends) or None)
        rows = summarise(wh, result)
        days = summarise_production(wh, result)
        click.echo(render_summary(rows, result))
        if days:
            click.echo("\n" + render_production(days))
        click.echo(f"\nwarehouse {wh.root}  ·  dagster home {home}  ·  `make ui` to browse runs")
        if result.broken or any(not r["ran"] for r in [*rows, *days]):
            raise SystemExit(EXIT_ERROR)
        failing = [r for r in rows if r["status"] == "fail" or r["regression"].startswith("FAIL")]
        failing += [d for d in days if d["status"] == "fail"]
        if fail_on_gate and failing:
            raise SystemExit(EXIT_GATE_FAILED)


@cli.command()
@click.argument("query")
@click.option("--warehouse", type=click.Path(path_type=Path), default=None)
@click.option(
    "--format",
    "-f",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@click.option("--max-rows", type=click.IntRange(min=1), default=200, show_default=True)
def sql(query: str, warehouse: Path | None, fmt: str, max_rows: int) -> None:
    """Run a SQL query on the warehouse catalog (read-only) and print the result."""
    with handled():
        import duckdb

        from decguard_pipeline.core.errors import DecGuardError
        from decguard_pipeline.warehouse import Warehouse

        wh = Warehouse(warehouse)
        con = wh.open_catalog()
        try:
            relation = con.sql(query)
            if relation is None:
                return
            frame = relation.limit(max_rows).df() if fmt == "table" else relation.df()
        except duckdb.Error as exc:
            raise DecGuardError(f"query failed: {exc}") from exc
        finally:
            con.close()
        if fmt == "csv":
            frame.to_csv(sys.stdout, index=False)
        elif fmt == "json":
            click.echo(frame.to_json(orient="records", date_format="iso", indent=2))
        else:
            import pandas as pd

            with pd.option_context(
                "display.max_columns", None, "display.width", 200, "display.max_colwidth", 60
            ):
                click.echo(frame.to_string(index=False) if len(frame) else "(no rows)")


@cli.command()
@click.option("--port", "-p", default=3000, show_default=True)
def ui(port: int) -> None:
    """Open the Dagster UI (webserver and daemon) on workspace.yaml."""
    with handled():
        from decguard_pipeline.defs.main_job import ensure_dagster_home
        from decguard_pipeline.pipeline.contracts import project_root

        ensure_dagster_home()
        workspace = project_root() / "workspace.yaml"
        dagster = Path(sys.executable).with_name("dagster")
        os.execv(str(dagster), [str(dagster), "dev", "-w", str(workspace), "-p", str(port)])

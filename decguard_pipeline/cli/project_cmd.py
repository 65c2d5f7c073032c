"""The project's own commands, beyond DecGuard's: ``evaluate`` (the main job), ``ui``, ``sql``."""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click

from decguard_pipeline.cli.errors import EXIT_ERROR, EXIT_GATE_FAILED, EXIT_PASS, handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import contracts_option, warehouse_option


@cli.command()
@contracts_option()
@click.option(
    "--backend",
    "-b",
    "backends",
    multiple=True,
    help="Evaluate only these backends (repeatable). Default: every usable backend.",
)
@warehouse_option()
@click.option(
    "--workers",
    "-j",
    type=click.IntRange(min=1),
    envvar="DECGUARD_WORKERS",
    default=1,
    show_default=True,
    help="Evaluate this many targets at a time (or $DECGUARD_WORKERS), on Dagster's "
    "multiprocess executor; runs on one model server stay within the instance's per-server "
    "limit (run_queue.tag_concurrency_limits, default 1).",
)
@click.option(
    "--fail-on-gate",
    is_flag=True,
    default=False,
    help="Exit 1 when a requirement gate (regression and production gates included) fails.",
)
def evaluate(
    contracts: str | None,
    backends: tuple[str, ...],
    warehouse: str | None,
    workers: int,
    fail_on_gate: bool,
) -> None:
    """Register every contract's current targets and materialise all their assets and checks
    through Dagster (persistent instance in $DAGSTER_HOME, default .dagster_home), then print
    a summary per contract and target, read from the rows this evaluation wrote. A contract
    naming the bundled demo LLM server (${DECGUARD_DEMO_LLM_URL}, unset) gets one on a free
    loopback port for the evaluation.

    Exit codes: 0 every run completed (gates pass, warn or fail); 1 with --fail-on-gate when
    a requirement gate failed; 2 when a contract could not be evaluated or a run broke (a
    backend that failed on every case, a step error)."""
    with handled():
        if contracts is not None:
            os.environ["DECGUARD_CONTRACTS"] = contracts
        from decguard_pipeline.core.errors import DecGuardError
        from decguard_pipeline.steps.contracts import discover_contracts, project_root

        entries = discover_contracts()
        if not entries:
            where = os.environ.get("DECGUARD_CONTRACTS") or project_root() / "data" / "contracts"
            raise DecGuardError(
                f"no contracts found in {where} (give --contracts a decguard.yaml file or a "
                "folder of <name>/decguard.yaml; several separated by os.pathsep)"
            )
        from decguard_pipeline.demo.autostart import demo_server_for
        from decguard_pipeline.steps.pictures import picture_worker

        named = [e.loaded.contract for e in entries if e.loaded is not None]
        with ExitStack() as stack:
            # the demo LLM server, if a contract names it: a process of its own, which starts
            # while this one imports Dagster and serves from the other core
            stack.enter_context(demo_server_for(named, own_process=True))
            # the guard's pictures: a process that imports matplotlib meanwhile and draws them
            guarded = any(c.pipeline is not None and c.pipeline.guard for c in named)
            stack.enter_context(picture_worker(guarded and workers == 1))
            from decguard_pipeline.definitions import build_definitions
            from decguard_pipeline.defs import instance as instances
            from decguard_pipeline.defs.main_job import evaluate_all
            from decguard_pipeline.defs.sqlite_commits import cheaper_commits, release
            from decguard_pipeline.warehouse import Warehouse
            from decguard_pipeline.warehouse.migrate import left_behind

            # --warehouse, else $DECGUARD_WAREHOUSE, else data/warehouse (warehouse/store.py),
            # handed to the definitions and the executor's processes as this root
            wh = Warehouse(warehouse)
            if left_behind(wh.root):
                click.echo(
                    f"warning: {wh.root} holds results of the earlier Parquet layout that "
                    "this warehouse does not read: `decguard-pipeline warehouse migrate "
                    f"--warehouse {wh.root}` copies them in",
                    err=True,
                )
            cheaper_commits()  # this process's commits to a local instance (no fsync each)
            stack.callback(release)
            instance = stack.enter_context(instances.open_instance())
            home = f"{instance.root_directory} ({instances.storage_kind(instance)})"
            recovered = instances.fail_dead_runs(instance)
            if recovered:
                click.echo(
                    f"marked {len(recovered)} run(s) of a killed evaluation as failed: "
                    + ", ".join(recovered),
                    err=True,
                )
            defs = build_definitions(entries, warehouse_root=str(wh.root))
            result = evaluate_all(
                defs,
                entries,
                instance,
                wh,
                backends=list(backends) or None,
                workers=workers,
                contracts=os.environ.get("DECGUARD_CONTRACTS"),
                build=build_definitions,
            )
        raise SystemExit(_report(result, wh, home, fail_on_gate))


def _report(result: Any, wh: Any, home: str, fail_on_gate: bool) -> int:
    """Print the summary of ``evaluate``; its exit code."""
    from decguard_pipeline.steps.summary import (
        render_production,
        render_summary,
        summarise,
        summarise_production,
    )

    rows = summarise(wh, result)
    days = summarise_production(wh, result)
    click.echo(render_summary(rows, result))
    if days:
        click.echo("\n" + render_production(days))
    click.echo(f"\nwarehouse {wh.root}  ·  dagster home {home}  ·  `make ui` to browse runs")
    for row in rows:  # the response cache's troubles, which the runs survived
        for warning in row.get("cache_warnings") or ():
            click.echo(f"warning: {row['contract']}/{row['target']}: {warning}", err=True)
    errors = [(f"{r['contract']}/{r['target']}", r["error"]) for r in rows if not r["ran"]]
    errors += [(f"{d['contract']}/{d['day']}", d["error"]) for d in days if not d["ran"]]
    errors += list(result.broken)
    for where, error in errors:
        click.echo(f"error: {where}: {error}", err=True)
    if errors:
        return EXIT_ERROR
    failing = [r for r in rows if r["verdict"] == "fail"]
    failing += [d for d in days if d["status"] == "fail"]
    return EXIT_GATE_FAILED if fail_on_gate and failing else EXIT_PASS


@cli.command()
@click.argument("query")
@warehouse_option()
@click.option(
    "--format",
    "-f",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@click.option("--max-rows", type=click.IntRange(min=1), default=200, show_default=True)
def sql(query: str, warehouse: str | None, fmt: str, max_rows: int) -> None:
    """Run a read-only SQL query on the warehouse's views and print the result. Only queries
    run (SELECT, SHOW, DESCRIBE, EXPLAIN), and they reach no file outside the warehouse."""
    with handled():
        import tempfile

        import duckdb

        from decguard_pipeline.core.errors import DecGuardError
        from decguard_pipeline.warehouse import Warehouse
        from decguard_pipeline.warehouse.read_only import check_query, confine

        try:
            check_query(query)
        except duckdb.Error as exc:
            raise DecGuardError(f"query failed: {exc}") from exc
        wh = Warehouse(warehouse)
        with tempfile.TemporaryDirectory(prefix="decguard-sql-") as spill:
            try:
                with wh.read_only(query) as con:
                    confine(con, wh.root, Path(spill))
                    relation = con.sql(query)
                    frame = None
                    if relation is not None:
                        frame = relation.limit(max_rows).df() if fmt == "table" else relation.df()
            except duckdb.Error as exc:
                raise DecGuardError(f"query failed: {exc}") from exc
        if frame is None:
            return
        if fmt == "csv":
            frame.to_csv(sys.stdout, index=False)
        elif fmt == "json":
            click.echo(frame.to_json(orient="records", date_format="iso", indent=2))
        else:
            import pandas as pd

            from decguard_pipeline.core.formatting import printable

            with pd.option_context(
                "display.max_columns", None, "display.width", 200, "display.max_colwidth", 60
            ):
                text = frame.to_string(index=False) if len(frame) else "(no rows)"
            # cells hold what servers and datasets said: no escape sequence reaches the terminal
            click.echo(printable(text, lines=True))


# `dagster dev` warns that `dg dev` supersedes it; `ui` keeps `dagster dev` (dagster-dg-cli is a
# developer tool, not a runtime dependency) and filters just that warning in its processes.
QUIET_DEV = "ignore:Function `dev_command` is superseded:FutureWarning"


@cli.command()
@click.option("--port", "-p", default=3000, show_default=True)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
    help="What the webserver and daemon print.",
)
def ui(port: int, log_level: str) -> None:
    """Open the Dagster UI (webserver and daemon) on workspace.yaml, serve the warehouse's
    report files (HTML reports, diffs) read-only on localhost so the UI's links open them, and
    serve the evaluation site (built from the warehouse, rebuilt when it changes). A contract
    naming the bundled demo LLM server (${DECGUARD_DEMO_LLM_URL}, unset) gets one on a free
    loopback port while the UI runs, as with `evaluate`."""
    with handled():
        import shutil
        import subprocess
        import tempfile

        from decguard_pipeline.cli.report_server import serve_reports
        from decguard_pipeline.cli.site_server import serve_site
        from decguard_pipeline.defs.instance import fail_dead_runs, open_instance
        from decguard_pipeline.defs.report_links import FOLDER, REPORTS_PORT, REPORTS_URL
        from decguard_pipeline.defs.site_links import SITE_PORT, SITE_URL
        from decguard_pipeline.demo.autostart import demo_server_for
        from decguard_pipeline.steps.contracts import project_root
        from decguard_pipeline.steps.site.live import LiveSite
        from decguard_pipeline.warehouse import Warehouse

        with open_instance() as instance:  # runs of a killed `evaluate` must not fill the queue
            fail_dead_runs(instance)
        server = None
        if REPORTS_URL not in os.environ:  # else the deployment serves the files itself
            try:
                server = serve_reports(Warehouse().root / FOLDER, REPORTS_PORT)
                click.echo(f"report files on http://localhost:{REPORTS_PORT}/", err=True)
            except OSError as exc:
                click.echo(f"report files not served (port {REPORTS_PORT}: {exc})", err=True)
        site, site_folder = None, None
        if SITE_URL not in os.environ:  # else the deployment serves a built site itself
            site_folder = Path(tempfile.mkdtemp(prefix="decguard-site-"))
            try:
                site = serve_site(LiveSite(Warehouse(), site_folder), SITE_PORT)
                click.echo(f"evaluation site on http://localhost:{SITE_PORT}/", err=True)
            except OSError as exc:
                click.echo(f"evaluation site not served (port {SITE_PORT}: {exc})", err=True)
        workspace = project_root() / "workspace.yaml"
        dagster = Path(sys.executable).with_name("dagster")
        warnings = ",".join(w for w in (os.environ.get("PYTHONWARNINGS"), QUIET_DEV) if w)
        command = [str(dagster), "dev", "-w", str(workspace), "-p", str(port)]
        command += ["--log-level", log_level]
        # the demo LLM server, as `evaluate` starts it: the code server, the sensor and the
        # runs the UI launches inherit its address (without it they could not reach it)
        demo = ExitStack()
        url = demo.enter_context(demo_server_for(_contracts(), own_process=True))
        if url is not None:
            click.echo(f"demo LLM server on {url}/", err=True)
        try:
            child = subprocess.Popen(command, env={**os.environ, "PYTHONWARNINGS": warnings})
            try:
                code = child.wait()
            except KeyboardInterrupt:  # Ctrl-C reached dagster dev too: let it shut down
                code = child.wait()
        finally:
            demo.close()
            if server is not None:
                server.shutdown()
            if site is not None:
                site.shutdown()
            if site_folder is not None:
                shutil.rmtree(site_folder, ignore_errors=True)
        raise SystemExit(code)


def _contracts() -> list[Any]:
    """The contracts the UI shows (a broken one is the UI's to report, not ours)."""
    from decguard_pipeline.steps.contracts import discover_contracts

    return [e.loaded.contract for e in discover_contracts() if e.loaded is not None]

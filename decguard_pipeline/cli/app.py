"""Command definitions. Heavy modules are imported inside commands so ``--help`` is instant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from decguard_pipeline.cli.errors import EXIT_GATE_FAILED, handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import (
    PathArg,
    argument,
    backend_option,
    cache_options,
    calibrator_option,
    concurrency_option,
    contract_argument,
    dataset_option,
    fail_on_warn_option,
    format_option,
    fuzz_options,
    healthcheck_option,
    html_option,
    output_option,
    run_dir_option,
)
from decguard_pipeline.core.product import PROGRAM


def emit_report(
    report: Any,
    fmt: str,
    output: Path | None,
    fail_on_warn: bool,
    guarded: Any = None,
    *,
    html: Path | None = None,
    sidecar: dict[str, Any] | None = None,
    run_dir: tuple[Path, Any] | None = None,
) -> None:
    """Write/print a test/fuzz report and exit with its gate status. ``guarded`` (a
    core.guard.evaluation.GuardedRun) adds the sidecar, pictures and text sections after DecGuard's.
    ``html`` also writes the HTML page (with ``sidecar``, else the sidecar sections of this
    run); nothing else changes with it. ``run_dir``: a Guard Eval Harness run
    (core.guard.eval_harness.HarnessRun) and its directory, written after the report files."""
    from decguard_pipeline.core.report.golden import CHUNKED_LISTS, result_records
    from decguard_pipeline.core.report.jsonio import print_document, write_document
    from decguard_pipeline.core.report.run_text import render_run
    from decguard_pipeline.core.verdict import decide, run_checks

    # the one verdict of the run: what the text ends with, the page shows and the exit says
    verdict = decide(run_checks(report, guarded))

    if output is not None:
        write_document(
            output, report.document, stream_key="results",
            items=lambda: result_records(report.results), chunked=CHUNKED_LISTS,
        )  # fmt: skip
        click.echo(f"report written to {output}", err=True)
        if guarded is not None:  # the pictures and the sidecar next to the report
            for path in guarded.write_files(output.parent, output.stem, report=output.name):
                click.echo(f"pipeline results written to {path}", err=True)
        if report.extensions:  # after the guard's sidecar: sections are merged into it
            from decguard_pipeline.core.report.sidecar import write_sections

            write_sections(output, report)
        if report.products:  # a fitted calibrator and its sweep's picture next to the report
            from decguard_pipeline.runs.calibrator import write_products

            for path in write_products(report, output):
                click.echo(f"calibrator results written to {path}", err=True)
    if html is not None:
        from decguard_pipeline.core.report.html import write_report_html
        from decguard_pipeline.core.report.run_text import extension_gated

        # the page shows the pipeline's verdict when gates of ours judge the run too
        page_verdict = verdict if extension_gated(report, guarded) else None
        if sidecar is None:
            sidecar = run_sidecar(report, guarded, output)
        source = output.name if output is not None else ""
        write_report_html(html, report, sidecar, source=source, verdict=page_verdict)
        click.echo(f"HTML report written to {html}", err=True)
    if run_dir is not None:
        directory, harness = run_dir
        harness.write(directory)
        click.echo(f"Guard Eval Harness run written to {directory}", err=True)
    if fmt == "json":
        print_document(report.document, stream_key="results", items=result_records(report.results))
    else:  # DecGuard's layout, our sections, then the verdict over every gate
        click.echo(render_run(report, verdict, guarded))
    from decguard_pipeline.cli.process_exit import leave_to_exit

    leave_to_exit(report, guarded)  # freed by the operating system, all at once
    _exit_for(verdict.status, fail_on_warn)


def harness_of(loaded: Any, config: Any, report: Any, guarded: Any, dataset: Path | None) -> Any:
    """The Guard Eval Harness run of this run (``--run-dir``), for the target the pipeline
    would name."""
    from decguard_pipeline.core.target_key import target_key
    from decguard_pipeline.runs.guard import harness_files

    backend = report.document["backend"]
    target = target_key(backend["name"], backend["model_version"], backend["model"])
    return harness_files(loaded, config, report, guarded, target=target, dataset=dataset)


def run_sidecar(report: Any, guarded: Any, output: Path | None) -> dict[str, Any] | None:
    """The sidecar document of this run as ``-o`` writes it (guard document, then the
    report's extension sections merged in), built in memory so ``--html`` works without -o."""
    document: dict[str, Any] = {}
    if guarded is not None:
        document = guarded.document(output.name if output is not None else None)
    document.update(report.extensions)
    return document or None


def _exit_for(status: str, fail_on_warn: bool) -> None:
    if status == "fail" or (fail_on_warn and status == "warn"):
        raise SystemExit(EXIT_GATE_FAILED)


@cli.command()
@contract_argument
@dataset_option
def validate(contract: Path, dataset: Path | None) -> None:
    """Check a contract, its backend settings and its dataset (offline)."""
    with handled():
        from decguard_pipeline.cli.validate import validate_text

        click.echo(validate_text(contract, dataset))


def _run(
    mode: str, contract: Path, dataset: Path | None, backend: str | None, output: Path | None,
    fmt: str, max_concurrency: int | None, fail_on_warn: bool, healthcheck: bool,
    seed: int | None, properties: tuple[str, ...], minimize: bool | None,
    suite: str | None = None, html: Path | None = None, cache: str | None = None,
    no_cache: bool = False, retry_errors: Path | None = None, run_dir: Path | None = None,
    calibrator: Path | None = None,
) -> None:  # fmt: skip
    with handled():
        import gc

        # the modules a run needs, imported with the collector paused (hundreds of thousands
        # of long-lived objects: collections during the imports would only walk them), then
        # handed straight to the oldest generation (core.collector.gc_paused(settle=True),
        # written out here: importing it is part of what is paused)
        collecting = gc.isenabled()
        gc.disable()
        try:
            from decguard_pipeline.runs.guard import run_guarded_test

            if mode != "test":
                import decguard_pipeline.runs.properties.run  # noqa: F401
        finally:
            if collecting:
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()
        import os

        from decguard_pipeline.core.contract import load_contract
        from decguard_pipeline.demo.autostart import demo_server_for

        options = None
        if cache or retry_errors or (os.environ.get("DECGUARD_CACHE") and not no_cache):
            from decguard_pipeline.cli.cache_cmd import run_cache_options

            options = run_cache_options(
                contract, cache=cache, no_cache=no_cache, retry_errors=retry_errors,
                backend=backend, suite=suite, dataset=dataset,
            )  # fmt: skip
        loaded = load_contract(contract) if options is None else options.loaded
        harness = None
        if run_dir is not None:  # a contract that cannot name its positive label fails now
            from decguard_pipeline.runs.guard import harness_config

            harness = harness_config(loaded)
        applied = None
        if mode != "fuzz":  # fuzz compares the model's own answers
            from decguard_pipeline.runs.calibrator import calibrator_for

            applied = calibrator_for(loaded, calibrator)
        with demo_server_for([loaded.contract]):  # when the contract names the demo server
            report, guarded = run_guarded_test(
                loaded,
                suite=suite,
                dataset=dataset,
                backend=backend,
                max_concurrency=max_concurrency,
                check_health_first=healthcheck,
                mode=mode,
                seed=seed,
                properties=list(properties) or None,
                minimize=minimize,
                cache=None if options is None else options.cache,
                calibrator=applied,
            )
        if options is not None:  # the sidecar section and the text block
            report.extensions["cache"] = options.cache.stats.section()
        written = None
        if run_dir is not None:
            written = (run_dir, harness_of(loaded, harness, report, guarded, dataset))
        emit_report(report, fmt, output, fail_on_warn, guarded, html=html, run_dir=written)


@cli.command("test")
@contract_argument
@dataset_option
@backend_option
@output_option
@format_option
@concurrency_option
@fail_on_warn_option
@healthcheck_option
@click.option("--all", "all_checks", is_flag=True, default=False,
              help="Also check the contract's metamorphic properties (fuzz).")  # fmt: skip
@fuzz_options
@click.option("--suite", default=None,
              help="Only this suite of the contract's pipeline.suites (default: all).")  # fmt: skip
@html_option
@cache_options
@run_dir_option
@calibrator_option
def test_command(
    contract: Path, dataset: Path | None, backend: str | None, output: Path | None, fmt: str,
    max_concurrency: int | None, fail_on_warn: bool, healthcheck: bool, all_checks: bool,
    seed: int | None, properties: tuple[str, ...], minimize: bool | None, suite: str | None,
    html: Path | None, cache: str | None, no_cache: bool, retry_errors: Path | None,
    run_dir: Path | None,
    calibrator: Path | None,
) -> None:  # fmt: skip
    """Run the golden dataset through a backend and check the contract's gates."""
    _run("all" if all_checks else "test", contract, dataset, backend, output, fmt,
         max_concurrency, fail_on_warn, healthcheck, seed, properties, minimize, suite,
         html, cache, no_cache, retry_errors, run_dir, calibrator)  # fmt: skip


@cli.command()
@contract_argument
@dataset_option
@backend_option
@fuzz_options
@output_option
@format_option
@concurrency_option
@fail_on_warn_option
@healthcheck_option
@html_option
@cache_options
@run_dir_option
def fuzz(
    contract: Path, dataset: Path | None, backend: str | None, seed: int | None,
    properties: tuple[str, ...], minimize: bool | None, output: Path | None, fmt: str,
    max_concurrency: int | None, fail_on_warn: bool, healthcheck: bool, html: Path | None,
    cache: str | None, no_cache: bool, retry_errors: Path | None, run_dir: Path | None,
) -> None:  # fmt: skip
    """Check the contract's metamorphic properties: every case is changed in controlled
    ways (option order, formatting, irrelevant context, paraphrases, ...) and the decision
    distributions before and after are compared. The same seed gives the same run."""
    _run("fuzz", contract, dataset, backend, output, fmt, max_concurrency, fail_on_warn,
         healthcheck, seed, properties, minimize, html=html, cache=cache, no_cache=no_cache,
         retry_errors=retry_errors, run_dir=run_dir)  # fmt: skip


@cli.command()
@argument("results", "A JSON report written by `decguard-pipeline test --output`.", type=PathArg)
@click.option("--contract", "-c", type=PathArg, default=None,
              help="Re-evaluate the stored results against this contract's gates.")  # fmt: skip
@output_option
@format_option
@fail_on_warn_option
@html_option
def report(
    results: Path,
    contract: Path | None,
    output: Path | None,
    fmt: str,
    fail_on_warn: bool,
    html: Path | None,
) -> None:
    """Show (and verify) a stored report; exits with the report's gate status."""
    with handled():
        from decguard_pipeline.core.collector import gc_paused
        from decguard_pipeline.core.json_limits import ReadAhead

        read_ahead = ReadAhead(results, "report")  # while the modules below are imported
        with gc_paused(settle=True):
            # a big report's later pairs go to a forked child before anything of the
            # verifier's is imported: the child decodes meanwhile
            from decguard_pipeline.core.report.halves import split_ahead

            ahead = split_ahead(read_ahead)
            # verified without pydantic when it is split and plainly holds
            from decguard_pipeline.core.report.struct_verify import load_ahead

            stored = load_ahead(results, read_ahead, ahead)
        from decguard_pipeline.cli.process_exit import end_at_once, leave_to_exit

        leave_to_exit(stored)  # a big report's typed pairs: freed with the process
        end_at_once()
        sidecar = None
        if contract is not None:
            from decguard_pipeline.core.contract import load_contract
            from decguard_pipeline.core.report.reevaluate import reevaluate

            stored = reevaluate(stored, load_contract(contract))
        elif html is not None:
            # the stored run's extension results, when its sidecar is next to it
            from decguard_pipeline.core.report.html import read_sidecar

            sidecar = read_sidecar(results, stored)
        emit_report(stored, fmt, output, fail_on_warn, html=html, sidecar=sidecar or {})


def _register_commands() -> None:
    """Commands defined in their own modules (each decorates ``cli`` on import)."""
    from decguard_pipeline.cli import (  # noqa: F401
        cache_cmd,
        calibrate_cmd,
        check_cmd,
        diff_cmd,
        list_cmd,
        project_cmd,
        replay_cmd,
        run_cmd,
        site_cmd,
        warehouse_cmd,
    )


_register_commands()


def main() -> None:
    # Before numpy is imported: one OpenBLAS thread. A command does no linear algebra big
    # enough for a pool, and starting one (its threads spin while idle) cost 0.1-0.15 s of
    # wall time per start on a 2-CPU machine, more than a 3,000-case run's properties; the
    # bootstrap's matrix products measured no slower. An explicit setting is kept.
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Before pydantic builds a model: no search for pydantic plugins, which reads the metadata
    # of every installed distribution (50-90 ms of each command's start in this project's
    # environment of ~180 of them). An explicit setting is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from decguard_pipeline.cli.process_exit import ended, skip_at_exit
    from decguard_pipeline.defs.huge_pages import no_huge_pages

    skip_at_exit()
    no_huge_pages()  # before the allocators map memory: 4 KiB pages zeroed as touched
    try:
        cli(prog_name=PROGRAM)
    except SystemExit as exc:
        ended(0 if exc.code is None else exc.code)
        raise

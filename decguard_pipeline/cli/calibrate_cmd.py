"""``decguard-pipeline calibrate``: fit a calibrator on a calibration split of the golden set,
show it on the held-out cases and write ``calibrator.json``. Registered on ``cli`` at import
(see app._register_commands)."""

from __future__ import annotations

from pathlib import Path

import click

from decguard_pipeline.cli.errors import handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import (
    PathArg,
    backend_option,
    cache_options,
    concurrency_option,
    contract_argument,
    dataset_option,
    format_option,
    healthcheck_option,
)

METHODS = ("auto", "temperature", "vector", "isotonic", "histogram")


@cli.command("calibrate")
@contract_argument
@backend_option
@dataset_option
@click.option("--output", "-o", type=PathArg, default=None, metavar="FILE",
              help="Write the fitted calibrator to this calibrator.json.")  # fmt: skip
@click.option("--method", "-m", type=click.Choice(METHODS), default=None,
              help="Calibration method (default: pipeline.calibration.method, else auto: "
              "the lowest cross-validated NLL on the calibration cases).")  # fmt: skip
@format_option
@concurrency_option
@healthcheck_option
@cache_options
def calibrate_command(
    contract: Path, backend: str | None, dataset: Path | None, output: Path | None,
    method: str | None, fmt: str, max_concurrency: int | None, healthcheck: bool,
    cache: str | None, no_cache: bool, retry_errors: Path | None,
) -> None:  # fmt: skip
    """Fit a calibrator on a calibration split of the golden set and judge it on the rest.

    The golden set is run through the backend; the calibrator is fitted on the contract's
    pipeline.calibration.split (default: half of the cases, stratified by expected label,
    seed 0) and the numbers before and after are measured on the held-out cases, with a
    paired bootstrap interval of each change. Exit 0 when a calibrator was fitted, 2 when
    none could be."""
    with handled():
        import os

        from decguard_pipeline.core.calibration.fitting import SECTION
        from decguard_pipeline.core.calibration.render_calibrator import render_calibrator
        from decguard_pipeline.core.contract import load_contract
        from decguard_pipeline.core.report.jsonio import print_document
        from decguard_pipeline.demo.autostart import demo_server_for
        from decguard_pipeline.runs.calibrator import DOCUMENT, write_calibrator, write_picture
        from decguard_pipeline.runs.golden import run_test

        options = None
        if cache or retry_errors or (os.environ.get("DECGUARD_CACHE") and not no_cache):
            from decguard_pipeline.cli.cache_cmd import run_cache_options

            options = run_cache_options(
                contract, cache=cache, no_cache=no_cache, retry_errors=retry_errors,
                backend=backend, suite=None, dataset=dataset,
            )  # fmt: skip
        loaded = load_contract(contract) if options is None else options.loaded
        with demo_server_for([loaded.contract]):
            report = run_test(
                loaded,
                dataset=dataset,
                backend=backend,
                max_concurrency=max_concurrency,
                check_health_first=healthcheck,
                cache=None if options is None else options.cache,
                fit_method=method or "",
            )
        section = report.extensions[SECTION]
        if output is not None:
            write_calibrator(output, report.products[DOCUMENT])
            click.echo(f"calibrator written to {output}", err=True)
            picture = write_picture(section, output.with_name(f"{output.stem}.escalation.png"))
            click.echo(f"escalation sweep drawn in {picture}", err=True)
        if fmt == "json":
            print_document(section)
        else:
            click.echo(render_calibrator(section, list(loaded.contract.labels)))

"""``decguard-pipeline check``: production records against post-deployment gates (DecGuard's
``check``). Registered on ``cli`` at import (see app._register_commands)."""

from __future__ import annotations

from pathlib import Path

import click

from decguard_pipeline.cli.errors import EXIT_GATE_FAILED, handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import (
    PathArg,
    calibrator_option,
    contract_argument,
    fail_on_warn_option,
    format_option,
    output_option,
)


@cli.command("check")
@contract_argument
@click.option("--dataset", "-d", type=PathArg, required=True,
              help="Collected production records (.jsonl/.json).")  # fmt: skip
@click.option("--baseline", type=PathArg, default=None,
              help="Baseline production dataset or a previous `decguard-pipeline check` "
              "JSON report.")  # fmt: skip
@output_option
@format_option
@fail_on_warn_option
@calibrator_option
def check_command(
    contract: Path,
    dataset: Path,
    baseline: Path | None,
    output: Path | None,
    fmt: str,
    fail_on_warn: bool,
    calibrator: Path | None,
) -> None:
    """Analyze collected production decisions offline and apply post-deployment gates."""
    with handled():
        from decguard_pipeline.core.contract import load_contract
        from decguard_pipeline.core.production.check import run_check
        from decguard_pipeline.core.production.extensions import settings_of
        from decguard_pipeline.core.production.render import render_check, render_extensions
        from decguard_pipeline.core.report.jsonio import write_document
        from decguard_pipeline.core.report.sidecar import sidecar_path

        loaded = load_contract(contract)
        from decguard_pipeline.runs.calibrator import calibrator_for

        applied = calibrator_for(loaded, calibrator)
        if output is None:
            report = run_check(loaded, dataset=dataset, baseline=baseline, calibrator=applied)
        else:  # the report's records assembled column-wise, as the pipeline writes a day's
            from decguard_pipeline.steps.production.report_file import check_to_file

            report = check_to_file(loaded, dataset, baseline, output, applied)
        calibrated = (report.extensions or {}).get("calibrated")
        extended = settings_of(loaded) is not None and report.extensions is not None
        extended = extended or calibrated is not None
        if output is not None:
            click.echo(f"production report written to {output}", err=True)
            if extended:
                sidecar = sidecar_path(output)
                write_document(sidecar, {**report.extensions, "report": str(output)},
                               what="pipeline results")  # fmt: skip
                click.echo(f"pipeline results written to {sidecar}", err=True)
        if fmt == "json":
            report.print_json()
        else:
            click.echo(render_check(report.document))
            if extended and settings_of(loaded) is not None:
                click.echo("\n" + render_extensions(report.extensions))
            if calibrated is not None:
                from decguard_pipeline.core.production.calibrated import render_calibrated_check

                click.echo("\n" + render_calibrated_check(calibrated))
        if report.status == "fail" or (fail_on_warn and report.status == "warn"):
            raise SystemExit(EXIT_GATE_FAILED)

"""Commands of this module are registered on ``cli`` at import (see app._register_commands)."""

from __future__ import annotations

from pathlib import Path

import click

from decguard_pipeline.cli.errors import EXIT_GATE_FAILED, handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import (
    PathArg,
    argument,
    fail_on_warn_option,
    format_option,
    html_option,
)


@cli.command()
@argument("baseline", "The baseline JSON report (the model in use, say).", type=PathArg)
@argument("candidate", "The candidate JSON report (a new model, say).", type=PathArg)
@click.option("--contract", "-c", type=PathArg, default=None,
              help="Apply this contract's regression gates, evaluation, statistics.")  # fmt: skip
@click.option("--segment-by", "-s", "segment_by", multiple=True,
              help="Case metadata key to segment by (repeatable).")  # fmt: skip
@click.option("--output", "-o", type=PathArg, default=None,
              help="Also write the JSON diff to this file.")  # fmt: skip
@format_option
@fail_on_warn_option
@html_option
def diff(
    baseline: Path,
    candidate: Path,
    contract: Path | None,
    segment_by: tuple[str, ...],
    output: Path | None,
    fmt: str,
    fail_on_warn: bool,
    html: Path | None,
) -> None:
    """Compare two reports of the same decision: answer flips, confidence and distribution
    shifts, metric changes, new errors, per-segment changes. Exits 1 when a regression gate
    is violated (new errors always count).

    With the contract's ``pipeline.statistics`` section, also intervals, McNemar's test and
    significance-aware gates (written to ``<output stem>.pipeline.json`` and printed after
    the summary); with its calibration measures, whether the candidate got less honest or
    less able to tell cases apart (the same sidecar, section ``calibration``)."""
    with handled():
        # the baseline's load starts first, in a child, while this process imports the rest
        from decguard_pipeline.core.report.load_both import ChildLoad

        baseline_load = ChildLoad(baseline)
        from decguard_pipeline.core.diff import (
            load_and_diff,
            render_diff,
            render_statistics,
            sidecar_path,
        )
        from decguard_pipeline.core.diff.calibration import diff_sidecar, render_calibration_shift
        from decguard_pipeline.core.report.jsonio import print_document, write_document

        result = load_and_diff(
            baseline,
            candidate,
            contract=contract,
            segment_by=list(segment_by) or None,
            baseline_load=baseline_load,
        )
        if output is not None:
            write_document(output, result.document, what="diff")
            click.echo(f"diff written to {output}", err=True)
            sidecar = diff_sidecar(result)  # statistics and/or the calibration comparison
            if sidecar is not None:
                extra = sidecar_path(output)
                write_document(extra, sidecar, what="statistics")
                click.echo(f"statistics written to {extra}", err=True)
        if html is not None:
            from decguard_pipeline.core.diff.html import write_diff_html

            write_diff_html(
                html,
                result.document,
                result.statistics,
                flip_matrix=result.flips(),
                source=output.name if output is not None else "",
            )
            click.echo(f"HTML report written to {html}", err=True)
        if fmt == "json":
            print_document(result.document)
        else:
            text = render_diff(result.document)
            if result.statistics is not None:
                text += "\n\n" + render_statistics(result.statistics)
            if result.calibration is not None:
                text += "\n\n" + render_calibration_shift(result.calibration)
            click.echo(text)
        status = result.status
        from decguard_pipeline.cli.process_exit import end_at_once, leave_to_exit

        leave_to_exit(result)  # both runs' columns, freed with the process all at once
        end_at_once()
        if status == "fail" or (fail_on_warn and status == "warn"):
            raise SystemExit(EXIT_GATE_FAILED)

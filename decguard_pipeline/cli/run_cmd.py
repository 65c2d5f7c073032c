"""``decguard-pipeline run``: one live decision routed by the contract's policy (DecGuard's
``run``). Registered on ``cli`` at import (see app._register_commands)."""

from __future__ import annotations

from pathlib import Path

import click

from decguard_pipeline.cli.errors import handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import (
    argument,
    backend_option,
    calibrator_option,
    contract_argument,
    format_option,
    healthcheck_option,
)


@cli.command("run")
@contract_argument
@argument("input_value", "The input: text, or a JSON object with --input-json.", metavar="INPUT")
@backend_option
@click.option("--input-json", is_flag=True, default=False,
              help="Parse INPUT as a JSON object.")  # fmt: skip
@click.option("--id", "case_id", default="runtime", show_default=True,
              help="Decision/correlation id.")  # fmt: skip
@format_option
@healthcheck_option
@calibrator_option
def run_command(
    contract: Path,
    input_value: str,
    backend: str | None,
    input_json: bool,
    case_id: str,
    fmt: str,
    healthcheck: bool,
    calibrator: Path | None,
) -> None:
    """Make one decision and apply the contract's deterministic runtime policy.

    Exit 0 whatever the action; 2 when there is no policy, the backend fails or the
    calibrator is for another model version."""
    with handled():
        import json

        from decguard_pipeline.core.errors import DecGuardError
        from decguard_pipeline.core.policy import render_decision
        from decguard_pipeline.sdk import DecGuard

        value: str | dict[str, object] = input_value
        if input_json:
            try:
                parsed = json.loads(input_value)
            except ValueError as exc:
                raise DecGuardError(f"--input-json is not valid JSON: {exc}") from exc
            if not isinstance(parsed, dict):
                raise DecGuardError("--input-json must decode to a JSON object")
            value = parsed
        with DecGuard.from_contract(
            contract, backend=backend, check_health=healthcheck, calibrator=calibrator
        ) as guard:
            decision = guard.decide(value, case_id=case_id)
        if fmt == "json":
            click.echo(decision.model_dump_json(indent=2))
        else:
            click.echo(render_decision(decision.model_dump()))

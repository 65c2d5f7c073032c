"""``replay``: re-send stored property failures and check whether they still fail.

Commands of this module are registered on ``cli`` at import (see app._register_commands).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from decguard_pipeline.cli.errors import EXIT_GATE_FAILED, handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import PathArg, argument, backend_option, format_option

_REGENERATED = {True: "yes", False: "NO", None: "n/a (stored text used)"}


def _example_lines(example: dict[str, Any]) -> list[str]:
    from decguard_pipeline.core.report.render import describe_example

    lines = [
        f"    {example['kind']}: {describe_example(example['presentation'], example['input'])}"
    ]
    error, stored_error = example["error"], example["stored_error"]
    if error is not None:
        if stored_error is not None and error["kind"] != stored_error["kind"]:
            changed = f"{stored_error['kind']} -> {error['kind']}"
            lines.append(f"      error changed: {changed}: {error['message']}")
        else:
            lines.append(f"      error: {error['kind']}: {error['message']}")
    elif stored_error is not None:
        lines.append(f"      holds now (stored error: {stored_error['kind']})")
    elif example["violations"]:
        lines.append(f"      {'; '.join(example['violations'])}")
    else:
        lines.append("      holds now")
    return lines


def render_replay(doc: dict[str, Any]) -> str:
    """DecGuard's replay summary, line for line."""
    backend = doc["backend"]
    outcomes = doc["outcomes"]
    lines = [
        f"DecGuard {doc['decguard_version']} · replay {doc['source']} · {len(outcomes)} case(s)",
        f"  backend   {backend['name']}: {backend['provider']}",
        f"  contract  {doc['contract_path']}"
        + ("  (changed since the report was made)" if doc["contract_changed"] else ""),
    ]
    if not outcomes:
        lines += ["", "Nothing to replay: the report has no property failures."]
    for outcome in outcomes:
        state = "REPRODUCED" if outcome["reproduced"] else "not reproduced"
        regenerated = _REGENERATED[outcome["regenerated"]]
        lines += ["", f"  {outcome['id']}: {state} · regenerated from seed: {regenerated}"]
        if outcome["original_error"] is not None:
            lines.append(f"    original errored: {outcome['original_error']['message']}")
        for example in outcome["examples"]:
            lines += _example_lines(example)
    verdict = "FAIL: at least one failure reproduced" if doc["status"] == "fail" else None
    lines += ["", verdict or "PASS: no failure reproduced"]
    return "\n".join(lines)


@cli.command()
@argument("results", "A JSON report written by `decguard-pipeline fuzz --output`.", type=PathArg)
@click.option("--id", "ids", multiple=True,
              help="Transformed case to replay, as '<property>/<case id>/<sample>' "
              "(repeatable). Default: every failure in the report.")  # fmt: skip
@click.option("--contract", "-c", type=PathArg, default=None,
              help="Contract to use (default: the report's).")  # fmt: skip
@backend_option
@format_option
def replay(results: Path, ids: tuple[str, ...], contract: Path | None, backend: str | None,
           fmt: str) -> None:  # fmt: skip
    """Re-send stored property failures to the backend and check whether they still fail.
    Exits 1 when a failure reproduces, 0 when none does."""
    with handled():
        from decguard_pipeline.core.report.jsonio import print_document
        from decguard_pipeline.runs.properties.replay import replay as replay_failures

        doc = replay_failures(results, ids=list(ids) or None, contract=contract, backend=backend)
        if fmt == "json":
            print_document(doc)
        else:
            click.echo(render_replay(doc))
        if doc["status"] == "fail":
            raise SystemExit(EXIT_GATE_FAILED)

"""``list``: what the pipeline knows about (registered on ``cli`` at import; see
app._register_commands)."""

from __future__ import annotations

import click

from decguard_pipeline.cli.errors import handled
from decguard_pipeline.cli.group import cli

SOURCES = {
    "decguard": 'DecGuard 0.1 metrics (report "metrics" section)',
    "pipeline": "Pipeline metrics (sidecar <report>.pipeline.json, contract section pipeline.*)",
    "geh": "Guard Eval Harness metrics (test/fuzz --run-dir: datasets/<suite>/metrics.json, "
    "as `geh list metrics`)",
}


@cli.group("list")
def list_group() -> None:
    """List what the pipeline knows about."""


@list_group.command("metrics")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")  # fmt: skip
def list_metrics(fmt: str) -> None:
    """Every metric (DecGuard's and the pipeline's) with its definition."""
    with handled():
        from dataclasses import asdict

        from decguard_pipeline.core.metric_catalog import CATALOG
        from decguard_pipeline.core.report.jsonio import dumps

        if fmt == "json":
            click.echo(dumps([asdict(m) for m in CATALOG]))
            return
        width = max(len(m.name) for m in CATALOG)
        blocks = []
        for source, title in SOURCES.items():
            rows = [
                f"  {m.name:<{width}}  {m.definition}  [{m.where}]"
                for m in CATALOG
                if m.source == source
            ]
            blocks.append("\n".join([title, *rows]))
        click.echo("\n\n".join(blocks))

"""``site``: the evaluation site, static pages generated from the warehouse (registered on
``cli`` at import; see app._register_commands). ``ui`` serves the same pages."""

from __future__ import annotations

import os
from pathlib import Path

import click

from decguard_pipeline.cli.errors import handled
from decguard_pipeline.cli.group import cli
from decguard_pipeline.cli.options import contracts_option, warehouse_option


@cli.group("site")
def site_group() -> None:
    """The evaluation site: every contract, version, comparison and production day as static
    pages (docs/ui.md)."""


@site_group.command("build")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@warehouse_option()
@contracts_option(", for comparisons and LLM requests")
def build_command(directory: Path, warehouse: str | None, contracts: str | None) -> None:
    """Write the site into DIRECTORY (new, empty, or a site built before): open
    DIRECTORY/index.html in a browser, offline. Exit codes: 0 written, 2 an error (no
    warehouse, a folder of other files)."""
    with handled():
        from decguard_pipeline.core.errors import DecGuardError
        from decguard_pipeline.steps.site.build import build_site
        from decguard_pipeline.warehouse import Warehouse

        if contracts is not None:
            os.environ["DECGUARD_CONTRACTS"] = contracts
        wh = Warehouse(warehouse)
        if not wh.exists():
            raise DecGuardError(f"no warehouse at {wh.root} (run `decguard-pipeline evaluate`)")
        built = build_site(wh, directory)
        for note in built.notes:
            click.echo(f"note: {note}", err=True)
        click.echo(
            f"{len(built.pages)} pages written to {directory} in {built.seconds:.1f} s: "
            f"open {directory / 'index.html'}"
        )

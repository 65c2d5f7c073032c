"""The ``decguard-pipeline`` command group. Commands register on it where they are defined:
in :mod:`.app` and in the ``*_cmd`` modules, which :mod:`.app` imports."""

from __future__ import annotations

import click

from decguard_pipeline.cli.options import DocumentedCommand
from decguard_pipeline.core.product import PROGRAM, __version__

HELP = """Test, verify and gate probabilistic decision models (DecGuard 0.1 compatible),
and run the evaluations as a Dagster pipeline.

Exit codes: 0 = pass (or warn), 1 = reliability gate failed, 2 = configuration/runtime error."""


@click.group(help=HELP, context_settings={"help_option_names": ["--help"]})
@click.version_option(__version__, "--version", prog_name=PROGRAM,
                      message="%(prog)s %(version)s")  # fmt: skip
def cli() -> None:
    pass


cli.command_class = DocumentedCommand  # every command lists its arguments in --help

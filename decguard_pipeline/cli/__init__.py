"""The ``decguard-pipeline`` command: DecGuard's commands with the same flags, output and exit
codes (0 pass or warn, 1 a gate failed, 2 could not evaluate), plus the pipeline's own."""

from decguard_pipeline.cli.app import cli, main

__all__ = ["cli", "main"]

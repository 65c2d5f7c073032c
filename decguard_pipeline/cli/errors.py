"""Map every failure to exit code 2 so it is never mistaken for a failed gate (1)."""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

import click

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.formatting import printable
from decguard_pipeline.core.secrets import scrub_text

EXIT_PASS, EXIT_GATE_FAILED, EXIT_ERROR = 0, 1, 2


@contextmanager
def handled() -> Iterator[None]:
    try:
        yield
    except DecGuardError as exc:
        click.echo(f"error: {printable(str(exc), lines=True)}", err=True)  # it may quote a server
        raise SystemExit(EXIT_ERROR) from None
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
        raise
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        raise SystemExit(EXIT_ERROR) from None
    except Exception as exc:
        if os.environ.get("DECGUARD_DEBUG"):
            click.echo(scrub_text(traceback.format_exc()), err=True, nl=False)
        # any exception text may quote a model's answer: scrubbed like everything printed
        message = printable(scrub_text(f"{type(exc).__name__}: {exc}"), lines=True)
        click.echo(
            f"internal error: {message} (set DECGUARD_DEBUG=1 for a traceback)",
            err=True,
        )
        raise SystemExit(EXIT_ERROR) from None

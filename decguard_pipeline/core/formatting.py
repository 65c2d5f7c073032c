"""Numbers as DecGuard's terminal layouts print them, for every renderer (report, guard,
production, diff, golden statistics)."""

from __future__ import annotations


def num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def signed(value: float | None) -> str:
    """A difference with its sign: ``+0.120``, ``-0.034``."""
    return "n/a" if value is None else f"{value:+.3f}"

"""Numbers as DecGuard's terminal layouts print them, for every renderer (report, guard,
production, diff, golden statistics)."""

from __future__ import annotations


def num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def signed(value: float | None) -> str:
    """A change, with its sign: ``+0.012``, ``-0.300``."""
    return "n/a" if value is None else f"{value:+.3f}"


def check_line(status: str, gate: str, text: str, *, width: int, level: str) -> str:
    """One check in a layout's list of checks: the status, the gate padded to ``width``, what
    is said about it, and ``(warning)`` after a warning's."""
    tag = "" if level == "requirement" else " (warning)"
    return f"    {status.upper():<4}  {gate:<{width}} {text}{tag}"

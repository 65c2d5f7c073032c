"""Numbers as DecGuard's terminal layouts print them, for every renderer (report, guard,
production, diff, golden statistics), and text from a model server made safe to print."""

from __future__ import annotations

import re

# C0 and C1 control characters (ESC, which begins every escape sequence, and the 8-bit CSI
# among them), DEL, and the bidirectional overrides that reorder what a terminal shows
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNPRINTABLE_BUT_NEWLINE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` safe for a terminal: every control character written as its escape
    (``\\x1b``, ``\\x9b``, ``\\u202e``), so text a model server chose (a served model name,
    an error it provoked) can neither clear the screen, set the window title nor reorder what
    is shown, and still reads as what was sent. ``lines``: keep newlines (a whole layout)."""
    pattern = _UNPRINTABLE_BUT_NEWLINE if lines else _UNPRINTABLE
    return pattern.sub(_escape, text) if pattern.search(text) else text


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

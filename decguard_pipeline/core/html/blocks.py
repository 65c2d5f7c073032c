"""Blocks several pages share: status chips, tables and their head rows, metric tiles, the
table of checks, values with intervals, and :func:`safely` for sections read from unverified
files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from decguard_pipeline.core.html.markup import Html, el, sig

T = TypeVar("T")


def safely(name: str, build: Callable[[], T]) -> T | Html | None:
    """``build()``, or a note naming the sidecar section when its data has another shape."""
    try:
        return build()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return el(
            "p",
            f"The sidecar's {name} section could not be read; it is left out.",
            class_="warnbox",
        )


def status_chip(status: str) -> Html:
    return el("span", str(status).upper(), class_=f"chip st-{status}")


def header(
    left: Sequence[str] = (), numeric: Sequence[str] = (), right: Sequence[str] = ()
) -> Html:
    """A table's head row: text columns, then right-aligned number columns, then text."""
    return el(
        "tr",
        [el("th", t) for t in left],
        [el("th", t, class_="num") for t in numeric],
        [el("th", t) for t in right],
    )


def table(head: Html, rows: Any, **attrs: Any) -> Html:
    """A table of a head row and body rows."""
    return el("table", el("thead", head), el("tbody", rows), **attrs)


def tile(title: str, value: str, *more: Any, tone: str | None = None, **attrs: Any) -> Html:
    """A metric tile: its name, its value, then what else it says (an interval, gates);
    ``tone`` (pass, warn, fail) colours it."""
    return el(
        "div",
        el("div", title, class_="name"),
        el("div", value, class_="value"),
        *more,
        class_=f"tile st-{tone}" if tone else "tile",
        **attrs,
    )


COMPARISONS = {">=": "≥", "<=": "≤", "<": "<", ">": ">"}
FOLD_PASSING_ABOVE = 8  # with more checks than this, passing ones fold away behind failures


MAX_REASONS = 8  # failing gates named in the verdict banner; the gates table has them all


def reasons(checks: list[dict[str, Any]]) -> list[Html]:
    """The failing, then the warning checks, one line each with the check's message."""
    bad = [c for c in checks if c["status"] == "fail"]
    bad += [c for c in checks if c["status"] == "warn"]
    out = [
        el(
            "span",
            el("span", c["gate"], class_="gate"),
            f" — {c['message']}",
            f" ({c['level']})" if c.get("level", "requirement") != "requirement" else "",
        )
        for c in bad[:MAX_REASONS]
    ]
    if len(bad) > MAX_REASONS:
        out.append(el("span", f"and {len(bad) - MAX_REASONS} more (see the gates)", class_="muted"))
    return out


def tally(checks: list[dict[str, Any]]) -> str:
    """How many gates hold, for the verdict banner."""
    if not checks:
        return "no gate applies"
    held = sum(c["status"] == "pass" for c in checks)
    return f"{held} of {len(checks)} gates hold"


def checks_table(checks: list[dict[str, Any]]) -> Html:
    """Every check; failing and warning ones first. In a long list with failures, the
    passing checks are folded under the table."""
    if not checks:
        return el("p", "No gate applies to this report.", class_="muted")
    bad = [c for c in checks if c["status"] == "fail"] + [
        c for c in checks if c["status"] == "warn"
    ]
    good = [c for c in checks if c["status"] not in ("fail", "warn")]
    fold = bool(bad) and len(checks) > FOLD_PASSING_ABOVE
    summary = el(
        "p",
        f"{len(good)} of {len(checks)} gates hold; failing and warning gates first.",
        class_="lead",
    )
    if not fold:
        return el("div", summary, _gate_rows(bad + good))
    folded = el("details", el("summary", f"the {len(good)} gates that hold"), _gate_rows(good))
    return el("div", summary, _gate_rows(bad), folded)


def _gate_rows(checks: list[dict[str, Any]]) -> Html:
    head = header(("status", "gate", "level", "holds when"), ("value",), ("message",))
    rows = [
        el(
            "tr",
            el("td", status_chip(c["status"])),
            el("td", c["gate"], class_="mono"),
            el("td", el("span", c["level"], class_="chip lvl")),
            el(
                "td",
                f"{c['metric']} {COMPARISONS.get(c['comparison'], c['comparison'])} "
                f"{sig(c['threshold'])}",
                class_="mono",
            ),
            el("td", sig(c["value"]), class_="num"),
            el("td", c["message"]),
            data_status=c["status"],
        )
        for c in checks
    ]
    return table(head, rows, class_="gates")


def with_ci(value: Any, interval: Any) -> Html:
    """A value and, when given as ``[low, high]``, its interval after it."""
    if isinstance(interval, list | tuple) and len(interval) == 2:
        low, high = sig(interval[0]), sig(interval[1])
        return el("span", sig(value), " ", el("span", f"[{low}, {high}]", class_="muted"))
    return el("span", sig(value))

"""Pages from the Jinja2 templates of ``templates/`` (autoescaped: every value from the
warehouse is text unless it is an SVG this package drew) and the static files of
``static/``, both package data."""

from __future__ import annotations

import math
from functools import cache
from importlib import resources
from types import SimpleNamespace
from typing import Any

import jinja2
from markupsafe import Markup, escape

from decguard_pipeline.core.html.markup import Html, sig
from decguard_pipeline.core.site import paths

STATIC = ("site.css", "site.js")
WORDS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}
P = SimpleNamespace(
    **{
        name: getattr(paths, name)
        for name in (
            "contract_page",
            "version_page",
            "cases_page",
            "compare_page",
            "production_page",
            "day_page",
            "file_copy",
            "INDEX",
            "USAGE",
            "CSS",
            "JS",
        )
    }
)


def number(value: Any, digits: int = 4) -> str:
    """A number to 4 significant digits (``–`` for none; never ``-0``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return sig(value, digits)


def signed(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    text = f"{value:+.{digits}f}"
    return text.replace("-", "+", 1) if float(text) == 0 else text  # no -0.000


def percent(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}%}"


def word(status: Any) -> str:
    return WORDS.get(str(status), str(status or "–").upper())


def breakable(value: Any) -> Markup:
    """A target name that may wrap after its ``@`` (and nowhere inside a word)."""
    return Markup(str(escape(str(value))).replace("@", "@<wbr>"))


def comparison(value: Any) -> str:
    return {">=": "≥", "<=": "≤", ">": ">", "<": "<"}.get(str(value), str(value or ""))


def svg(value: Html | str | None) -> Markup:
    """Markup drawn by this package (charts.py, core.html): trusted, not escaped."""
    return Markup(value or "")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("decguard_pipeline.core.site", "templates"),
        autoescape=True,  # every template: values are text unless marked as markup
        undefined=jinja2.StrictUndefined,  # a missing value is a bug, not an empty cell
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=number, signed=signed, pct=percent, word=word, svg=svg, brk=breakable, cmp=comparison
    )
    env.globals["P"] = P
    return env


def render(template: str, page: str, **context: Any) -> str:
    """The page at site path ``page`` from ``template``; ``to(path)`` in the template is the
    relative link from this page to another site path."""
    return (
        environment()
        .get_template(template)
        .render(page=page, to=lambda target: paths.relative(page, target), **context)
    )


def static_file(name: str) -> bytes:
    return resources.files("decguard_pipeline.core.site").joinpath("static", name).read_bytes()

"""Markup that cannot be injected: every data string is escaped on the way in.

:class:`Html` marks text that is already markup; :func:`el` builds an element from a tag,
attributes and children, escaping every child that is not :class:`Html` and every attribute
value. Data for the browser goes into ``<script type="application/json">`` blocks with ``<``,
``>`` and ``&`` written as JSON escapes, so no string can close the block.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import orjson

VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "col"})


class Html(str):
    """A string that is markup already (built by :func:`el` or from a package template)."""

    __slots__ = ()


def esc(value: Any) -> Html:
    """Text (any value, ``str()``-ed) as markup: ``& < > " '`` escaped."""
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[Any]) -> Html:
    return Html("".join(_child(part) for part in parts))


def _child(child: Any) -> str:
    if child is None or child is False:
        return ""
    if isinstance(child, Html):
        return child
    if isinstance(child, list | tuple):
        return join(child)
    return esc(child)


def el(tag: str, *children: Any, **attrs: Any) -> Html:
    """``<tag attrs>children</tag>``; attribute names drop a trailing ``_`` (``class_``) and
    turn ``_`` into ``-`` (``data_kind``); None/False attributes are left out, True is bare."""
    parts = [tag]
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        key = name.rstrip("_").replace("_", "-")
        parts.append(key if value is True else f'{key}="{esc(value)}"')
    opening = "<" + " ".join(parts) + ">"
    if tag in VOID:
        return Html(opening)
    return Html(opening + join(children) + f"</{tag}>")


def sig(value: Any, digits: int = 4) -> str:
    """A number for display: 4 significant digits, integers as integers; ``n/a`` for None
    or non-numbers, ``NaN``/``∞`` spelled out."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    text = f"{value:.{digits}g}"
    if "e" in text:
        mantissa, _, exponent = text.partition("e")
        return f"{mantissa}e{int(exponent)}"
    return "0" if text == "-0" else text


def signed(value: Any) -> str:
    """:func:`sig` with a ``+`` on positive numbers (a change); zero stays ``0``."""
    text = sig(value)
    if text in ("n/a", "NaN", "0") or text.startswith("-") or text.startswith("−"):
        return text
    return "+" + text


def rounded(value: Any, digits: int = 4) -> float | None:
    """A float cut to ``digits`` significant digits (for the browser's data; smaller JSON)."""
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(f"{value:.{digits}g}")


def rounded_array(values: Any, digits: int = 4) -> list[Any]:
    """:func:`rounded` for a whole float array (any shape) as nested lists; NaN and infinities
    stay NaN, which the JSON writer turns into null. Ties round half to even."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape, np.nan)
    finite = np.isfinite(v)
    out[finite & (v == 0)] = 0.0
    nonzero = finite & (v != 0)
    x = v[nonzero]
    exponent = (digits - 1) - np.floor(np.log10(np.abs(x)))
    # divide by an exact power of ten (or multiply by one): the result is the double nearest
    # to the rounded decimal, which prints as that decimal
    up = exponent >= 0
    scaled = np.empty_like(x)
    scaled[up] = np.round(x[up] * 10.0 ** exponent[up]) / 10.0 ** exponent[up]
    scaled[~up] = np.round(x[~up] / 10.0 ** -exponent[~up]) * 10.0 ** -exponent[~up]
    out[nonzero] = scaled
    return out.tolist()


def json_block(element_id: str, data: Any) -> Html:
    """``data`` as a non-executed JSON block the page's script reads with JSON.parse."""
    try:
        text = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode("utf-8")
    except orjson.JSONEncodeError:  # integers beyond 64 bits in metadata: the slow writer
        text = json.dumps(_plain(data), ensure_ascii=False)
    # no "</script>", "<!--" or HTML entity can form: every < > & is a JSON escape
    text = (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    return Html(f'<script type="application/json" id="{esc(element_id)}">{text}</script>')


def _plain(value: Any) -> Any:
    """JSON the browser parses: integers beyond 64 bits as text, NaN and infinities as null."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**63 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)

"""Data tables for the page's script: columns, the rows as columns of values, a flag word per
row that the filter buttons test, and the fields shown when a row is opened.

A table of 100,000 cases is one JSON block; the browser shows a page of it at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from decguard_pipeline.core.html.markup import Html, el, json_block
from decguard_pipeline.core.label_fold import TOP_LABELS, used_labels

MAX_TEXT = 2000  # characters of an input or message kept in the page (the JSON has all)


def clip(text: str | None, limit: int = MAX_TEXT) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit:,} more characters in the JSON report)"


def as_text(value: Any) -> str:
    """An input or metadata value as one string: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode("utf-8")
    except (orjson.JSONEncodeError, TypeError):
        return str(value)


def named_labels(labels: list[str], rows: dict[str, list[Any]], keys: tuple[str, ...]) -> list[str]:
    """The vocabulary a table of ``labels`` needs: all of them, or with more than
    ``TOP_LABELS`` only those its ``keys`` columns name (their indices in ``rows`` are
    renumbered in place), so the page grows with its rows, not with the labels."""
    if len(labels) <= TOP_LABELS:
        return labels
    columns = [np.asarray(rows[key], dtype=np.int64) for key in keys]
    vocab, place = used_labels(labels, *columns)
    for key, column in zip(keys, columns, strict=True):
        rows[key] = place[column].tolist()
    return vocab


@dataclass
class Column:
    key: str
    title: str
    kind: str = "text"  # text | mono | num | conf | label | status | probs | topprobs
    vocab: list[str] | None = None  # values are indices into it (-1: none)
    width: str | None = None

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "title": self.title, "kind": self.kind}
        if self.vocab is not None:
            out["vocab"] = self.vocab
        if self.width:
            out["width"] = self.width
        return out


@dataclass
class Filter:
    label: str
    mask: int  # a row is shown when (flags & mask) == mask; 0 shows every row


@dataclass
class DataTable:
    name: str  # element id stem, unique in the page
    title: str
    columns: list[Column]
    rows: dict[str, list[Any]]
    flags: list[int]
    filters: list[Filter]
    search: list[str]  # keys whose text the search box matches
    details: list[Column] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # for "probs" details
    label_count: int | None = None  # "topprobs": how many labels there are (labels has some)
    search_hint: str = "search"
    empty: str = "nothing to show"
    page_size: int = 50
    start: int = 0  # the filter shown first (index into filters)

    def render(self) -> tuple[Html, Html]:
        """The mount point (goes in a section) and the data block (goes at the page end)."""
        block_id = f"table-{self.name}"
        spec = {
            "title": self.title,
            "n": len(self.flags),
            "columns": [c.spec() for c in self.columns],
            "details": [c.spec() for c in self.details],
            "rows": self.rows,
            "flags": self.flags,
            "filters": [{"label": f.label, "mask": f.mask} for f in self.filters],
            "search": self.search,
            "labels": self.labels,
            "search_hint": self.search_hint,
            "empty": self.empty,
            "page_size": self.page_size,
            "start": self.start,
        }
        if self.label_count is not None:  # many labels: their vocabulary once, by name
            spec["label_count"] = self.label_count
            for column in (*spec["columns"], *spec["details"]):
                if column.get("vocab") == self.labels:
                    column["vocab"] = "labels"
        mount = el(
            "div",
            el("noscript", "The table needs JavaScript; the JSON report has every row."),
            class_="dtable",
            data_table=block_id,
        )
        return mount, json_block(block_id, spec)

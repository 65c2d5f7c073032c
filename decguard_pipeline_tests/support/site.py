"""The evaluation site on a finished ``decguard-pipeline evaluate`` of every bundled example
(their production days included), for the site's tests and the screenshots of docs/ui.md.

``evaluated_examples(folder)`` copies ``data/contracts`` and ``data/production`` into
``folder`` and runs ``evaluate`` in a child process with its own DAGSTER_HOME and warehouse
(the demo LLM server starts for the tickets example, as in ``make run``); ``built_site``
then writes the site from that warehouse. ``page_values(html)`` reads the numbers a page
shows: every element with ``data-value``, by its ``data-metric`` or row.
"""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from decguard_pipeline_tests.support.dagster_ui import Evaluated

ROOT = Path(__file__).resolve().parents[2]
SITE_URL = "http://127.0.0.1:3999"  # what the Dagster links point at in these runs


class Examples(Evaluated):
    """Every bundled example evaluated, and where its site is built."""

    @property
    def site(self) -> Path:
        return self.folder / "site"


def evaluated_examples(folder: Path, timeout: float = 900) -> Examples:
    shutil.copytree(ROOT / "data" / "contracts", folder / "contracts")
    shutil.copytree(ROOT / "data" / "production", folder / "production")
    place = Examples(folder, {"DECGUARD_SITE_URL": SITE_URL})
    place.evaluate("--workers", "2", timeout=timeout)
    return place


class _Values(HTMLParser):
    """Every element carrying ``data-value``: its attributes and the row it sits in."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, Any]] = []
        self.row: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "tr":
            self.row = attributes
        if "data-value" in attributes:
            self.found.append({**attributes, "tag": tag, "row": dict(self.row)})


def page_values(html: str) -> list[dict[str, Any]]:
    parser = _Values()
    parser.feed(html)
    return parser.found


def metric_values(html: str) -> dict[str, str]:
    """``{data-metric: data-value}`` of a page's tiles (and rows keyed by a metric)."""
    return {v["data-metric"]: v["data-value"] for v in page_values(html) if "data-metric" in v}


def number(text: str) -> float | None:
    return None if text == "" else float(text)

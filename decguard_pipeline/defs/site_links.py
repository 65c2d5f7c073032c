"""Links from the Dagster UI to the evaluation site (docs/ui.md): every asset's definition
links its contract's page, and each materialisation the page of its target (a version) or
its day of production, as the metadata URL ``site``.

The site is served by ``decguard-pipeline ui`` on localhost (``SITE_PORT``) unless
``$DECGUARD_SITE_URL`` names where a deployment serves a built site (``decguard-pipeline site
build``); an empty value leaves the links out. Pages follow ``core.site.paths``.
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg

from decguard_pipeline.core.site import paths

SITE_URL = "DECGUARD_SITE_URL"
SITE_PORT = 3002  # where `decguard-pipeline ui` serves the site (next to 3000 and 3001)


def site_base() -> str:
    """The URL the site is served at ('' for none)."""
    return os.environ.get(SITE_URL, f"http://localhost:{SITE_PORT}").rstrip("/")


def site_link(path: str) -> dict[str, Any]:
    """``{"site": <URL of the site page at path>}``, or nothing without a site URL."""
    base = site_base()
    return {"site": dg.MetadataValue.url(paths.absolute(base, path))} if base else {}


def contract_link(contract: str) -> dict[str, Any]:
    return site_link(paths.contract_page(contract))


def version_link(contract: str, target: str) -> dict[str, Any]:
    return site_link(paths.version_page(contract, target))


def compare_link(contract: str, candidate: str, baseline: str) -> dict[str, Any]:
    return site_link(paths.compare_page(contract, candidate, baseline))


def part_link(contract: str, target: str, part: str, result: Any) -> dict[str, Any]:
    """A per-target asset's page: the comparison with its baseline for ``regression_diff``
    (when it had one), else the version's page."""
    baseline = getattr(result, "baseline_target", None) if part == "regression_diff" else None
    if isinstance(baseline, str):
        return compare_link(contract, target, baseline)
    return version_link(contract, target)


def day_link(contract: str, day: str) -> dict[str, Any]:
    return site_link(paths.day_page(contract, day))

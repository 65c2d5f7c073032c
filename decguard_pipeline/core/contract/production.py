"""``pipeline.production``: settings of the production-check extensions (docs/production.md).

Present (even empty, ``production: {}``) turns the extension output of ``check`` on: the
sidecar ``<report stem>.pipeline.json`` next to ``-o`` and text sections after DecGuard's
layout. The DecGuard report itself never changes. ``baseline`` and ``start_date`` are read
only by the daily Dagster assets (docs/production.md, "In Dagster").
"""

from __future__ import annotations

from datetime import date

from pydantic import Field

from decguard_pipeline.core.validation import Strict


class ProductionExtension(Strict):
    # PSI reads an empty label bin as this share on either side (ln 0 is undefined)
    psi_epsilon: float = Field(default=1e-4, gt=0.0, le=0.01)
    # level of the Wilson interval on production accuracy
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    # daily production_check in Dagster: what the day is compared with -- "previous" (the
    # newest earlier day with ingested records), "golden" (the golden run of the deployed
    # target), "none", or a records file / stored check report (relative to the contract)
    baseline: str = Field(default="previous", min_length=1)
    # first daily partition (default: $DECGUARD_PRODUCTION_START, else the earliest file)
    start_date: date | None = None

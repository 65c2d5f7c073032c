"""``pipeline.production``: settings of the production-check extensions (docs/production.md).

Present (even empty, ``production: {}``) turns the extension output of ``check`` on: the
sidecar ``<report stem>.pipeline.json`` next to ``-o`` and text sections after DecGuard's
layout. The DecGuard report itself never changes.
"""

from __future__ import annotations

from pydantic import Field

from decguard_pipeline.core.validation import Strict


class ProductionExtension(Strict):
    # PSI reads an empty label bin as this share on either side (ln 0 is undefined)
    psi_epsilon: float = Field(default=1e-4, gt=0.0, le=0.01)
    # level of the Wilson interval on production accuracy
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)

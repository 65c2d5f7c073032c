"""``pipeline.cache``: the response cache of the project's evaluations (docs/cache.md).

In the warehouse the cache is on by default: an evaluation retried after a failure or a kill,
or the nightly run on an unchanged model version, asks only what it has no answer for yet.
The command line has it off unless ``--cache DIR`` (or ``$DECGUARD_CACHE``) is given.
Whether answers are cached never changes a result, so this section is left out of the
contract's hash.
"""

from __future__ import annotations

from pydantic import Field

from decguard_pipeline.core.validation import Strict


class CacheSettings(Strict):
    enabled: bool = True
    # answers older than this are asked again (None: kept until pruned)
    max_age_days: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)

"""``pipeline.repeats``: ask every golden case several times and report how consistent the
answers are (docs/metrics.md, "Consistency"). Absent means DecGuard's behaviour: one ask.

Repetition 0 is the report's answer, exactly what a run without repeats asks; repetitions
1 .. count-1 are extra asks, each under its own sample index in the response cache
(docs/cache.md), so a cached run replays every repetition's own answer and never one answer
``count`` times.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from decguard_pipeline.core.validation import Strict

MIN_REPEATS, MAX_REPEATS = 2, 20


class RepeatsSettings(Strict):
    count: int = Field(ge=MIN_REPEATS, le=MAX_REPEATS, strict=True)
    """How many times each golden case is asked, the report's own ask included."""
    max_case_ids: int = Field(default=20, ge=0, le=1000, strict=True)
    """How many ids of inconsistent cases the section lists (the count is always given)."""

    @model_validator(mode="before")
    @classmethod
    def _a_mapping(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):  # the likeliest slip
            raise ValueError(f"write a mapping, e.g. {{count: {value}}}, not a number")
        return value

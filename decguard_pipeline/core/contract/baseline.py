"""``pipeline.baseline``: which earlier evaluation a candidate is diffed against.

Default (section absent or empty): the previous passing version of the candidate's backend,
else the ``default`` backend's newest passing target (see ``core.diff.choose_baseline``)."""

from __future__ import annotations

from pydantic import Field, model_validator

from decguard_pipeline.core.contract.types import Name
from decguard_pipeline.core.validation import Strict


class BaselineSettings(Strict):
    target: str | None = Field(default=None, min_length=1)
    """A pinned target key, e.g. ``default@v3``."""
    backend: Name | None = None
    """A backend name: that backend's newest target whose requirement gates passed."""

    @model_validator(mode="after")
    def _one_rule(self) -> BaselineSettings:
        if self.target is not None and self.backend is not None:
            raise ValueError("set either 'target' or 'backend', not both")
        return self

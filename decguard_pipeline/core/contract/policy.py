"""The ``policy`` section: ordered first-match routes on confidence."""

from __future__ import annotations

from itertools import pairwise
from typing import Literal

from pydantic import Field, model_validator

from decguard_pipeline.core.contract.types import Name, Probability
from decguard_pipeline.core.validation import Strict

PolicyAction = Literal["accept", "abstain", "fallback", "human_review"]


class When(Strict):
    confidence_gte: Probability


class Route(Strict):
    when: When | None = None
    action: PolicyAction
    backend: Name | None = None

    @model_validator(mode="after")
    def _backend_only_for_fallback(self) -> Route:
        if self.action == "fallback" and self.backend is None:
            raise ValueError("fallback routes require 'backend'")
        if self.action != "fallback" and self.backend is not None:
            raise ValueError("'backend' is only valid for fallback routes")
        return self


class Policy(Strict):
    routes: tuple[Route, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> Policy:
        if self.routes[-1].when is not None:
            raise ValueError("the final route must be unconditional")
        conditions = [route.when for route in self.routes[:-1]]
        if any(when is None for when in conditions):
            raise ValueError("only the final route may be unconditional")
        thresholds = [when.confidence_gte for when in conditions if when is not None]
        if any(a <= b for a, b in pairwise(thresholds)):
            raise ValueError("confidence_gte thresholds must be strictly descending")
        return self

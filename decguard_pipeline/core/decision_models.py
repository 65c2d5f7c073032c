"""The typed objects the Python SDK hands out: DecGuard 0.1's ``DecisionResult`` and
``PolicyDecision`` (same field names, order, types, JSON and validation errors), so code
written against ``decguard.DecGuard`` runs unchanged on ours.

The batch runner and the reports keep plain dicts and columns (a pydantic object per case
costs more than the decision itself); only single SDK decisions are wrapped here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from decguard_pipeline.core.contract.policy import PolicyAction
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.result_records import ResultModel

TOLERANCE_CONTEXT_KEY = "probability_tolerance"
"""Validation-context key of the contract's ``evaluation.probability_tolerance`` (the
invariant checks default to 1e-3 without it), as in DecGuard."""


class DecisionType(StrEnum):
    """The kind of decision; a ``str``, so ``result.decision_type == "choice"`` holds."""

    CHOICE = "choice"
    NOUL = "noul"
    SCORE = "score"


class DecisionResult(ResultModel):
    """One validated decision, the same shape for every backend. Its invariants (labels
    unique, probabilities in label order and summing to 1 within the tolerance, ``selected``
    the first most probable label, ``confidence`` its probability) are checked whenever one
    is built or loaded, so a tampered result cannot pass."""

    decision_type: DecisionType  # type: ignore[assignment]  # the enum, as DecGuard's


class PolicyDecision(BaseModel):
    """A decision plus the route of the contract's policy that it took. ``fallback`` names
    the backend to ask next in ``fallback_backend``; the caller decides whether to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    result: DecisionResult
    action: PolicyAction
    fallback_backend: str | None = None
    route_index: int


class RequestCheck(BaseModel):
    """What ``decide`` is given, checked as DecGuard checks its request (same error title
    and locations), before any backend is called: text or an object with string keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", title="DecisionRequest")

    case_id: str
    input: DecisionInput


def policy_decision(document: dict[str, Any], tolerance: float) -> PolicyDecision:
    """A PolicyDecision from ``core.policy.apply_policy``'s document, its result checked
    with the contract's tolerance."""
    return PolicyDecision.model_validate(document, context={TOLERANCE_CONTEXT_KEY: tolerance})

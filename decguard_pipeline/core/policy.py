"""The runtime policy (``policy`` section): first-match routing of one decision on confidence.

Routes are tried in order; the first without a condition, or whose ``confidence_gte`` the
decision's confidence reaches, gives the action. Actions are directives for the embedding
application: a ``fallback`` names the backend to ask next but is never invoked here, so side
effects and cascade limits stay with the caller.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from decguard_pipeline.core.contract.policy import Policy, Route


def first_route(policy: Policy, confidence: float) -> tuple[int, Route]:
    """Index and route that the confidence selects."""
    for index, route in enumerate(policy.routes):
        if route.when is None or confidence >= route.when.confidence_gte:
            return index, route
    # contract validation makes the last route unconditional
    raise AssertionError("a validated policy always ends with an unconditional route")


def apply_policy(policy: Policy, result: dict[str, Any]) -> dict[str, Any]:
    """A PolicyDecision document for one DecisionResult dict (DecGuard's field order)."""
    index, route = first_route(policy, result["confidence"])
    return {
        "result": result,
        "action": route.action,
        "fallback_backend": route.backend,
        "route_index": index,
    }


def route_indices(policy: Policy, confidence: np.ndarray) -> np.ndarray:
    """The route index each confidence selects, for a whole column at once (replaying a
    policy over collected production decisions)."""
    chosen = np.full(len(confidence), len(policy.routes) - 1, dtype=np.int64)
    undecided = np.ones(len(confidence), dtype=bool)
    for index, route in enumerate(policy.routes[:-1]):
        assert route.when is not None
        hit = undecided & (confidence >= route.when.confidence_gte)
        chosen[hit] = index
        undecided &= ~hit
    return chosen


def render_decision(decision: dict[str, Any]) -> str:
    """The one-line summary ``decguard run`` prints."""
    target = decision["fallback_backend"]
    arrow = f" -> {target}" if target is not None else ""
    result = decision["result"]
    index = decision["route_index"]
    # -1: a calibrator's conformal set held more than one label (a pipeline extension)
    route = "conformal set" if index == -1 else index
    return (
        f"{decision['action']}{arrow} · selected {result['selected']} · "
        f"confidence {result['confidence']:.3f} · route {route}"
    )

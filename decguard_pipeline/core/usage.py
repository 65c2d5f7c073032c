"""What a run cost: tokens per case and a price list, summed without network or warehouse.

``pricing`` is a backend setting (``input_per_million``, ``output_per_million``, in any one
currency); the cost of a case is ``prompt_tokens × input + completion_tokens × output``
per million. Cases whose backend did not report usage (NaN) cost nothing known and are
left out of the sums, and counted as such.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from pydantic import Field

from decguard_pipeline.core.validation import Strict

PER_MILLION = 1_000_000.0


class Pricing(Strict):
    """Price per million tokens; a currency is the user's to choose and name elsewhere."""

    input_per_million: float = Field(ge=0.0, allow_inf_nan=False)
    output_per_million: float = Field(ge=0.0, allow_inf_nan=False)


@dataclass(frozen=True)
class RunCost:
    cases: int  # cases in the run
    cases_with_usage: int  # cases whose tokens are known (the sums cover these)
    decisions: int  # cases that ended with a decision
    prompt_tokens: int
    completion_tokens: int
    cost: float | None  # None without pricing
    cost_per_1000: float | None  # per 1,000 decisions; None without pricing or decisions

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def case_cost(prompt_tokens: float, completion_tokens: float, pricing: Pricing) -> float:
    """The cost of one request or case."""
    return (
        prompt_tokens * pricing.input_per_million + completion_tokens * pricing.output_per_million
    ) / PER_MILLION


def run_cost(
    prompt_tokens: np.ndarray | None,
    completion_tokens: np.ndarray | None,
    pricing: Pricing | None,
    *,
    decided: np.ndarray,
) -> RunCost:
    """Tokens and cost of a run, and the cost per 1,000 decisions.

    Every token paid for counts, including those of cases whose answer then failed
    validation; the divisor is the number of cases that ended with a decision, so errors
    make each decision dearer, as they do on the invoice."""
    n = int(decided.shape[0])
    decisions = int(np.count_nonzero(decided))
    if prompt_tokens is None or completion_tokens is None:
        prompt = completion = np.zeros(0)
    else:
        known = ~(np.isnan(prompt_tokens) | np.isnan(completion_tokens))
        prompt, completion = prompt_tokens[known], completion_tokens[known]
    prompt_sum, completion_sum = math.fsum(prompt.tolist()), math.fsum(completion.tolist())
    cost = per_1000 = None
    if pricing is not None:
        cost = case_cost(prompt_sum, completion_sum, pricing)
        per_1000 = cost / decisions * 1000.0 if decisions else None
    return RunCost(
        cases=n,
        cases_with_usage=int(prompt.shape[0]),
        decisions=decisions,
        prompt_tokens=int(prompt_sum),
        completion_tokens=int(completion_sum),
        cost=cost,
        cost_per_1000=per_1000,
    )

"""What a run cost: tokens per case and a price list, summed without network or warehouse.

``pricing`` is a backend setting (``input_per_million``, ``output_per_million``, in any one
currency); the cost of a case is ``prompt_tokens × input + completion_tokens × output``
per million. Cases whose backend did not report usage (NaN) cost nothing known and are
left out of the sums, and counted as such.

A count a server reports is untrusted: one that is not an integer, is negative, or exceeds
:data:`MAX_TOKENS` cannot be real and is unknown, exactly as if the server had said nothing
(:func:`token_count`), wherever it would go: pacing, the report, the warehouse, the cache.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from pydantic import Field

from decguard_pipeline.core.contract import Contract
from decguard_pipeline.core.contract.extension_gates import ExtensionGates
from decguard_pipeline.core.gates import (
    Check,
    Comparison,
    levelled,
    overall_status,
    table_check,
)
from decguard_pipeline.core.validation import Strict

PER_MILLION = 1_000_000.0
# The most tokens one answer (or one case, all its requests together) can have cost: far
# beyond any context window, and small enough that a run's sums stay exact as floats and fit
# the warehouse's int64 columns.
MAX_TOKENS = 10**10


def token_count(value: Any) -> int | None:
    """``value`` as a token count, or None when it cannot be one: a bool, text, a number that
    is not a whole one, negative or above :data:`MAX_TOKENS` (NaN and infinities too)."""
    whole = isinstance(value, int | np.integer) or (
        isinstance(value, float | np.floating) and math.isfinite(value) and value.is_integer()
    )
    if isinstance(value, bool | np.bool_) or not whole:
        return None
    count = int(value)
    return count if 0 <= count <= MAX_TOKENS else None


def known_usage(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens when both are counts (:func:`token_count`), else None:
    half a usage is no usage."""
    try:
        prompt, completion = usage
    except (TypeError, ValueError):
        return None
    counts = token_count(prompt), token_count(completion)
    if counts[0] is None or counts[1] is None:
        return None
    return counts[0], counts[1]


def known_tokens(prompt: np.ndarray, completion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Token columns (floats, NaN unknown) with every pair that is not two counts unknown
    (NaN in both): what an older cache or report may hold is read by today's rule."""
    prompt, completion = np.asarray(prompt, dtype=float), np.asarray(completion, dtype=float)
    with np.errstate(invalid="ignore"):
        fine = (
            np.isfinite(prompt)
            & np.isfinite(completion)
            & (prompt == np.floor(prompt))
            & (completion == np.floor(completion))
            & (prompt >= 0)
            & (completion >= 0)
            & (prompt <= MAX_TOKENS)
            & (completion <= MAX_TOKENS)
        )
    if fine.all() or not prompt.shape[0]:
        return prompt, completion
    return np.where(fine, prompt, np.nan), np.where(fine, completion, np.nan)


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
    cost: float | None  # None without pricing or without any case's usage
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
    if pricing is not None and prompt.shape[0]:  # no case reported usage: the cost is unknown
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


# -- the run's usage as an extension section (sidecar, text, warehouse) and its gates ------------

# gate -> (metric, comparison that must hold); pipeline.requirements / pipeline.warnings
COST_GATES: dict[str, tuple[str, Comparison]] = {"max_cost_per_1000": ("cost_per_1000", "<=")}
USAGE = "usage"  # the section's name in the sidecar and Report.extensions


def usage_section(cost: RunCost, pricing: Pricing | None, stats: dict[str, Any]) -> dict[str, Any]:
    """What a run used and cost, JSON-ready: the pricing applied, the tokens and cost of
    the golden cases (:func:`run_cost`) and the backend's request counters
    (``Backend.run_stats()``: every request of the run, retries and waits included)."""
    return {
        "pricing": None if pricing is None else pricing.model_dump(),
        "cases": cost.cases,
        "cases_with_usage": cost.cases_with_usage,
        "decisions": cost.decisions,
        "prompt_tokens": cost.prompt_tokens,
        "completion_tokens": cost.completion_tokens,
        "cost_per_run": cost.cost,
        "cost_per_1000": cost.cost_per_1000,
        "backend": dict(stats),
    }


def has_usage(section: dict[str, Any]) -> bool:
    """Whether there is anything to say: tokens were counted, a price or a counter is set."""
    return bool(section["cases_with_usage"] or section["pricing"] or section["backend"])


def _missing_cost(section: dict[str, Any] | None) -> str:
    if section is None or section["pricing"] is None:
        return "the backend has no pricing"
    if not section["cases_with_usage"]:
        return "the backend reported no token usage"
    return "no case ended in a decision"


def cost_checks(
    section: dict[str, Any] | None, requirements: ExtensionGates, warnings: ExtensionGates
) -> list[Check]:
    """The cost gates set in ``pipeline.requirements`` / ``pipeline.warnings`` checked on a
    run's usage section (None: the run has none). A cost that cannot be computed (no
    pricing, no usage reported) fails the gate, as every metric that cannot be computed
    does: the property was not demonstrated."""
    return [
        table_check(
            COST_GATES,
            gate,
            threshold,
            None if section is None else section[COST_GATES[gate][0]],
            level=level,
            missing=_missing_cost(section),
        )
        for level, gate, threshold in levelled(requirements.cost(), warnings.cost())
    ]


def _count(value: float) -> str:
    return f"{value:,.0f}"


def render_usage(section: dict[str, Any]) -> str:
    """``Usage`` block printed after DecGuard's layout: tokens, cost, the backend's requests,
    waits and the cost gates."""
    lines = []
    if "cases" in section:  # else a run evaluated before usage was recorded: the checks alone
        lines.append(
            f"  Usage        {_count(section['cases_with_usage'])} of {_count(section['cases'])} "
            f"cases with token counts · prompt {_count(section['prompt_tokens'])} · completion "
            f"{_count(section['completion_tokens'])} tokens"
        )
    pricing = section.get("pricing")
    if pricing is not None:
        per_1000 = section["cost_per_1000"]
        per_decisions = "n/a" if per_1000 is None else f"{per_1000:.4g}"
        lines.append(
            f"  Cost         {section['cost_per_run']:.4g} per run · {per_decisions} per 1,000 "
            f"decisions (per million tokens: input {pricing['input_per_million']:g}, output "
            f"{pricing['output_per_million']:g})"
        )
    stats = section.get("backend") or {}
    if "requests" in stats:  # the language-model providers' counters (Backend.run_stats)
        lines.append(
            f"  Requests     {_count(stats.get('requests', 0))} sent · "
            f"{_count(stats.get('retries', 0))} retries ({stats.get('retry_wait_s', 0.0):.1f} s"
            f" waited, {_count(stats.get('retry_after_honoured', 0))} as the server asked) · "
            f"{_count(stats.get('paced', 0))} paced ({stats.get('paced_wait_s', 0.0):.1f} s)"
        )
    for note in stats.get("fallbacks") or ():  # what the server made the provider fall back to
        lines.append(f"  Fallback     {note}")
    for check in section.get("checks", []):
        level = " (warning)" if check["level"] == "warning" else ""
        status, gate = check["status"].upper(), check["gate"]
        lines.append(f"    {status:<4}  {gate:<22} {check['message']}{level}")
    return "\n".join(lines)


def usage_extension(
    contract: Contract, section: dict[str, Any] | None, *, gated: bool = True
) -> dict[str, Any] | None:
    """The ``usage`` extension section of a run: ``section`` (None: the run has none) with
    the checks of the contract's cost gates (unless not ``gated``: fuzz runs check no golden
    gates); None when there is nothing to say and no gate to check."""
    pipeline = contract.pipeline
    checks = []
    if gated and pipeline is not None:
        checks = cost_checks(section, pipeline.requirements, pipeline.warnings)
    if not checks and (section is None or not has_usage(section)):
        return None
    return {**(section or {}), "checks": checks}


def usage_status(extensions: dict[str, Any]) -> str | None:
    """The verdict of the cost gates in a run's extension sections; None without any."""
    checks = (extensions.get(USAGE) or {}).get("checks") or []
    return overall_status(checks) if checks else None

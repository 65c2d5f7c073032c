"""What the cache did in a run: answers replayed, requests sent (and how many of them the
backend answered, so a run made only of stored answers says that nothing was asked), answers
stored, what was saved (requests, tokens, and cost when the backend's ``pricing`` is known),
and the warnings of a cache that could not be written or read whole. The sidecar section
``cache`` and a text block after DecGuard's layout; DecGuard's report never changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from decguard_pipeline.core.usage import Pricing


@dataclass
class CacheStats:
    directory: str | None = None  # the warehouse the answers are kept in (None: no cache)
    version: str | None = None  # the model version the key was made with
    version_source: str | None = None  # given | hint | probe | none
    retry_report: str | None = None  # --retry-errors REPORT
    from_cache: int = 0  # answers replayed from the cache
    from_report: int = 0  # answers taken from the --retry-errors report
    asked: int = 0  # requests the backend was asked (cases, not HTTP retries)
    answered: int = 0  # of those, the ones it answered with a valid decision
    stored: int = 0  # new answers written to the cache
    saved_prompt_tokens: int = 0  # tokens the replayed answers had cost when asked
    saved_completion_tokens: int = 0
    saved_with_usage: int = 0  # replayed answers whose tokens are known
    pricing: Pricing | None = None
    warnings: list[str] = field(default_factory=list)  # each said once
    # where a warning goes the moment it happens (the command line: stderr)
    on_warning: Callable[[str], None] | None = field(default=None, repr=False)

    def warn(self, message: str) -> None:
        """A problem of the cache that the run survives; said once."""
        if message in self.warnings:
            return
        self.warnings.append(message)
        if self.on_warning is not None:
            self.on_warning(message)

    def not_stored(self, lost: int, message: str) -> None:
        """The cache could not write: ``lost`` answers counted as stored were not."""
        self.stored = max(0, self.stored - lost)
        self.warn(message)

    @property
    def backend(self) -> str:
        """What this run knows of the backend: ``reached`` (it answered at least one request),
        ``failed`` (asked, it answered none), ``not asked`` (every answer was a stored one,
        so nothing says whether it works now)."""
        if not self.asked:
            return "not asked"
        return "reached" if self.answered else "failed"

    def replayed(self, source: str, prompt: np.ndarray, completion: np.ndarray) -> None:
        """Count answers that were not asked, and the tokens they had cost."""
        n = int(prompt.shape[0])
        if source == "report":
            self.from_report += n
        else:
            self.from_cache += n
        known = ~(np.isnan(prompt) | np.isnan(completion))
        if known.any():
            self.saved_with_usage += int(np.count_nonzero(known))
            self.saved_prompt_tokens += int(math.fsum(prompt[known].tolist()))
            self.saved_completion_tokens += int(math.fsum(completion[known].tolist()))

    @property
    def saved_requests(self) -> int:
        return self.from_cache + self.from_report

    @property
    def saved_cost(self) -> float | None:
        if self.pricing is None:
            return None
        from decguard_pipeline.core.usage import case_cost

        return case_cost(self.saved_prompt_tokens, self.saved_completion_tokens, self.pricing)

    def section(self) -> dict[str, Any]:
        """The sidecar section ``cache``."""
        return {
            "directory": self.directory,
            "model_version": self.version,
            "version_source": self.version_source,
            "retry_errors_report": self.retry_report,
            "answers_from_cache": self.from_cache,
            "answers_from_report": self.from_report,
            "asked": self.asked,
            "answered": self.answered,
            "backend": self.backend,
            "stored": self.stored,
            "saved": {
                "requests": self.saved_requests,
                "prompt_tokens": self.saved_prompt_tokens,
                "completion_tokens": self.saved_completion_tokens,
                "answers_with_usage": self.saved_with_usage,
                "cost": self.saved_cost,
            },
            "warnings": list(self.warnings),
        }


def backend_line(section: dict[str, Any]) -> str:
    """Whether the backend was reached, in words (``section``: a ``cache`` section)."""
    asked, answered = section["asked"], section.get("answered", 0)
    if not asked:
        return "backend not asked: every answer is a stored one (its state now is unknown)"
    if not answered:
        return f"backend failed: none of {asked:,} requests answered"
    return f"backend reached: {answered:,} of {asked:,} requests answered"


def answers_cell(section: dict[str, Any]) -> str:
    """Where a run's answers came from, in a few words (a summary table's cell)."""
    cached = section["answers_from_cache"] + section.get("answers_from_report", 0)
    asked, answered = section["asked"], section.get("answered", 0)
    if not asked:
        return f"{cached:,} cached · backend not asked"
    said = "all answered" if answered == asked else f"{answered:,} answered"
    return f"{cached:,} cached · {asked:,} asked, {said}"


def render_cache(section: dict[str, Any]) -> str:
    """``Cache`` block: where answers came from and what that saved."""
    parts = [f"{section['answers_from_cache']:,} from cache"]
    if section["retry_errors_report"] is not None:
        parts.append(f"{section['answers_from_report']:,} from {section['retry_errors_report']}")
    parts.append(f"{section['asked']:,} asked")
    if section["directory"] is not None:
        parts.append(f"{section['stored']:,} stored")
    saved = section["saved"]
    tokens = saved["prompt_tokens"] + saved["completion_tokens"]
    line = f"saved {saved['requests']:,} requests"
    if saved["answers_with_usage"]:
        line += f" · {tokens:,} tokens"
    if saved["cost"] is not None:
        line += f" · cost {saved['cost']:.4f}"
    lines = [
        f"  Cache        {' · '.join(parts)}",
        f"               {backend_line(section)}",
        f"               {line}",
    ]
    if section["directory"] is not None:
        version = section["model_version"] or "(none reported)"
        lines.append(f"               {section['directory']} · model version {version}")
    lines += [f"               warning: {w}" for w in section.get("warnings") or ()]
    return "\n".join(lines)

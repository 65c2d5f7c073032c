"""What the cache did in a run: answers replayed, requests sent, answers stored, and what was
saved (requests, tokens, and cost when the backend's ``pricing`` is known). The sidecar
section ``cache`` and a text block after DecGuard's layout; DecGuard's report never changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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
    stored: int = 0  # new answers written to the cache
    saved_prompt_tokens: int = 0  # tokens the replayed answers had cost when asked
    saved_completion_tokens: int = 0
    saved_with_usage: int = 0  # replayed answers whose tokens are known
    pricing: Pricing | None = None

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
            "stored": self.stored,
            "saved": {
                "requests": self.saved_requests,
                "prompt_tokens": self.saved_prompt_tokens,
                "completion_tokens": self.saved_completion_tokens,
                "answers_with_usage": self.saved_with_usage,
                "cost": self.saved_cost,
            },
        }


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
    lines = [f"  Cache        {' · '.join(parts)}", f"               {line}"]
    if section["directory"] is not None:
        version = section["model_version"] or "(none reported)"
        lines.append(f"               {section['directory']} · model version {version}")
    return "\n".join(lines)

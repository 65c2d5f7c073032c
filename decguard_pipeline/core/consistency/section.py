"""The sidecar section ``consistency`` of a golden run with ``pipeline.repeats``, and its text
block after DecGuard's layout.

The run asked every golden case ``count`` times; repetition 0 is the report's answer. A case
with an error in any repetition cannot be compared: it is counted (``cases_with_errors``,
``errors_by_repetition``) and left out of every measure (``cases_measured`` are the rest).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from decguard_pipeline.core.consistency.measures import (
    agreement_with_report,
    label_flips,
    mean_tv_distance,
    pairwise_agreement,
    unanimous_share,
)
from decguard_pipeline.core.contract.repeats import RepeatsSettings
from decguard_pipeline.core.results import CaseResults

SECTION = "consistency"  # the sidecar section's name, Report.extensions key
# the section's measures, in the order the metrics catalog, the text and `metrics` rows use
MEASURES = ("unanimous_share", "pairwise_agreement", "agreement_with_report", "mean_tv_distance")


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def _tokens(repetitions: Sequence[CaseResults]) -> dict[str, int] | None:
    """Tokens the extra asks reported (None when none did)."""
    prompt = [r.prompt_tokens for r in repetitions if r.prompt_tokens is not None]
    completion = [r.completion_tokens for r in repetitions if r.completion_tokens is not None]
    if not prompt or not completion:
        return None
    return {
        "prompt_tokens": int(math.fsum(float(np.nansum(p)) for p in prompt)),
        "completion_tokens": int(math.fsum(float(np.nansum(c)) for c in completion)),
    }


def consistency_section(
    repetitions: Sequence[CaseResults], settings: RepeatsSettings
) -> dict[str, Any]:
    """What ``repetitions`` (the report's results first, then each extra ask's, all of the
    same cases in the same order) say about the model's consistency, JSON-ready."""
    first = repetitions[0]
    labels = list(first.labels)
    selected = np.stack([r.selected for r in repetitions], axis=1)  # (n, r), -1 = error
    measured = np.all(selected >= 0, axis=1)
    chosen = selected[measured]
    probs = np.stack([r.probs[measured] for r in repetitions], axis=1)  # (m, r, k)
    flips = label_flips(chosen, len(labels))
    wavering = np.flatnonzero(measured)[~np.all(chosen == chosen[:, :1], axis=1)]
    n = len(first)
    return {
        "settings": settings.model_dump(),
        "cases": n,
        "asks": n * len(repetitions),
        "extra_asks": n * (len(repetitions) - 1),
        "errors_by_repetition": [int((r.selected < 0).sum()) for r in repetitions],
        "cases_with_errors": int(n - measured.sum()),
        "cases_measured": int(measured.sum()),
        "unanimous_share": _number(unanimous_share(chosen)),
        "pairwise_agreement": _number(pairwise_agreement(chosen)),
        "agreement_with_report": _number(agreement_with_report(chosen)),
        "mean_tv_distance": _number(mean_tv_distance(probs)),
        "label_flips": {label: int(c) for label, c in zip(labels, flips.tolist(), strict=True)},
        "inconsistent_cases": len(wavering),
        "inconsistent_case_ids": [first.case_ids[i] for i in wavering[: settings.max_case_ids]],
        "extra_usage": _tokens(repetitions[1:]),
    }


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def render_consistency(section: dict[str, Any]) -> str:
    """``Consistency`` block printed after DecGuard's layout."""
    count = section["settings"]["count"]
    lines = [
        f"  Consistency  {count} asks per case · {section['cases_measured']} of "
        f"{section['cases']} cases measured · {section['extra_asks']} extra asks",
        f"               unanimous {_share(section['unanimous_share'])} · pairwise agreement "
        f"{_share(section['pairwise_agreement'])} · agrees with the report "
        f"{_share(section['agreement_with_report'])}",
        f"               mean TV distance to the case's mean answer "
        f"{_share(section['mean_tv_distance'])}",
    ]
    if section["cases_with_errors"]:
        per = ", ".join(str(e) for e in section["errors_by_repetition"])
        lines.append(
            f"               {section['cases_with_errors']} cases left out: an ask errored "
            f"(errors per repetition: {per})"
        )
    if section["inconsistent_cases"]:
        flips = ", ".join(f"{k} {v}" for k, v in section["label_flips"].items() if v)
        shown = section["inconsistent_case_ids"]
        more = section["inconsistent_cases"] - len(shown)
        ids = ", ".join(shown) + (f" and {more} more" if shown and more > 0 else "")
        lines.append(
            f"               {section['inconsistent_cases']} cases changed label "
            f"(label flips: {flips}){': ' + ids if ids else ''}"
        )
    return "\n".join(lines)

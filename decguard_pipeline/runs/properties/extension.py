"""Beyond DecGuard: how sure a fuzz run is about each property, and what it cost.

DecGuard reports a property's violation and flip rates as bare fractions; with 11 cases a
rate of 0/33 and 0/3 read the same. Each rate here gets a 95% Wilson score interval, plus the
backend calls the property made (transformed cases and minimisation). This is the sidecar
section ``properties`` (``<report stem>.pipeline.json``); DecGuard's report stays untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from decguard_pipeline.core.stats import wilson_interval

EXTENSION_VERSION = "0.1"
CONFIDENCE = 0.95


def _interval(successes: int, n: int, confidence: float) -> list[float] | None:
    found = wilson_interval(successes, n, confidence)
    return None if found is None else [found[0], found[1]]


def properties_extension(
    summaries: Sequence[Mapping[str, Any]],
    calls: Mapping[str, tuple[int, int]],
    *,
    confidence: float = CONFIDENCE,
) -> dict[str, Any]:
    """Per property (summary order): rates with intervals, and ``calls`` =
    (transformed-case calls, minimisation calls). Rates are over compared pairs, as in the
    DecGuard summary."""
    entries = []
    for s in summaries:
        n = s["n_evaluated"]
        transformed, minimize = calls.get(s["property"], (0, 0))
        entries.append(
            {
                "property": s["property"],
                "n_evaluated": n,
                "n_violations": s["n_violations"],
                "violation_rate": s["violation_rate"],
                "violation_rate_interval": _interval(s["n_violations"], n, confidence),
                "n_flips": s["n_flips"],
                "flip_rate": s["flip_rate"],
                "flip_rate_interval": _interval(s["n_flips"], n, confidence),
                "backend_calls": {
                    "transformed": transformed,
                    "minimize": minimize,
                    "total": transformed + minimize,
                },
            }
        )
    return {
        "version": EXTENSION_VERSION,
        "confidence": confidence,
        "interval_method": "wilson",
        "summaries": entries,
        "backend_calls": sum(e["backend_calls"]["total"] for e in entries),
    }

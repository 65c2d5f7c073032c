"""Did the new version get less honest, or less able to tell cases apart? The CORP
decomposition of both runs of a diff, side by side (contracts with
``pipeline.calibration_measures`` or a calibration gate; docs/metrics.md).

Over the cases both runs decided with an expected label (the candidate's), each run's Brier
score (DecGuard's multiclass one) splits into miscalibration (MCB), discrimination (DSC) and
uncertainty (UNC) (``core/calibration/decomposition.py``). UNC depends on the expected labels
alone, so on the same cases it is the same for both runs and the change of the Brier score is
exactly ΔMCB − ΔDSC: a grown MCB is a candidate that got *less honest* (its confidences say
less about how often it is right: recalibration can fix that), a shrunk DSC one that got *less
able to tell cases apart* (no recalibration fixes that). A paired bootstrap over the cases
(``bootstrap_resamples`` from ``seed``, both runs resampled together) gives each change an
interval at ``confidence``; a verdict is only drawn when the interval excludes 0 (without
resamples: from the sign). The top-label decompositions are listed too; their uncertainty
moves with the accuracy, so they do not attribute the change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from decguard_pipeline.core.calibration.decomposition import (
    classwise_brier_decomposition,
    score_decompositions,
)
from decguard_pipeline.core.contract.calibration_measures import CalibrationMeasures
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.report.sidecar import SIDECAR_VERSION
from decguard_pipeline.core.results import CaseResults

if TYPE_CHECKING:
    from decguard_pipeline.core.diff.model import Diff

PARTS = ("score", "miscalibration", "discrimination", "uncertainty")
# verdict words: (worse, better, unclear) per component, where "worse" is the regression
HONESTY = ("less honest", "more honest", "no clear change")
DISCRIMINATION = (
    "less able to tell cases apart",
    "better at telling cases apart",
    "no clear change",
)


def _paired(base: CaseResults, cand: CaseResults) -> np.ndarray:
    """Rows (of the matched pairs) both runs decided, with the candidate's expected label."""
    return np.flatnonzero(base.ok & cand.ok & (cand.expected_index >= 0))


def _as_dict(decomposition: Any) -> dict[str, float] | None:
    return None if decomposition is None else {p: getattr(decomposition, p) for p in PARTS}


def _bootstrap(
    base: np.ndarray,
    cand: np.ndarray,
    expected: np.ndarray,
    measures: CalibrationMeasures,
) -> dict[str, tuple[float, float] | None]:
    """Percentile intervals of ΔMCB and ΔDSC of the Brier score over paired resamples."""
    n = len(expected)
    if not measures.bootstrap_resamples or n < 2:
        return {"miscalibration": None, "discrimination": None}
    rng = np.random.default_rng(measures.seed)
    deltas = np.empty((measures.bootstrap_resamples, 2))
    for r in range(measures.bootstrap_resamples):
        rows = rng.integers(0, n, n)
        b = classwise_brier_decomposition(base[rows], expected[rows])
        c = classwise_brier_decomposition(cand[rows], expected[rows])
        assert b is not None and c is not None  # n >= 2 rows
        deltas[r] = (
            c.miscalibration - b.miscalibration,
            c.discrimination - b.discrimination,
        )
    tail = (1 - measures.confidence) / 2
    low, high = np.quantile(deltas, [tail, 1 - tail], axis=0)
    return {
        "miscalibration": (float(low[0]), float(high[0])),
        "discrimination": (float(low[1]), float(high[1])),
    }


def _verdict(
    delta: float | None, interval: tuple[float, float] | None, words: tuple[str, ...], sign: int
) -> str:
    """``words[0]`` when the change is a regression (``sign`` * delta > 0: MCB up, DSC
    down), ``words[1]`` when an improvement, ``words[2]`` when the interval holds 0."""
    if delta is None:
        return words[2]
    low, high = (delta, delta) if interval is None else interval
    if sign * low > 0 and sign * high > 0:
        return words[0]
    if sign * low < 0 and sign * high < 0:
        return words[1]
    return words[2]


def calibration_shift(
    base: CaseResults, cand: CaseResults, measures: CalibrationMeasures
) -> dict[str, Any]:
    """The diff's sidecar section ``calibration``: both runs' decompositions, their changes
    with intervals (the Brier score's MCB and DSC) and the verdict. ``base`` and ``cand`` are
    the diff's matched pairs (``Pairs.base``, ``Pairs.cand``)."""
    rows = _paired(base, cand)
    expected = cand.expected_index[rows]
    probs = {"baseline": base.probs[rows], "candidate": cand.probs[rows]}
    sides = {side: score_decompositions(p, expected) for side, p in probs.items()}
    decompositions: dict[str, Any] = {}
    for name in sides["baseline"]:
        b, c = _as_dict(sides["baseline"][name]), _as_dict(sides["candidate"][name])
        delta = None if b is None or c is None else {p: c[p] - b[p] for p in PARTS}
        decompositions[name] = {"baseline": b, "candidate": c, "delta": delta}
    brier = decompositions["brier"]["delta"]
    intervals = _bootstrap(probs["baseline"], probs["candidate"], expected, measures)
    mcb = None if brier is None else brier["miscalibration"]
    dsc = None if brier is None else brier["discrimination"]
    return {
        "n": len(rows),
        "settings": {
            "bootstrap_resamples": measures.bootstrap_resamples,
            "confidence": measures.confidence,
            "seed": measures.seed,
        },
        "decomposition": decompositions,
        "intervals": {
            part: None if bounds is None else {"low": bounds[0], "high": bounds[1]}
            for part, bounds in intervals.items()
        },
        "verdict": {
            "honesty": _verdict(mcb, intervals["miscalibration"], HONESTY, +1),
            "discrimination": _verdict(dsc, intervals["discrimination"], DISCRIMINATION, -1),
        },
    }


def _signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.4f}"


def render_calibration_shift(section: dict[str, Any]) -> str:
    """The text block after the diff's layout (and its statistics)."""
    brier = section["decomposition"]["brier"]
    verdict = section["verdict"]
    lines = [
        f"Calibration  Brier decomposition (CORP) over {section['n']} labeled cases both runs"
        " decided"
    ]
    if brier["delta"] is None:
        return "\n".join([*lines, "  nothing to compare"])
    b, c, d = brier["baseline"], brier["candidate"], brier["delta"]
    level = f"{section['settings']['confidence']:.0%}"
    for part in PARTS:
        interval = section["intervals"].get(part)
        band = (
            ""
            if interval is None
            else f"  [{_signed(interval['low'])}, {_signed(interval['high'])}]"
        )
        lines.append(f"  {part:<15} {b[part]:.4f} → {c[part]:.4f}  {_signed(d[part])}{band}")
    how = "" if section["intervals"]["miscalibration"] is None else f", {level} paired bootstrap"
    lines.append(
        f"  Verdict      {verdict['honesty']} (miscalibration); {verdict['discrimination']}"
        f" (discrimination){how}"
    )
    return "\n".join(lines)


def diff_sidecar(diff: Diff) -> dict[str, Any] | None:
    """The diff's sidecar document (``<output stem>.pipeline.json``): the statistics when
    ``pipeline.statistics`` is on, with this comparison as its ``calibration`` section when
    the calibration measures are; None with neither."""
    if diff.calibration is None:
        return diff.statistics
    head = diff.statistics or {
        "sidecar_version": SIDECAR_VERSION,
        "kind": "diff_calibration",
        "producer": PRODUCER_VERSION,
    }
    return {**head, "calibration": diff.calibration}

"""The sidecar section ``calibration`` (``core/calibration/extension.py``) -> rows of the
``calibration`` and ``calibration_curve`` tables, a diff's calibration comparison
(``core/diff/calibration.py``) -> ``diff_calibration`` rows (schema: ``schema/calibration.py``).
The numbers are the sections' own: nothing is computed again."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.warehouse.rows.base import to_json

PARTS = ("score", "miscalibration", "discrimination", "uncertainty")  # CORP, in this order

INTERVALS = {"smece": ("smece_low", "smece_high")}  # measures with an interval (low, high)
_BOUNDS = {bound for pair in INTERVALS.values() for bound in pair}


def calibration_rows(
    section: dict[str, Any], base: dict[str, Any], labels: list[str]
) -> list[dict[str, Any]]:
    """One row per headline measure (an interval's bounds on its measure's row, not rows of
    their own), then ``ece_label`` per contract label (``labels``, the section's column
    order); ``base``: the keys and ``backend``, ``model_version``."""
    headline = section["headline"]
    common = {**base, "n_cases": section["n"], "settings_json": to_json(section["settings"])}
    rows = []
    for measure, value in headline.items():
        if measure in _BOUNDS:
            continue
        low, high = INTERVALS.get(measure, (None, None))
        rows.append(
            {
                **common,
                "measure": measure,
                "label": None,
                "value": value,
                "low": None if low is None else headline[low],
                "high": None if high is None else headline[high],
            }
        )
    for label, value in zip(labels, section["ece_per_label"], strict=False):
        rows.append(
            {**common, "measure": "ece_label", "label": label, "value": value,
             "low": None, "high": None}
        )  # fmt: skip
    return rows


def curve_rows(section: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """The smoothed reliability curve, one row per mesh point (none without cases)."""
    smooth = section["smooth"]
    if smooth is None:
        return []
    curve = smooth["curve"]
    band = curve["lower"] is not None
    return [
        {
            **base,
            "point": i,
            "confidence": x,
            "accuracy": curve["accuracy"][i],
            "lower": curve["lower"][i] if band else None,
            "upper": curve["upper"][i] if band else None,
            "density": curve["density"][i],
        }
        for i, x in enumerate(curve["mesh"])
    ]


def diff_calibration_rows(base: dict[str, Any], section: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per decomposed score and component of a diff's calibration comparison;
    ``base``: the diff tables' key columns (with ``baseline_target``)."""
    verdicts = {"miscalibration": "honesty", "discrimination": "discrimination"}
    rows = []
    for score, sides in section["decomposition"].items():
        b, c, d = sides["baseline"], sides["candidate"], sides["delta"]
        for part in PARTS:
            attributed = score == "brier" and part in verdicts
            interval = section["intervals"].get(part) if attributed else None
            rows.append(
                {
                    **base,
                    "n_cases": section["n"],
                    "score": score,
                    "component": part,
                    "baseline": None if b is None else b[part],
                    "candidate": None if c is None else c[part],
                    "delta": None if d is None else d[part],
                    "low": None if interval is None else interval["low"],
                    "high": None if interval is None else interval["high"],
                    "confidence": section["settings"]["confidence"] if interval else None,
                    "verdict": section["verdict"][verdicts[part]] if attributed else None,
                }
            )
    return rows

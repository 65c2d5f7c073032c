"""The statistics sidecar of a diff (``<output stem>.pipeline.json``) and its text sections.

The DecGuard diff document stays DecGuard's; everything the ``pipeline.statistics``
extension adds lives here: intervals, tests and how each gate was judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from decguard_pipeline.core.contract.statistics import StatisticsSettings
from decguard_pipeline.core.diff.modes import judged_checks, level_label
from decguard_pipeline.core.diff.render import segment_line
from decguard_pipeline.core.diff.statistics import block_statistics, paired_columns
from decguard_pipeline.core.formatting import check_line, num, signed
from decguard_pipeline.core.gates import Check
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.report.sidecar import SIDECAR_VERSION

if TYPE_CHECKING:
    from decguard_pipeline.core.diff.model import Diff


@dataclass
class StatisticsResult:
    document: dict[str, Any]  # the sidecar
    checks: list[Check]  # the diff's checks as the gate modes decide them


def diff_statistics(
    diff: Diff,
    settings: StatisticsSettings,
    *,
    metrics: dict[str, Any],
    shift: dict[str, Any],
    segments: list[dict[str, Any]],
) -> StatisticsResult:
    """Statistics of the whole diff (stream 0) and of every segment (stream 1 + index)."""
    cols = paired_columns(diff)
    every_row = np.arange(len(diff.pairs.cand))
    exact = {"metrics": metrics, "shift": shift}
    overall = block_statistics(cols, every_row, diff, settings, 0, exact)
    blocks = [
        block_statistics(cols, group.rows, diff, settings, 1 + i)
        for i, group in enumerate(diff.groups)
    ]
    gated = [
        (entry, block)
        for entry, block in zip(segments, blocks, strict=True)
        if entry["gated"] and entry["accuracy_drop"] is not None
    ]
    checks, records = judged_checks(
        diff.regression, diff.values, diff.worst_segment, overall, gated, settings
    )
    document = {
        "sidecar_version": SIDECAR_VERSION,
        "kind": "diff_statistics",
        "producer": PRODUCER_VERSION,
        "settings": settings.model_dump(),
        "overall": overall.document,
        "segments": [
            {"key": e["key"], "value": e["value"], "gated": e["gated"], **b.document}
            for e, b in zip(segments, blocks, strict=True)
        ],
        "gates": records,
    }
    return StatisticsResult(document, checks)


def _ci(entry: dict[str, Any], change: bool = False) -> str:
    fmt = signed if change else num
    if entry["value"] is None:
        return "n/a"
    return f"{fmt(entry['value'])} [{fmt(entry['low'])}, {fmt(entry['high'])}]"


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def render_statistics(doc: dict[str, Any]) -> str:
    """Text sections printed after DecGuard's diff layout."""
    s = doc["settings"]
    ci = level_label(s["confidence"])
    overall = doc["overall"]
    lines = [
        f"Statistics   {ci} · alpha {s['alpha']:g} · {s['bootstrap_resamples']} bootstrap"
        f" resamples · seed {s['seed']}",
        "",
        f"  {'Metric':<12}{'baseline [' + ci + ']':>26}{'candidate [' + ci + ']':>26}"
        f"{'delta [' + ci + ']':>28}{'p(worse)':>10}",
    ]
    for name, m in overall["metrics"].items():
        lines.append(
            f"  {name:<12}{_ci(m['baseline']):>26}{_ci(m['candidate']):>26}"
            f"{_ci(m['delta'], change=True):>28}{_p(m['delta']['p_value_candidate_worse']):>10}"
        )
    mc, err, sh = overall["mcnemar"], overall["errors"], overall["shift"]
    lines += [
        "",
        f"  McNemar      {mc['n_pairs']} labeled pairs · {mc['baseline_only_correct']} only"
        f" baseline correct · {mc['candidate_only_correct']} only candidate correct"
        f" · p {_p(mc['p_value'])} (two-sided) · p {_p(mc['p_value_candidate_worse'])}"
        " (candidate worse)",
        f"  Errors       {err['newly_errored']} new · {err['recovered']} recovered"
        f" · p {_p(err['p_value_candidate_worse'])} (candidate worse)",
        f"  Shift        flip rate {_ci(sh['answer_flip_rate'])}"
        f"   mean TV {_ci(sh['mean_tv_distance'])}"
        f"   mean |shift| {_ci(sh['mean_abs_confidence_delta'])}",
    ]
    if doc["segments"]:
        lines += ["", f"  Segments     accuracy delta [{ci}], McNemar p (two-sided)"]
        lines += [
            segment_line(
                seg,
                f"{_ci(seg['metrics']['accuracy']['delta'], change=True):<26}"
                f" p {_p(seg['mcnemar']['p_value'])}",
            )
            for seg in doc["segments"]
        ]
    lines += ["", "  Gate modes"]
    lines += [
        check_line(g["status"], g["gate"], g["mode"], width=30, level=g["level"])
        for g in doc["gates"]
    ]
    return "\n".join(lines)

"""Text blocks of the calibrator sections, printed after DecGuard's layout by ``test`` and by
``calibrate``: the ``calibrator`` section (what was fitted, before/after on the held-out cases,
conformal sets, the suggested ``abstain_below``, the escalation sweep) and the ``calibrated``
section (raw and calibrated numbers of a run whose decisions a calibrator made). Rendered from
the sections alone, so a stored sidecar prints the same."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.formatting import num, signed

SPLIT_WORDS = "stratified by expected label"


def _parameters(section: dict[str, Any], labels: list[str] | None) -> str:
    p, method = section["parameters"], section["method"]
    if method == "temperature":
        t = p["temperature"]
        side = "softens: over-confident" if t > 1 else "sharpens: under-confident" if t < 1 else ""
        bound = ", at its bound" if p.get("at_bound") else ""
        return f"T = {t:.4g} ({side}{bound})" if side else f"T = {t:.4g}"
    if method == "vector":
        names = labels or [str(i) for i in range(len(p["scale"]))]
        return " · ".join(
            f"{name} ×{w:.3g} {b:+.3g}" for name, w, b in zip(names, p["scale"], p["bias"],
                                                               strict=True)
        )  # fmt: skip
    if method == "isotonic":
        points = sum(len(xs) for xs in p["thresholds"])
        return f"one nondecreasing map per label ({points} points)"
    return f"{p['bins']} equal-width bins per label"


def _split(data: dict[str, Any]) -> str:
    split = data["split"]
    if "fraction" in split:
        return f"{split['fraction']:g} of the golden cases ({SPLIT_WORDS}), seed {split['seed']}"
    return f"calibration dataset {split.get('path') or split.get('dataset')}"


def _held_out_lines(held: dict[str, Any]) -> list[str]:
    level = f"{held['confidence']:.0%}"
    lines = [
        f"  Held out ({held['n']} cases, never fitted on)"
        f"{'':<8}before    after     change    {level} paired bootstrap",
    ]
    for row in held["measures"]:
        interval = ""
        if row["low"] is not None:
            interval = f"[{signed(row['low'])}, {signed(row['high'])}]"
        lines.append(
            f"    {row['title']:<40}{num(row['before'], 4):<10}{num(row['after'], 4):<10}"
            f"{signed(row['change']):<10}{interval}"
        )
    return lines


def _conformal_line(conformal: dict[str, Any] | None) -> list[str]:
    if conformal is None:
        return []
    q = "every label (too few calibration cases)" if conformal["q_hat"] is None else (
        f"q̂ {conformal['q_hat']:.4g}"
    )  # fmt: skip
    route = conformal.get("route")
    routed = f" · more than one label: {route}" if route else ""
    return [
        f"  Conformal sets ({conformal['method'].upper()}, alpha {conformal['alpha']:g}, raw"
        f" probabilities) · {q} on {conformal['n_calibration']} calibration cases",
        f"    held-out coverage {num(conformal['coverage'])} (target"
        f" {conformal['target_coverage']:.3f}) · mean set size {num(conformal['mean_set_size'], 2)}"
        f" · one label {num(conformal['singleton_rate'])} · empty"
        f" {num(conformal['empty_rate'])}{routed}",
    ]


def _suggestion_line(suggested: dict[str, Any]) -> str:
    target = (
        f"selective risk <= {suggested['alpha']:g} with probability >= {1 - suggested['delta']:g}"
    )
    if suggested["abstain_below"] is None:
        return (
            f"  Suggested abstain_below: none; no threshold certifies {target} on"
            f" {suggested['n']} held-out cases"
        )
    return (
        f"  Suggested abstain_below {suggested['abstain_below']:g} (calibrated confidence):"
        f" {target} (Learn then Test, {suggested['n']} held-out cases); coverage"
        f" {num(suggested['coverage'])}, observed risk {num(suggested['selective_risk'])}"
    )


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _sweep_lines(escalation: dict[str, Any]) -> list[str]:
    cost, backend = escalation["escalation_cost"], escalation["backend_cost_per_1000"]
    costs = []
    if cost is not None:
        costs.append(f"escalation cost {cost:g} per hand-off")
    if backend is not None:
        costs.append(f"backend {backend:.4g} per 1,000 decisions")
    lines = [
        "  Escalation sweep (calibrated confidence, held-out cases"
        + (f"; {', '.join(costs)}" if costs else "")
        + ")",
        f"    {'abstain_below':<15}{'coverage':<10}{'accuracy':<10}{'hand-off':<10}"
        f"{'escalation/1k':<15}total/1k",
    ]
    for row in escalation["calibrated"]:
        lines.append(
            f"    {row['threshold']:<15.3g}{num(row['coverage']):<10}"
            f"{num(row['accuracy_answered']):<10}{num(row['hand_off_rate']):<10}"
            f"{_money(row['escalation_cost_per_1000']):<15}{_money(row['total_cost_per_1000'])}"
        )
    return lines


def render_calibrator(section: dict[str, Any], labels: list[str] | None = None) -> str:
    """The ``calibrator`` block."""
    data = section["data"]
    how = section["chosen_by"]
    chosen = "auto: lowest cross-validated NLL" if how == "auto" else f"by the {how}"
    lines = [
        f"  Calibrator · {section['method']} ({chosen}) · target {section['target']}",
        f"    fitted on {data['n_calibration']} calibration cases: {_split(data)}",
        f"    logits: {section['logits_note']}",
        f"    {_parameters(section, labels)}",
    ]
    selection = section.get("selection")
    if selection is not None:
        scores = " · ".join(f"{m} {num(v, 4)}" for m, v in selection["nll"].items())
        lines.append(f"    NLL out of fold ({selection['folds']} folds): {scores}")
    lines += _held_out_lines(section["held_out"])
    n = section["held_out"]["n"]
    lines.append(f"    selected label changed on {section['top_label_changes']} of {n} cases")
    lines += _conformal_line(section.get("conformal"))
    lines.append(_suggestion_line(section["abstain_below"]))
    lines += _sweep_lines(section["escalation"])
    return "\n".join(lines)


def render_calibrated(section: dict[str, Any]) -> str:
    """The ``calibrated`` block: which calibrator made the decisions, raw vs calibrated."""
    lines = [
        f"  Calibrated decisions · {section['method']} for {section['target']}"
        f" ({section['file']}): DecGuard's numbers above are the calibrated decider's",
        f"    {'metric':<20}{'raw':<10}{'calibrated':<12}change",
    ]
    seen = section.get("fitted_on_these_cases")
    if seen:
        lines.insert(
            1,
            f"    {seen} of these cases fitted the calibrator: its held-out numbers are"
            " `calibrate`'s",
        )
    for row in section["metrics"]:
        lines.append(
            f"    {row['metric']:<20}{num(row['raw'], 4):<10}{num(row['calibrated'], 4):<12}"
            f"{signed(row['change'])}"
        )
    return "\n".join(lines)


def render_sections(extensions: dict[str, Any], document: dict[str, Any]) -> str:
    """Both blocks a run has (``calibrated`` first: it explains the numbers above it)."""
    labels = list(document["contract"]["labels"])
    blocks = []
    if "calibrated" in extensions:
        blocks.append(render_calibrated(extensions["calibrated"]))
    if "calibrator" in extensions:
        blocks.append(render_calibrator(extensions["calibrator"], labels))
    return "\n\n".join(blocks)

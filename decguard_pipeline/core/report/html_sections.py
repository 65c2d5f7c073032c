"""Sections of the report page: calibration, per label, guard extension (core.report.html
builds the page; properties are in core.properties.html)."""

from __future__ import annotations

from typing import Any

import numpy as np

from decguard_pipeline.core.calibration import (
    confidence_gap,
    equal_mass_reliability,
    mean_confidence,
)
from decguard_pipeline.core.golden.metrics import expected_calibration_error, per_label_counts
from decguard_pipeline.core.html.blocks import checks_table, header, safely, status_chip, table
from decguard_pipeline.core.html.charts import figure, heat_table, reliability_svg
from decguard_pipeline.core.html.markup import Html, el, sig
from decguard_pipeline.core.label_fold import Fold, fold, folded_counts
from decguard_pipeline.core.report.golden import Report


def calibration_section(report: Report, measures: dict[str, Any] | None = None) -> Html:
    """Reliability diagrams over the report's equal-width bins and over equal-mass bins of the
    same number, with both ECEs and the confidence gap. ``measures``: the sidecar's
    ``calibration`` section, when the run has it: its smoothed reliability curve on both
    diagrams and its measures and checks below them."""
    doc = report.document
    calibration = doc["metrics"]["calibration"]
    results = report.results
    labeled = results.ok & (results.expected_index >= 0)
    confidence = results.confidence[labeled]
    correct = results.selected[labeled] == results.expected_index[labeled]
    n_bins = calibration["bins"]
    width_bins = calibration["reliability"]
    mass_bins = equal_mass_reliability(confidence, correct, n_bins)
    ece_mass = expected_calibration_error(mass_bins)
    gap = confidence_gap(confidence, correct)
    mean = mean_confidence(confidence)
    accuracy = doc["metrics"]["classification"]["accuracy"]
    smooth = measures.get("smooth") if measures else None
    curve = smooth["curve"] if smooth else None
    charts = el(
        "div",
        figure(
            reliability_svg(
                width_bins, title=f"Equal-width bins · ECE {sig(calibration['ece'])}", smooth=curve
            ),
            f"{n_bins} bins of width {sig(1 / n_bins)}, DecGuard's binning (the ECE gate uses "
            "it). Dot area and grey bars: cases in the bin; red: the bin's gap to the diagonal "
            "(below it: over-confident).",
        ),
        figure(
            reliability_svg(
                mass_bins, title=f"Equal-mass bins · ECE {sig(ece_mass)}", smooth=curve
            ),
            f"Up to {n_bins} bins holding about the same number of cases each (equal "
            "confidences kept together), so no bin is judged on a handful of cases; grey bars "
            "span each bin's confidence range.",
        ),
        class_="charts",
    )
    if gap is None:
        words = "No labeled, decided case: nothing to calibrate."
    else:
        side = "over-confident" if gap > 0 else "under-confident" if gap < 0 else "calibrated"
        words = (
            f"{calibration['n']:,} labeled, decided cases · mean confidence {sig(mean)} · "
            f"accuracy {sig(accuracy)} · gap {sig(gap)} ({side} on average) · "
            f"Brier {sig(calibration['brier'])} · NLL {sig(calibration['nll'])}"
        )
    extra = None
    if measures:
        found = safely("calibration", lambda: measures_block(measures))
        extra = found if isinstance(found, Html) else None
    return el(
        "div",
        el("p", words, class_="lead"),
        charts,
        extra,
        _bin_tables(width_bins, mass_bins),
    )


def measures_block(m: dict[str, Any]) -> Html:
    """The calibration measures (sidecar section ``calibration``): what the orange curve is,
    then one row per measure and the calibration checks."""
    s, r, a = m["smooth"], m["recalibration"], m["abstention"]
    rows: list[tuple[str, Any, str]] = []
    if s is not None:
        band = (
            f"[{sig(s['low'])}, {sig(s['high'])}] {s['level']:.0%} bootstrap"
            if s["low"] is not None
            else "no interval"
        )
        rows.append(("smooth ECE", s["value"], f"{band}; bandwidth {sig(s['bandwidth'])}"))
    rows += [
        ("ECE top-label", m["ece_top_label"], f"DecGuard's ece, {m['settings']['bins']} bins"),
        ("ECE class-wise", m["ece_classwise"], "mean one-vs-rest ECE over the labels"),
        ("ℓ2 ECE debiased", m["ece_l2_debiased"], f"plug-in {sig(m['ece_l2'])}"),
    ]
    for key, title in (("brier", "Brier"), ("log_loss_top_label", "log loss top-label")):
        d = m["decomposition"][key]
        if d is not None:
            rows.append(
                (
                    f"{title}: miscalibration",
                    d["miscalibration"],
                    f"of {sig(d['score'])}; discrimination {sig(d['discrimination'])}, "
                    f"uncertainty {sig(d['uncertainty'])}",
                )
            )
    if r is not None:
        rows.append(
            (
                "temperature",
                r["temperature"],
                f"out of fold: ECE {sig(r['before']['ece'])} → {sig(r['after']['ece'])}, "
                f"NLL {sig(r['before']['nll'])} → {sig(r['after']['nll'])}",
            )
        )
    target = f"selective risk ≤ {sig(a['alpha'])} with probability ≥ {sig(1 - a['delta'])}"
    if a["threshold"] is None:
        rows.append(("abstention threshold", None, f"none guarantees {target}"))
    else:
        rows.append(
            (
                "abstention threshold",
                a["threshold"],
                f"{target}: coverage {sig(a['coverage'])}, observed risk "
                f"{sig(a['selective_risk'])}",
            )
        )
    head = el("tr", el("th", "measure"), el("th", "value", class_="num"), el("th", ""))
    body = [
        el("tr", el("th", name), el("td", sig(value), class_="num"), el("td", note))
        for name, value, note in rows
    ]
    parts: list[Any] = [
        el("h3", "Calibration measures (pipeline.json)"),
        el(
            "p",
            "Orange: the smoothed reliability curve (kernel bandwidth = smooth ECE) with its "
            "bootstrap band, drawn where there are confidences.",
            class_="muted",
        ),
        el("table", el("thead", head), el("tbody", body), data_section="calibration-measures"),
    ]
    if m["checks"]:
        parts += [el("h3", "Calibration gates"), checks_table(m["checks"])]
    return el("div", parts)


def _bin_tables(width_bins: list[dict[str, Any]], mass_bins: list[dict[str, Any]]) -> Html:
    def bin_table(bins: list[dict[str, Any]]) -> Html:
        head = header((), ("from", "to", "cases", "mean confidence", "accuracy"))
        rows = [
            el(
                "tr",
                [
                    el("td", sig(b[k]), class_="num")
                    for k in ("lower", "upper", "count", "mean_confidence", "accuracy")
                ],
            )
            for b in bins
        ]
        return table(head, rows)

    return el(
        "details",
        el("summary", "the bins as numbers"),
        el(
            "div",
            el("div", el("h3", "equal-width"), bin_table(width_bins)),
            el("div", el("h3", "equal-mass"), bin_table(mass_bins)),
            class_="two",
        ),
    )


def labels_section(report: Report) -> Html:
    """The report's per-label precision, recall, F1 and support, how often each label was
    chosen, and the confusion matrix of the labeled, decided cases. With more than
    ``TOP_LABELS`` labels, those with the most cases are shown one by one and the others
    pooled in one row and column (core.label_fold): the page stays small for any number of
    labels."""
    doc = report.document
    per_label = doc["metrics"]["classification"]["per_label"]
    results = report.results
    labels = list(results.labels)
    k = len(labels)
    labeled = results.ok & (results.expected_index >= 0)
    expected = results.expected_index[labeled]
    predicted = results.selected[labeled]
    tp, predicted_n, support = per_label_counts(expected, predicted, k)
    folded = fold(labels, support + predicted_n)
    head = header(("label",), ("precision", "recall", "F1", "support", "chosen"))
    rows = [
        el(
            "tr",
            el("th", labels[i]),
            [
                el("td", sig(per_label[labels[i]][m]), class_="num")
                for m in ("precision", "recall", "f1")
            ],
            el("td", sig(per_label[labels[i]]["support"]), class_="num"),
            el("td", sig(int(predicted_n[i])), class_="num"),
        )
        for i in folded.shown.tolist()
    ]
    note = None
    if folded.pooled:
        rows.append(_pooled_row(folded, tp, predicted_n, support))
        note = el(
            "p",
            f"{k:,} labels: the {len(folded.shown):,} with the most labeled, decided cases "
            f"(expected or chosen) are shown one by one, the other {folded.pooled:,} pooled in "
            "the last row (precision and recall over their cases together) and in the last "
            "row and column of the matrix (its corner counts every case whose expected and "
            "chosen labels are both pooled, right or wrong). The JSON report has every label.",
            class_="muted",
        )
    scores = table(head, rows, class_="labels")
    matrix = folded_counts(folded, expected, folded, predicted)
    confusion = heat_table(folded.names, folded.names, matrix, corner="expected ↓ · selected →")
    return el(
        "div",
        note,
        el(
            "div",
            el("div", el("h3", "Precision, recall, F1"), scores),
            el("div", el("h3", "Confusion (labeled, decided cases)"), confusion),
            class_="two",
        ),
    )


def _pooled_row(folded: Fold, tp: np.ndarray, predicted_n: np.ndarray, support: np.ndarray) -> Html:
    """The pooled labels as one: precision and recall over their cases together."""
    pooled = folded.position == len(folded.shown)
    hits, chosen, total = (int(a[pooled].sum()) for a in (tp, predicted_n, support))
    precision = hits / chosen if chosen else 0.0
    recall = hits / total if total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return el(
        "tr",
        el("th", folded.names[-1], class_="pooled"),
        [el("td", sig(v), class_="num") for v in (precision, recall, f1)],
        el("td", sig(total), class_="num"),
        el("td", sig(chosen), class_="num"),
        data_pooled=folded.pooled,
    )


def guard_section(sidecar: dict[str, Any]) -> Html:
    """The guard extension's result per suite and its gates (from the sidecar)."""

    def build() -> Html:
        head = header(
            ("suite", "status", "DecGuard"),
            ("cases", "accuracy", "AUROC", "FNR", "FPR", "ECE equal-mass", "confidence gap",
             "AURC"),
        )  # fmt: skip
        rows, gates = [], []
        for e in sidecar["evaluations"]:
            m = e["metrics"]
            guard = next(iter(m["guard"]["labels"].values()), {})
            cal = m["calibration"]
            suite = e.get("suite") or "main"
            rows.append(
                el(
                    "tr",
                    el("th", suite),
                    el("td", status_chip(e["status"])),
                    el("td", status_chip(e["decguard"]["status"])),
                    [
                        el("td", sig(v), class_="num")
                        for v in (
                            e["dataset"]["n_cases"],
                            m["golden"]["accuracy"],
                            guard.get("auroc"),
                            guard.get("fnr"),
                            guard.get("fpr"),
                            cal["ece_equal_mass"],
                            cal["confidence_gap"],
                            m["risk_coverage"]["aurc"],
                        )
                    ],
                )
            )
            for c in e["checks"]:
                gates.append({**c, "gate": f"{c['gate']} [{suite}]"})
        return el(
            "div",
            el("div", table(head, rows), class_="tablewrap"),
            threshold_tables(sidecar["evaluations"]),
            el("h3", "Extension gates"),
            checks_table(gates),
        )

    out = safely("guard", build)
    return out if isinstance(out, Html) else el("p", "")


TARGETS = {"target_recall": "recall ≥", "target_fpr": "FPR ≤"}


def threshold_tables(evaluations: list[dict[str, Any]]) -> list[Html]:
    """Per suite and guarded label: the guard's numbers at each threshold of the grid, then
    the threshold meeting each target (sidecars written before the table have none)."""
    head = header(
        ("threshold",), ("TP", "FP", "TN", "FN", "precision", "recall", "F1", "FPR", "FNR")
    )
    out = []
    for e in evaluations:
        section = e["metrics"].get("thresholds")
        if section is None:
            continue
        for label, t in section["labels"].items():
            rows = [_threshold_row(repr(r["threshold"]), r) for r in t["grid"]]
            for key, relation in TARGETS.items():
                point = t[key]
                if point is None:
                    continue
                name = f"{relation} {sig(point['target'])}: "
                if point["threshold"] is None:
                    rows.append(el("tr", el("th", name + "none"), el("td", point["reason"],
                                                                    colspan="9")))  # fmt: skip
                else:
                    # the threshold whole: a rounded one may not meet the target
                    rows.append(_threshold_row(name + repr(point["threshold"]), point))
            title = f"Thresholds · {e.get('suite') or 'main'} · {label}"
            out += [el("h3", title), el("div", table(head, rows), class_="tablewrap")]
    return out


def _threshold_row(first: str, row: dict[str, Any]) -> Html:
    cells = ("tp", "fp", "tn", "fn", "precision", "recall", "f1", "fpr", "fnr")
    return el("tr", el("th", first), [el("td", sig(row[c]), class_="num") for c in cells])

"""The report page's calibrator sections, from the sidecar alone: the ``calibrator`` section
(what was fitted on the calibration split, before and after on the held-out cases with the
paired bootstrap intervals, conformal sets, the suggested ``abstain_below``, the escalation
sweep as a picture and a table) and the ``calibrated`` section (raw and calibrated numbers of
a run whose decisions a calibrator made)."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.html.blocks import header, table
from decguard_pipeline.core.html.charts import figure
from decguard_pipeline.core.html.escalation import panels
from decguard_pipeline.core.html.markup import Html, el, sig, signed


def _interval(row: dict[str, Any]) -> str:
    if row["low"] is None:
        return "–"
    return f"[{signed(row['low'])}, {signed(row['high'])}]"


def _held_out(held: dict[str, Any]) -> Html:
    head = header(("measure",), ("before", "after", "change"),
                  (f"{held['confidence']:.0%} paired bootstrap",))  # fmt: skip
    rows = [
        el(
            "tr",
            el("th", row["title"]),
            el("td", sig(row["before"]), class_="num"),
            el("td", sig(row["after"]), class_="num"),
            el("td", signed(row["change"]), class_="num"),
            el("td", _interval(row)),
        )
        for row in held["measures"]
    ]
    return table(head, rows, class_="calibrator-held-out")


def _sweep_table(escalation: dict[str, Any]) -> Html:
    head = header(
        (),
        ("abstain below", "coverage", "accuracy answered", "hand-off rate", "escalation / 1,000",
         "backend / 1,000", "total / 1,000"),
    )  # fmt: skip
    keys = ("threshold", "coverage", "accuracy_answered", "hand_off_rate",
            "escalation_cost_per_1000", "backend_cost_per_1000", "total_cost_per_1000")  # fmt: skip
    rows = [
        el("tr", [el("td", sig(r[k]), class_="num") for k in keys])
        for r in escalation["calibrated"]
    ]
    return el("div", table(head, rows, class_="escalation"), class_="tablewrap")


def _conformal(conformal: dict[str, Any] | None) -> Html | None:
    if conformal is None:
        return None
    q = "every label (too few calibration cases)" if conformal["q_hat"] is None else (
        f"q̂ = {sig(conformal['q_hat'])}"
    )  # fmt: skip
    route = conformal.get("route")
    return el(
        "p",
        f"Conformal sets ({conformal['method'].upper()}, alpha {conformal['alpha']:g}, on the"
        f" model's own probabilities): {q} from {conformal['n_calibration']:,} calibration"
        f" cases; held-out coverage {sig(conformal['coverage'])} (target"
        f" {sig(conformal['target_coverage'])}), mean set size {sig(conformal['mean_set_size'])},"
        f" one label {sig(conformal['singleton_rate'])}"
        + (f"; a set of more than one label is routed to {route}." if route else "."),
    )


def _suggestion(suggested: dict[str, Any]) -> Html:
    target = (
        f"selective risk ≤ {suggested['alpha']:g} with probability ≥ {1 - suggested['delta']:g}"
    )
    if suggested["abstain_below"] is None:
        return el("p", f"No threshold certifies {target} on {suggested['n']:,} held-out cases.")
    return el(
        "p",
        el("strong", f"Suggested abstain_below {suggested['abstain_below']:g}"),
        f" (on the calibrated confidence): {target} (Learn then Test on {suggested['n']:,}"
        f" held-out cases); coverage {sig(suggested['coverage'])}, observed risk"
        f" {sig(suggested['selective_risk'])}.",
    )


def calibrator_section(section: dict[str, Any]) -> Html:
    data = section["data"]
    split = data["split"]
    where = (
        f"{split['fraction']:g} of the golden cases (stratified by expected label, seed"
        f" {split['seed']})"
        if "fraction" in split
        else f"the calibration dataset {split.get('path') or split.get('dataset')}"
    )
    lead = el(
        "p",
        el("strong", section["method"]),
        f" for {section['target']} ({section['chosen_by']}), fitted on"
        f" {data['n_calibration']:,} cases: {where}; logits: {section['logits_note']}."
        f" Every number below is on the {data['n_held_out']:,} held-out cases; the selected"
        f" label changed on {section['top_label_changes']:,} of them.",
        class_="lead",
    )
    sweep = figure(
        el("div", panels(section), class_="charts"),
        "Against the threshold below which a decision is handed off (calibrated confidence):"
        " coverage, accuracy on the answered cases and hand-off rate; with costs, the cost per"
        " 1,000 decisions (hand-offs plus the backend's own). Dashed: the suggested"
        " abstain_below.",
    )
    return el(
        "div",
        lead,
        _held_out(section["held_out"]),
        _conformal(section.get("conformal")),
        _suggestion(section["abstain_below"]),
        sweep,
        _sweep_table(section["escalation"]),
    )


def calibrated_section(section: dict[str, Any]) -> Html:
    head = header(("metric",), ("raw", "calibrated", "change"))
    rows = [
        el(
            "tr",
            el("th", row["metric"]),
            el("td", sig(row["raw"]), class_="num"),
            el("td", sig(row["calibrated"]), class_="num"),
            el("td", signed(row["change"]), class_="num"),
        )
        for row in section["metrics"]
    ]
    return el(
        "div",
        el(
            "p",
            f"Every decision on this page was made on probabilities calibrated by"
            f" {section['method']} for {section['target']} ({section['file']}); the raw"
            " probabilities are in each result's metadata.calibration.",
            class_="lead",
        ),
        table(head, rows),
    )

"""The properties section of a ``fuzz`` / ``test --all`` report page: per property the pairs,
violations and flips (with the sidecar's intervals) and the worst of its gates, then every
transformed pair in a filterable table (core.report.html builds the page)."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.gates import overall_status
from decguard_pipeline.core.html.blocks import header, safely, status_chip, table, with_ci
from decguard_pipeline.core.html.markup import Html, el, rounded, sig
from decguard_pipeline.core.html.tables import (
    Column,
    DataTable,
    Filter,
    as_text,
    clip,
    named_labels,
)

VIOLATION, FLIP, PAIR_ERROR, REDUCED = 1, 2, 4, 8


def properties_section(doc: dict[str, Any], sidecar: dict[str, Any]) -> tuple[Html, Html]:
    """Per property: pairs, violations and flips with their intervals (sidecar), and the
    worst gate; then every transformed pair in a filterable table."""
    section = doc["properties"]
    checks: dict[str, list[dict[str, Any]]] = {}
    for check in doc["checks"]:
        name, dot, _ = check["gate"].partition(".")
        if dot:
            checks.setdefault(name, []).append(check)
    extra = safely("properties", lambda: _property_intervals(sidecar))
    intervals, level = extra if isinstance(extra, tuple) else ({}, "")
    head = header(
        ("property", "gates", "level"),
        ("pairs", "violations", "violation rate", "flips", "flip rate", "max TV", "errors",
         "skipped"),
    )  # fmt: skip
    rows = []
    for s in section["summaries"]:
        name = s["property"]
        own = checks.get(name, [])
        ci = intervals.get(name, {})
        rows.append(
            el(
                "tr",
                el("th", name, class_="mono"),
                el("td", status_chip(overall_status(own)) if own else "–"),
                el("td", s["level"]),
                el("td", sig(s["n_evaluated"]), class_="num"),
                el("td", sig(s["n_violations"]), class_="num"),
                el(
                    "td",
                    with_ci(s["violation_rate"], ci.get("violation_rate_interval")),
                    class_="num",
                ),
                el("td", sig(s["n_flips"]), class_="num"),
                el("td", with_ci(s["flip_rate"], ci.get("flip_rate_interval")), class_="num"),
                el("td", sig(s["max_tv_distance"]), class_="num"),
                el("td", sig(s["n_errors"]), class_="num"),
                el("td", sig(s["n_skipped"]), class_="num"),
                data_property=name,
            )
        )
    summaries = table(head, rows)
    notes = [el("p", f"seed {section['seed']}" + level, class_="muted")]
    if isinstance(extra, Html):
        notes.append(extra)
    mount, block = pair_table(doc).render()
    body = el(
        "div", el("div", summaries, class_="tablewrap"), notes, el("h3", "Transformed pairs"), mount
    )
    return body, block


def _property_intervals(sidecar: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], str]:
    """Intervals per property from the sidecar's ``properties`` section, and their level."""
    section = sidecar.get("properties")
    if not isinstance(section, dict):
        return {}, ""
    level = (
        f" · rates with {sig(section['confidence'] * 100)}% {section['interval_method']}"
        " intervals (pipeline.json)"
    )
    return {s["property"]: s for s in section["summaries"]}, level


def pair_table(doc: dict[str, Any]) -> DataTable:
    section = doc["properties"]
    labels = list(doc["contract"]["labels"])
    index = {label: i for i, label in enumerate(labels)}
    names = [s["property"] for s in section["summaries"]]
    which = {name: i for i, name in enumerate(names)}
    rows: dict[str, list[Any]] = {
        key: []
        for key in (
            "id",
            "property",
            "case",
            "input",
            "before",
            "after",
            "tv",
            "delta",
            "violations",
            "options",
            "error",
            "reduced",
        )
    }
    flags = []
    for pair in section["pairs"]:
        comparison = pair.get("comparison") or {}
        error = pair.get("error")
        flag = (VIOLATION if pair["violations"] else 0) | (FLIP if comparison.get("flipped") else 0)
        flag |= PAIR_ERROR if error else 0
        flag |= REDUCED if pair.get("reduced") else 0
        flags.append(flag)
        rows["id"].append(pair["id"])
        rows["property"].append(which.get(pair["property"], -1))
        rows["case"].append(pair["case_id"])
        rows["input"].append(clip(as_text(pair["input"])))
        rows["before"].append(index.get(comparison.get("selected_before"), -1))
        rows["after"].append(index.get(comparison.get("selected_after"), -1))
        rows["tv"].append(rounded(comparison.get("tv_distance")))
        rows["delta"].append(rounded(comparison.get("confidence_delta")))
        rows["violations"].append("; ".join(pair["violations"]) or None)
        shown = pair.get("presentation")
        rows["options"].append(  # clipped: an option_order pair shows every label
            clip(", ".join(f"{s} ({c})" if s != c else s for s, c in shown)) if shown else None
        )
        rows["error"].append(None if not error else clip(f"{error['kind']}: {error['message']}"))
        reduced = pair.get("reduced")
        rows["reduced"].append(clip(as_text(reduced["input"])) if reduced else None)
    vocab = named_labels(labels, rows, ("before", "after"))
    return DataTable(
        name="pairs",
        title="transformed pairs",
        columns=[
            Column("property", "property", "label", vocab=names, width="9rem"),
            Column("case", "case", "mono", width="7rem"),
            Column("input", "transformed input"),
            Column("before", "before", "label", vocab=vocab, width="7rem"),
            Column("after", "after", "label", vocab=vocab, width="7rem"),
            Column("tv", "TV", "num", width="5rem"),
            Column("violations", "violations", width="13rem"),
        ],
        details=[
            Column("id", "pair id"),
            Column("options", "options as shown"),
            Column("delta", "confidence change", "num"),
            Column("error", "error"),
            Column("reduced", "minimized input"),
        ],
        rows=rows,
        flags=flags,
        filters=[
            Filter("violations", VIOLATION),
            Filter("flips", FLIP),
            Filter("errors", PAIR_ERROR),
            Filter("all pairs", 0),
        ],
        search=["id", "property", "case", "input", "violations", "error"],
        labels=vocab,
        label_count=None if vocab is labels else len(labels),
        search_hint="search property, case, input, violation",
        empty="no pair matches",
        page_size=15,
        # violations first; all pairs when there is none
        start=0 if any(flag & VIOLATION for flag in flags) else 3,
    )

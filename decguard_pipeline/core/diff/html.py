"""The HTML page of a regression diff (one self-contained file).

Entry points: :func:`render_diff_html` (the diff document, its statistics sidecar and the flip
matrix -> the page text) and :func:`write_diff_html`. The verdict and the checks are the diff
document's; intervals and p-values come from the ``pipeline.statistics`` sidecar when there is
one. The diff document lists changed cases only, so a page made from the document alone shows
the flip matrix's off-diagonal (the flips) and the number of unchanged answers; given
``Diff.flips()`` it shows the whole matrix. With many labels, those in the most flips have a
row and column each and the others share one (core.label_fold).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from decguard_pipeline.core.diff.html_changes import change_table
from decguard_pipeline.core.diff.render import VERDICTS
from decguard_pipeline.core.html.blocks import checks_table, header, safely, table, tile
from decguard_pipeline.core.html.charts import heat_table
from decguard_pipeline.core.html.markup import Html, el, sig, signed
from decguard_pipeline.core.html.page import Page, Section, write_html
from decguard_pipeline.core.label_fold import LabelMatrix, fold, folded_counts
from decguard_pipeline.core.report.render import model_label, short_hash

HIGHER_IS_BETTER = {"accuracy", "macro_f1", "coverage"}  # for the others, lower is better
METRIC_TITLES = {
    "accuracy": "accuracy",
    "macro_f1": "macro-F1",
    "ordinal_mae": "ordinal MAE",
    "ece": "ECE",
    "brier": "Brier",
    "nll": "NLL",
    "coverage": "coverage",
    "error_rate": "error rate",
    "latency_p50_ms": "p50 latency (ms)",
    "latency_p95_ms": "p95 latency (ms)",
}


def render_diff_html(
    document: dict[str, Any],
    statistics: dict[str, Any] | None = None,
    *,
    flip_matrix: LabelMatrix | list[list[int]] | None = None,
    source: str = "",
) -> str:
    """The page of a diff ``document`` (as ``diff -o`` writes it); ``statistics`` is its
    ``pipeline.statistics`` sidecar, ``flip_matrix`` ``Diff.flips()`` (or the whole
    ``Diff.flip_matrix()``) when at hand."""
    doc = document
    stats = statistics if isinstance(statistics, dict) else {}
    contract = doc["contract"]
    base, cand = doc["baseline"]["backend"], doc["candidate"]["backend"]
    page = Page.judged(
        doc,
        VERDICTS,
        kind="DecGuard regression diff",
        subtitle=f"{contract['type']} · baseline {model_label(base)} → candidate "
        f"{model_label(cand)}",
        facts=_facts(doc),
        source=source,
    )
    sections = page.sections
    sections.append(Section("gates", "Regression gates", _gates(doc, stats)))
    sections.append(Section("changes", "What changed", _change_tiles(doc, stats)))
    sections.append(Section("metrics", "Metrics", _metrics(doc, stats)))
    labels = list(contract["labels"])
    sections.append(Section("flips", "Flip matrix", _flips(doc, labels, flip_matrix)))
    if doc["segments"]:
        sections.append(Section("segments", "Segments", _segments(doc, stats)))
    mount, block = change_table(doc).render()
    sections.append(Section("cases", "Changed cases", mount, "(click a row for details)"))
    page.blocks.append(block)
    return page.render()


def write_diff_html(
    path: str | Path,
    document: dict[str, Any],
    statistics: dict[str, Any] | None = None,
    *,
    flip_matrix: LabelMatrix | list[list[int]] | None = None,
    source: str = "",
) -> Path:
    """Render and write the page atomically; ReportError when it cannot be written."""
    text = render_diff_html(document, statistics, flip_matrix=flip_matrix, source=source)
    return write_html(path, text)


def _facts(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    facts: list[tuple[str, Any]] = []
    for role in ("baseline", "candidate"):
        run = doc[role]
        backend = run["backend"]
        facts.append(
            (
                role,
                f"{run['path']} · {backend['name']}: {backend['provider']} · "
                f"{model_label(backend)} · {run['created_at']}",
            )
        )
    c = doc["counts"]
    facts.append(
        (
            "cases",
            f"{c['matched']:,} matched · {c['compared']:,} compared · "
            f"{c['only_in_baseline']:,} only in baseline · {c['only_in_candidate']:,} only in "
            "candidate",
        )
    )
    dataset = doc["candidate"]["dataset"]
    same = "same dataset" if doc["same_dataset"] else "different datasets (matched by case id)"
    facts.append(("dataset", f"{dataset['path']} ({short_hash(dataset['hash'])}) · {same}"))
    facts.append(("created", f"{doc['created_at']} · {doc['decguard_version']}"))
    return facts


def _gates(doc: dict[str, Any], stats: dict[str, Any]) -> Html:
    if not isinstance(stats.get("gates"), list):
        return checks_table(doc["checks"])

    def modes() -> Html:
        rows = [
            el(
                "tr",
                el("td", g["gate"], class_="mono"),
                el("td", g["mode"]),
                el("td", sig(g["p_value"]), class_="num"),
                el("td", f"[{sig(g['low'])}, {sig(g['high'])}]", class_="num"),
                el("td", g.get("test") or "–"),
                el("td", g.get("segment") or "–"),
            )
            for g in stats["gates"]
        ]
        head = header(("gate", "mode"), ("p (worse)", "interval of the value"), ("test", "segment"))
        return el(
            "div", el("h3", "How each gate was judged (pipeline.statistics)"), table(head, rows)
        )

    return el("div", checks_table(doc["checks"]), safely("statistics", modes))


def _change_tiles(doc: dict[str, Any], stats: dict[str, Any]) -> Html:
    c, s = doc["counts"], doc["shift"]
    shift_ci = safely("statistics", lambda: stats.get("overall", {}).get("shift") or {})
    shift_ci = shift_ci if isinstance(shift_ci, dict) else {}

    def noted(title: str, value: str, note: str = "", tone: str = "") -> Html:
        return tile(title, value, el("div", note, class_="ci") if note else None, tone=tone)

    def ci(name: str) -> str:
        entry = shift_ci.get(name)
        if isinstance(entry, dict) and entry.get("low") is not None:
            return f"[{sig(entry['low'])}, {sig(entry['high'])}] {entry.get('method', '')}"
        return ""

    flips_note = f"{sig(s['answer_flip_rate'])} of compared"
    extra = ci("answer_flip_rate")
    return el(
        "div",
        el(
            "div",
            noted(
                "answer flips",
                sig(c["answer_flips"]),
                flips_note + (f" · {extra}" if extra else ""),
                "warn" if c["answer_flips"] else "",
            ),
            noted("newly wrong", sig(c["newly_wrong"]), "", "fail" if c["newly_wrong"] else ""),
            noted(
                "newly correct", sig(c["newly_correct"]), "", "pass" if c["newly_correct"] else ""
            ),
            noted(
                "newly errored", sig(c["newly_errored"]), "", "fail" if c["newly_errored"] else ""
            ),
            noted("recovered", sig(c["recovered"]), f"{sig(c['still_errored'])} still errored"),
            noted(
                "mean TV distance",
                sig(s["mean_tv_distance"]),
                f"max {sig(s['max_tv_distance'])}"
                + (f" · {ci('mean_tv_distance')}" if ci("mean_tv_distance") else ""),
            ),
            noted(
                "mean |confidence shift|",
                sig(s["mean_abs_confidence_delta"]),
                f"mean shift {signed(s['mean_confidence_delta'])} · max |shift| "
                f"{sig(s['max_abs_confidence_delta'])}",
            ),
            class_="tiles",
        ),
    )


def _metrics(doc: dict[str, Any], stats: dict[str, Any]) -> Html:
    found = safely("statistics", lambda: (stats.get("overall") or {}).get("metrics") or {})
    intervals = found if isinstance(found, dict) else {}
    numbers = ("baseline", "candidate", "delta") + (("p (worse)",) if intervals else ())
    head = header(("metric",), numbers, ("change",))
    rows = []
    for name, m in doc["metrics"].items():
        if m["baseline"] is None and m["candidate"] is None:
            continue
        entry = intervals.get(name) or {}
        cells = [
            _with(m["baseline"], entry.get("baseline")),
            _with(m["candidate"], entry.get("candidate")),
            _with(m["delta"], entry.get("delta"), delta=True),
        ]
        if intervals:
            p = (entry.get("delta") or {}).get("p_value_candidate_worse")
            cells.append(sig(p))
        tone = _direction(name, m["delta"])
        rows.append(
            el(
                "tr",
                el("th", METRIC_TITLES.get(name, name)),
                [el("td", v, class_="num") for v in cells],
                el("td", el("span", tone, class_=f"chip st-{_tone_class(tone)}") if tone else "–"),
                data_metric=name,
            )
        )
    note = (
        el(
            "p",
            "Each run's metrics over the matched cases; intervals and one-sided p-values "
            "that the candidate is worse from pipeline.statistics.",
            class_="muted",
        )
        if intervals
        else el("p", "Each run's metrics over the matched cases.", class_="muted")
    )
    return el("div", note, table(head, rows))


def _with(value: Any, interval: Any, *, delta: bool = False) -> Html:
    text = signed(value) if delta else sig(value)
    if isinstance(interval, dict) and interval.get("low") is not None:
        low, high = interval["low"], interval["high"]
        bounds = f"[{signed(low)}, {signed(high)}]" if delta else f"[{sig(low)}, {sig(high)}]"
        return el("span", text, " ", el("span", bounds, class_="muted"))
    return el("span", text)


def _direction(name: str, delta: Any) -> str:
    if not isinstance(delta, int | float) or delta == 0:
        return ""
    better = delta > 0 if name in HIGHER_IS_BETTER else delta < 0
    return "better" if better else "worse"


def _tone_class(tone: str) -> str:
    return {"better": "pass", "worse": "fail"}.get(tone, "")


def _flips(
    doc: dict[str, Any], labels: list[str], matrix: LabelMatrix | list[list[int]] | None
) -> Html:
    corner = "baseline ↓ · candidate →"
    if isinstance(matrix, list):  # a whole matrix: one row and column per label
        matrix = LabelMatrix(labels, matrix)
    if matrix is not None:
        table = heat_table(matrix.names, matrix.names, matrix.cells, corner=corner)
        note = "Compared cases by the baseline's and the candidate's answer; the diagonal kept it."
        if matrix.pooled:
            note += _pooled_note(len(labels), matrix.pooled, "compared cases whose two answers")
        return el("div", el("p", note, class_="muted"), el("div", table, class_="scroll"))
    # the document lists changed cases only: the flips, by label
    index = {label: i for i, label in enumerate(labels)}
    flips = [c for c in doc["changes"] if c["kind"] == "flip"]
    base = np.array([index[c["baseline_selected"]] for c in flips], dtype=np.int64)
    cand = np.array([index[c["candidate_selected"]] for c in flips], dtype=np.int64)
    k = len(labels)
    folded = fold(labels, np.bincount(base, minlength=k) + np.bincount(cand, minlength=k))
    counts = folded_counts(folded, base, folded, cand)
    shown = len(folded.shown)
    cells: list[list[int | None]] = [
        [None if i == j and i < shown else v for j, v in enumerate(row)]
        for i, row in enumerate(counts)
    ]
    kept = doc["counts"]["compared"] - doc["counts"]["answer_flips"]
    note = (
        f"Flips by the baseline's and the candidate's answer. The diff document lists changed "
        f"cases only: {kept:,} compared cases kept their answer (per label: –)."
    )
    if folded.pooled:
        note += _pooled_note(k, folded.pooled, "flips whose two answers")
    table = heat_table(folded.names, folded.names, cells, corner=corner, totals=False)
    return el("div", el("p", note, class_="muted"), el("div", table, class_="scroll"))


def _pooled_note(k: int, pooled: int, corner: str) -> str:
    return (
        f" {k:,} labels: those in the most flips have their own row and column, the other "
        f"{pooled:,} share the last ones (its corner counts the {corner} are both among "
        "them). The diff document has every change."
    )


def _segments(doc: dict[str, Any], stats: dict[str, Any]) -> Html:
    found = safely(
        "statistics", lambda: {(s["key"], s["value"]): s for s in stats.get("segments") or []}
    )
    by_segment = found if isinstance(found, dict) else {}
    head = header(
        ("segment",),
        ("matched", "baseline accuracy", "candidate accuracy", "accuracy drop", "flip rate"),
        ("gated",),
    )
    rows = []
    for seg in doc["segments"]:
        extra = by_segment.get((seg["key"], seg["value"])) or {}
        delta = ((extra.get("metrics") or {}).get("accuracy") or {}).get("delta")
        drop = el("span", sig(seg["accuracy_drop"]))
        if isinstance(delta, dict) and delta.get("low") is not None:
            # the drop is minus the accuracy delta: its interval is the delta's, negated
            bounds = f"[{sig(-delta['high'])}, {sig(-delta['low'])}]"
            drop = el("span", sig(seg["accuracy_drop"]), " ", el("span", bounds, class_="muted"))
        rows.append(
            el(
                "tr",
                el("th", f"{seg['key']}={seg['value']}", class_="mono"),
                el("td", sig(seg["matched"]), class_="num"),
                el("td", sig(seg["baseline_accuracy"]), class_="num"),
                el("td", sig(seg["candidate_accuracy"]), class_="num"),
                el("td", drop, class_="num"),
                el("td", sig(seg["answer_flip_rate"]), class_="num"),
                el("td", "yes" if seg["gated"] else "no (small)"),
            )
        )
    return el("div", table(head, rows), class_="tablewrap")

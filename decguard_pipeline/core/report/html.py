"""The HTML page of a test / fuzz / ``test --all`` report (one self-contained file).

Entry points: :func:`render_report_html` (a :class:`Report` and its sidecar document -> the page
text) and :func:`write_report_html` (the same, written atomically to a path). What the page
shows comes from the report and its sidecar as they are: the verdict and the checks are the
report's (DecGuard's decision), the equal-width reliability bins are the report's table, the
equal-mass bins come from ``core.calibration``, intervals from the sidecar's ``statistics`` and
``properties`` sections. See docs/html-report.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson

from decguard_pipeline.core.golden.metrics import gate_values
from decguard_pipeline.core.html.blocks import COMPARISONS, checks_table, safely, status_chip, tile
from decguard_pipeline.core.html.markup import Html, el, rounded_array, sig
from decguard_pipeline.core.html.page import Page, Section, write_html
from decguard_pipeline.core.html.tables import Column, DataTable, Filter, as_text, clip
from decguard_pipeline.core.label_fold import TOP_LABELS, top_probabilities, used_labels
from decguard_pipeline.core.properties.html import properties_section
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.html_calibrator import (
    calibrated_section,
    calibrator_section,
)
from decguard_pipeline.core.report.html_sections import (
    calibration_section,
    guard_section,
    labels_section,
)
from decguard_pipeline.core.report.html_verdict import judge
from decguard_pipeline.core.report.render import VERDICTS, model_label, short_hash
from decguard_pipeline.core.report.sidecar import sidecar_path
from decguard_pipeline.core.verdict import Verdict

MISMATCH, ERROR, LOW, UNLABELED = 1, 2, 4, 8
OUTCOMES = ["correct", "mismatch", "error", "unlabeled"]
LOW_CONFIDENCE_DEFAULT = 0.5  # "low confidence" when the contract sets no threshold

# metric tiles: the gate_values name, its title
TILES = (
    ("accuracy", "accuracy"),
    ("macro_f1", "macro-F1"),
    ("ordinal_mae", "ordinal MAE"),
    ("ece", "ECE (equal-width)"),
    ("brier", "Brier"),
    ("nll", "NLL"),
    ("coverage", "coverage"),
    ("selective_accuracy", "selective accuracy"),
    ("abstention_rate", "abstention rate"),
    ("error_rate", "error rate"),
    ("latency_p95_ms", "p95 latency (ms)"),
)
MODES = {"test": "golden test", "fuzz": "fuzz (properties)", "all": "test --all"}
# sidecar sections of calibrators: (key, heading, builder)
CALIBRATOR_SECTIONS = (
    ("calibrated", "Calibrated decisions", calibrated_section),
    ("calibrator", "Calibrator", calibrator_section),
)


def render_report_html(
    report: Report,
    sidecar: dict[str, Any] | None = None,
    *,
    source: str = "",
    verdict: Verdict | None = None,
    diff_href: str | None = None,
) -> str:
    """The page of ``report``; ``sidecar`` is its ``<report>.pipeline.json`` document (or
    the same sections built in memory), ``source`` the report file's name for the footer;
    ``verdict``: the pipeline's verdict when gates beyond DecGuard's judge the run (the
    banner's, ``core/report/html_verdict.py``), ``diff_href`` the regression diff's page."""
    doc = report.document
    sidecar = sidecar if isinstance(sidecar, dict) else {}
    contract = doc["contract"]
    page = Page.judged(
        doc,
        VERDICTS,
        kind=f"DecGuard report · {MODES.get(doc['mode'], doc['mode'])}",
        subtitle=f"{contract['type']} · labels: {label_list(contract['labels'])}",
        facts=_facts(doc),
        source=source,
    )
    if verdict is not None:
        judge(page, doc, verdict, diff_href)
    extension = safely("guard", lambda: _extension_verdict(sidecar))
    if extension:
        page.also.append(extension)
    calibrated = safely("calibration", lambda: _calibration_verdict(sidecar))
    if calibrated:
        page.also.append(calibrated)
    sections = page.sections
    sections.append(Section("gates", "Gates", checks_table(doc["checks"])))
    sections.append(Section("metrics", "Metrics", _metrics(doc, sidecar), _tiles_note(doc)))
    if doc.get("properties") is not None:
        body, block = properties_section(doc, sidecar)
        sections.append(Section("properties", "Properties", body))
        page.blocks.append(block)
    if doc["metrics"]["calibration"]["n"] or doc["mode"] != "fuzz":
        measures = sidecar.get("calibration")
        measures = measures if isinstance(measures, dict) else None
        sections.append(
            Section("calibration", "Calibration", calibration_section(report, measures))
        )
    if doc["metrics"]["classification"]["per_label"]:
        sections.append(Section("labels", "Per label", labels_section(report)))
    if isinstance(sidecar.get("evaluations"), list):
        body = guard_section(sidecar)
        sections.append(Section("guard", "Guard extension", body, "(pipeline.json)"))
    for key, title, build in CALIBRATOR_SECTIONS:
        if isinstance(sidecar.get(key), dict):
            body = safely(key, lambda b=build, k=key: b(sidecar[k]))  # type: ignore[misc]
            sections.append(Section(key, title, body, "(pipeline.json)"))
    mount, block = case_table(report).render()
    sections.append(Section("cases", "Cases", mount, _cases_note(doc)))
    page.blocks.append(block)
    return page.render()


def label_list(labels: list[str]) -> str:
    """The labels for a heading: all of them, or the first ``TOP_LABELS`` and how many more."""
    if len(labels) <= TOP_LABELS:
        return ", ".join(labels)
    return ", ".join(labels[:TOP_LABELS]) + f" … ({len(labels):,} labels)"


def write_report_html(
    path: str | Path,
    report: Report,
    sidecar: dict[str, Any] | None = None,
    *,
    source: str = "",
    verdict: Verdict | None = None,
    diff_href: str | None = None,
) -> Path:
    """Render and write the page atomically; ReportError when it cannot be written."""
    page = render_report_html(report, sidecar, source=source, verdict=verdict, diff_href=diff_href)
    return write_html(path, page)


def read_sidecar(report_path: str | Path, report: Report) -> dict[str, Any] | None:
    """The sidecar next to a stored report when it was written with that very report (same
    file name and ``created_at``); None when absent, unreadable or another run's."""
    path = sidecar_path(report_path)
    try:
        data = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("report") != Path(report_path).name:
        return None
    if data.get("created_at") != report.document["created_at"]:
        return None
    return data


def _facts(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    backend, dataset, contract = doc["backend"], doc["dataset"], doc["contract"]
    counts = doc["metrics"]["counts"]
    facts: list[tuple[str, Any]] = [
        ("model", f"{backend['name']}: {backend['provider']} · {model_label(backend)}"),
        (
            "cases",
            f"{counts['total']:,} · {counts['succeeded']:,} decided · "
            f"{counts['errored']:,} errored · {counts['labeled']:,} labeled",
        ),
        ("dataset", f"{dataset['path']} ({short_hash(dataset['hash'])})"),
        ("contract", f"{contract['path']} ({short_hash(contract['hash'])})"),
        ("created", f"{doc['created_at']} · {doc['decguard_version']}"),
    ]
    health = doc.get("health")
    if health is not None and health.get("status") != "ok":
        facts.append(("health", f"{health['status']}: {health['detail']}"))
    return facts


def _extension_verdict(sidecar: dict[str, Any]) -> Html | None:
    """The guard extension's own verdict (its gates, every suite), when the sidecar has it."""
    evaluations = sidecar.get("evaluations")
    if not isinstance(evaluations, list) or "status" not in sidecar:
        return None
    bad = [
        f"{c['gate']} ({e.get('suite') or 'main'})"
        for e in evaluations
        for c in e["checks"]
        if c["status"] != "pass"
    ]
    status = str(sidecar["status"])
    text = "the pipeline's guard gates, every suite included"
    return el(
        "span",
        status_chip(status),
        " ",
        text,
        ": " + ", ".join(bad) if bad else "",
        data_extension_status=status,
    )


def _calibration_verdict(sidecar: dict[str, Any]) -> Html | None:
    """The calibration gates' verdict, when the sidecar's calibration section has gates."""
    section = sidecar.get("calibration")
    if not isinstance(section, dict) or not section.get("checks"):
        return None
    status = str(section["status"])
    bad = [c["gate"] for c in section["checks"] if c["status"] != "pass"]
    return el(
        "span",
        status_chip(status),
        " the pipeline's calibration gates",
        ": " + ", ".join(bad) if bad else "",
        data_calibration_status=status,
    )


def _tiles_note(doc: dict[str, Any]) -> str:
    if doc["mode"] == "fuzz":
        return "(fuzz mode: golden gates are not applied)"
    return ""


def _metrics(doc: dict[str, Any], sidecar: dict[str, Any]) -> Html:
    values = gate_values(doc["metrics"])
    values["latency_p50_ms"] = doc["metrics"]["latency"]["p50_ms"]
    gated: dict[str, list[dict[str, Any]]] = {}
    for check in doc["checks"]:
        gated.setdefault(check["metric"], []).append(check)
    found = safely("statistics", lambda: _intervals(sidecar))
    intervals = found if isinstance(found, dict) else {}
    tiles = []
    for name, title in TILES:
        if values.get(name) is None and name not in gated:
            continue
        tiles.append(_tile(title, values.get(name), gated.get(name, []), intervals.get(name)))
    latency = doc["metrics"]["latency"]
    tail = "latency ms: " + " · ".join(
        f"{name} {sig(latency[f'{name}_ms'])}" for name in ("mean", "p50", "p90", "p99", "max")
    )
    counts = doc["metrics"]["counts"]
    errors = ", ".join(f"{k} {v:,}" for k, v in counts["errors_by_kind"].items())
    lines = [el("p", tail, class_="muted")]
    if errors:
        lines.insert(0, el("p", f"errors by kind: {errors}", class_="muted"))
    level = intervals.get("__level__")
    if level:
        lines.append(el("p", level, class_="muted"))
    if isinstance(found, Html):  # the sidecar's section could not be read: say so
        lines.append(found)
    return el("div", el("div", tiles, class_="tiles"), lines)


def _intervals(sidecar: dict[str, Any]) -> dict[str, Any]:
    if "statistics" not in sidecar:
        return {}
    section = sidecar["statistics"]
    out: dict[str, Any] = dict(section["intervals"].items())
    out["__level__"] = (
        f"intervals: {sig(section['confidence'] * 100)}% · Wilson for rates, percentile "
        f"bootstrap ({section['bootstrap_resamples']:,} resamples, seed {section['seed']}) "
        "for macro-F1, ECE, Brier, NLL (pipeline.json)"
    )
    return out


def _tile(title: str, value: Any, checks: list[dict[str, Any]], interval: Any) -> Html:
    status = None
    for wanted in ("fail", "warn", "pass"):
        if any(c["status"] == wanted for c in checks):
            status = wanted
            break
    gate_lines = [
        el(
            "div",
            f"{COMPARISONS.get(c['comparison'], c['comparison'])} {sig(c['threshold'])} ",
            el("b", c["level"]),
            class_="gate",
        )
        for c in checks
    ]
    ci = None
    if isinstance(interval, dict) and interval.get("low") is not None:
        ci = el(
            "div",
            f"[{sig(interval['low'])}, {sig(interval.get('high'))}] {interval.get('method', '')}",
            class_="ci",
        )
    return tile(title, sig(value), ci, gate_lines, tone=status, data_metric=title)


def _cases_note(doc: dict[str, Any]) -> str:
    return "(click a row for its probabilities, metadata and error)"


def low_confidence_threshold(doc: dict[str, Any]) -> float:
    threshold = doc["evaluation"].get("confidence_threshold")
    return LOW_CONFIDENCE_DEFAULT if threshold is None else float(threshold)


def case_table(report: Report) -> DataTable:
    """Every case: outcome, input, expected and selected label, confidence; opened, the
    probabilities, latency, metadata and error. Flags: mismatch, error, low confidence."""
    results = report.results
    labels = list(results.labels)
    ok = results.ok
    expected = results.expected_index
    selected = results.selected
    threshold = low_confidence_threshold(report.document)
    # the report's definitions: a mismatch is a decided, labeled case answered wrongly
    # (core.report.golden.failures); low confidence is "not covered" (confidence < threshold)
    mismatch = ok & (expected >= 0) & (selected != expected)
    low = ok & (results.confidence < threshold)
    unlabeled = ok & (expected < 0)
    flags = (mismatch * MISMATCH) | (~ok * ERROR) | (low * LOW) | (unlabeled * UNLABELED)
    outcome = np.where(~ok, 2, np.where(unlabeled, 3, np.where(mismatch, 1, 0)))
    confidence = rounded_array(results.confidence)
    latency = rounded_array(results.latency_ms)
    probs, probs_kind = _probabilities(results.probs, len(labels))
    vocab = labels
    if probs_kind == "topprobs":  # the rows name a few of many labels: only those go in
        named = [index for case in probs if case for index, _ in case]
        vocab, place = used_labels(labels, expected, selected, np.array(named, dtype=np.int64))
        expected, selected = place[expected], place[selected]
        probs = [case and [[int(place[i]), p] for i, p in case] for case in probs]
    errors = [
        None if kind is None else clip(f"{kind}: {message}")
        for kind, message in zip(results.error_kind, results.error_message, strict=True)
    ]
    rows = {
        "id": results.case_ids,
        "outcome": outcome.tolist(),
        "input": [clip(as_text(v)) for v in results.inputs],
        "expected": expected.tolist(),
        "selected": selected.tolist(),
        "confidence": confidence,
        "probs": probs,
        "latency": latency,
        "metadata": [clip(as_text(m)) if m else None for m in results.metadata],
        "error": errors,
    }
    return DataTable(
        name="cases",
        title="cases",
        columns=[
            Column("id", "case", "mono", width="9rem"),
            Column("outcome", "outcome", "status", vocab=OUTCOMES, width="7rem"),
            Column("input", "input"),
            Column("expected", "expected", "label", vocab=vocab, width="8rem"),
            Column("selected", "selected", "label", vocab=vocab, width="8rem"),
            Column("confidence", "confidence", "conf", width="9rem"),
        ],
        details=[
            Column("probs", "probabilities", probs_kind),
            Column("error", "error"),
            Column("latency", "latency (ms)", "num"),
            Column("metadata", "metadata"),
            Column("input", "input (whole)"),
        ],
        rows=rows,
        flags=flags.astype(np.int64).tolist(),
        filters=[
            Filter("all", 0),
            Filter("mismatches", MISMATCH),
            Filter("errors", ERROR),
            Filter(f"low confidence (< {sig(threshold)})", LOW),
        ],
        search=["id", "input", "expected", "selected", "error", "metadata"],
        labels=vocab,
        label_count=None if vocab is labels else len(labels),
        search_hint="search id, input, label, error, metadata",
        empty="no case matches",
    )


def _probabilities(probs: np.ndarray, n_labels: int) -> tuple[list[Any], str]:
    """Each case's probabilities for its details: every label's (``probs``, rows of NaN
    for errored cases), or with more than ``TOP_LABELS`` labels the largest ones and the
    others' sum (``topprobs``), so the page does not grow with cases times labels."""
    if n_labels <= TOP_LABELS:
        return rounded_array(probs), "probs"
    index, shown, rest, missing = top_probabilities(probs)
    values, rests = rounded_array(shown), rounded_array(rest)
    rows: list[Any] = []
    for i, label_index in enumerate(index.tolist()):
        if missing[i]:
            rows.append(None)
            continue
        rows.append([*map(list, zip(label_index, values[i], strict=True)), [-1, rests[i]]])
    return rows, "topprobs"

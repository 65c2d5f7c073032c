"""The changed cases of a diff page: every flipped, newly errored or recovered case with both
runs' answers side by side, filterable by kind (core.diff.html builds the page)."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.html.markup import rounded
from decguard_pipeline.core.html.tables import (
    Column,
    DataTable,
    Filter,
    as_text,
    clip,
    named_labels,
)

FLIP, NEWLY_WRONG, NEWLY_CORRECT, NEWLY_ERRORED, RECOVERED = 1, 2, 4, 8, 16
KINDS = ["flip", "newly wrong", "newly correct", "newly errored", "recovered"]


def change_table(doc: dict[str, Any]) -> DataTable:
    """Every changed case with both runs' answers side by side."""
    labels = list(doc["contract"]["labels"])
    index = {label: i for i, label in enumerate(labels)}
    keys = (
        "id",
        "kind",
        "input",
        "expected",
        "baseline",
        "base_conf",
        "candidate",
        "cand_conf",
        "tv",
        "delta",
        "error",
    )
    rows: dict[str, list[Any]] = {key: [] for key in keys}
    flags = []
    for change in doc["changes"]:
        kind, flag = _kind(change)
        flags.append(flag)
        base_conf, cand_conf = change["baseline_confidence"], change["candidate_confidence"]
        rows["id"].append(change["case_id"])
        rows["kind"].append(KINDS.index(kind))
        rows["input"].append(clip(as_text(change["input"])))
        rows["expected"].append(index.get(change["expected"], -1))
        rows["baseline"].append(index.get(change["baseline_selected"], -1))
        rows["base_conf"].append(rounded(base_conf))
        rows["candidate"].append(index.get(change["candidate_selected"], -1))
        rows["cand_conf"].append(rounded(cand_conf))
        rows["tv"].append(rounded(change["tv_distance"]))
        both = base_conf is not None and cand_conf is not None
        rows["delta"].append(rounded(cand_conf - base_conf) if both else None)
        rows["error"].append(clip(change["error"]))
    vocab = named_labels(labels, rows, ("expected", "baseline", "candidate"))
    return DataTable(
        name="changes",
        title="changed cases",
        columns=[
            Column("id", "case", "mono", width="8rem"),
            Column("kind", "change", "status", vocab=KINDS, width="8rem"),
            Column("input", "input"),
            Column("expected", "expected", "label", vocab=vocab, width="7rem"),
            Column("baseline", "baseline", "label", vocab=vocab, width="7rem"),
            Column("base_conf", "baseline conf.", "conf", width="8rem"),
            Column("candidate", "candidate", "label", vocab=vocab, width="7rem"),
            Column("cand_conf", "candidate conf.", "conf", width="8rem"),
            Column("tv", "TV", "num", width="4rem"),
        ],
        details=[
            Column("input", "input (whole)"),
            Column("delta", "confidence change", "num"),
            Column("error", "candidate error"),
        ],
        rows=rows,
        flags=flags,
        filters=[
            Filter("all changes", 0),
            Filter("flips", FLIP),
            Filter("newly wrong", NEWLY_WRONG),
            Filter("newly correct", NEWLY_CORRECT),
            Filter("newly errored", NEWLY_ERRORED),
            Filter("recovered", RECOVERED),
        ],
        search=["id", "input", "expected", "baseline", "candidate", "error"],
        labels=vocab,
        label_count=None if vocab is labels else len(labels),
        search_hint="search id, input, label, error",
        empty="no changed case matches",
    )


def _kind(change: dict[str, Any]) -> tuple[str, int]:
    """The change's kind for the table and its filter flags; a flip is newly wrong when the
    baseline had the expected label, newly correct when the candidate has it (the diff's
    definitions, core.diff.pairs.compare)."""
    if change["kind"] == "newly_errored":
        return "newly errored", NEWLY_ERRORED
    if change["kind"] == "recovered":
        return "recovered", RECOVERED
    expected = change["expected"]
    if expected is not None and change["baseline_selected"] == expected:
        return "newly wrong", FLIP | NEWLY_WRONG
    if expected is not None and change["candidate_selected"] == expected:
        return "newly correct", FLIP | NEWLY_CORRECT
    return "flip", FLIP

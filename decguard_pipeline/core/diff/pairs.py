"""Matching two runs by case id and the per-pair comparison (spec §8 steps 2–4).

Matched pairs follow the candidate's order. Every per-pair quantity is a column over the
matched rows; only the change records (one per changed case) are built one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from decguard_pipeline.core.diff.distances import js_divergences, tv_distances
from decguard_pipeline.core.exact import mean
from decguard_pipeline.core.label_fold import LabelMatrix, fold, folded_counts
from decguard_pipeline.core.results import CaseResults


@dataclass
class Pairs:
    """The matched rows of both runs, aligned (row i of each is the same case id)."""

    base: CaseResults
    cand: CaseResults
    n_baseline: int  # cases in the whole baseline run
    n_candidate: int


def match_by_id(baseline: CaseResults, candidate: CaseResults) -> Pairs:
    """Candidate cases whose id the baseline also has, in candidate order."""
    position = {case_id: i for i, case_id in enumerate(baseline.case_ids)}
    base_rows = np.fromiter(
        (position.get(case_id, -1) for case_id in candidate.case_ids),
        dtype=np.int64,
        count=len(candidate),
    )
    cand_rows = np.flatnonzero(base_rows >= 0)
    return Pairs(
        base=baseline.take(base_rows[cand_rows]),
        cand=candidate.take(cand_rows),
        n_baseline=len(baseline),
        n_candidate=len(candidate),
    )


@dataclass
class Comparison:
    """Per-pair outcome columns over the matched rows."""

    compared: np.ndarray  # both runs decided
    newly_errored: np.ndarray  # only the candidate errored
    recovered: np.ndarray  # only the baseline errored
    still_errored: np.ndarray
    flip: np.ndarray  # compared and the selected labels differ
    newly_wrong: np.ndarray  # flips away from the (candidate's) expected label
    newly_correct: np.ndarray
    # over the compared rows only, in order
    tv: np.ndarray
    js: np.ndarray
    confidence_delta: np.ndarray  # candidate minus baseline


def compare(pairs: Pairs) -> Comparison:
    base, cand = pairs.base, pairs.cand
    b_ok, c_ok = base.ok, cand.ok
    compared = b_ok & c_ok
    rows = np.flatnonzero(compared)
    flip = compared & (base.selected != cand.selected)
    expected = cand.expected_index
    labeled_flip = flip & (expected >= 0)
    p, q = base.probs[rows], cand.probs[rows]
    return Comparison(
        compared=compared,
        newly_errored=b_ok & ~c_ok,
        recovered=~b_ok & c_ok,
        still_errored=~b_ok & ~c_ok,
        flip=flip,
        newly_wrong=labeled_flip & (base.selected == expected),
        newly_correct=labeled_flip & (cand.selected == expected),
        tv=tv_distances(p, q),
        js=js_divergences(p, q),
        confidence_delta=cand.confidence[rows] - base.confidence[rows],
    )


def counts_section(pairs: Pairs, c: Comparison) -> dict[str, Any]:
    matched = len(pairs.cand)

    def n(mask: np.ndarray) -> int:
        return int(np.count_nonzero(mask))

    return {
        "baseline_cases": pairs.n_baseline,
        "candidate_cases": pairs.n_candidate,
        "matched": matched,
        "only_in_baseline": pairs.n_baseline - matched,
        "only_in_candidate": pairs.n_candidate - matched,
        "compared": len(c.tv),
        "answer_flips": n(c.flip),
        "newly_wrong": n(c.newly_wrong),
        "newly_correct": n(c.newly_correct),
        "newly_errored": n(c.newly_errored),
        "recovered": n(c.recovered),
        "still_errored": n(c.still_errored),
    }


def shift_section(c: Comparison) -> dict[str, float | None]:
    compared = len(c.tv)
    if not compared:
        return dict.fromkeys(
            ("answer_flip_rate", "mean_tv_distance", "max_tv_distance", "mean_js_divergence",
             "mean_confidence_delta", "mean_abs_confidence_delta", "max_abs_confidence_delta"),
        )  # fmt: skip
    abs_delta = np.abs(c.confidence_delta)
    return {
        "answer_flip_rate": int(np.count_nonzero(c.flip)) / compared,
        "mean_tv_distance": mean(c.tv),
        "max_tv_distance": float(c.tv.max()),
        "mean_js_divergence": mean(c.js),
        "mean_confidence_delta": mean(c.confidence_delta),
        "mean_abs_confidence_delta": mean(abs_delta),
        "max_abs_confidence_delta": float(abs_delta.max()),
    }


def changes_section(pairs: Pairs, c: Comparison) -> list[dict[str, Any]]:
    """One record per flipped, newly errored or recovered case, in candidate order."""
    base, cand = pairs.base, pairs.cand
    labels = cand.labels
    compared_at = np.cumsum(c.compared) - 1  # row -> its index among compared rows
    changed = np.flatnonzero(c.flip | c.newly_errored | c.recovered).tolist()
    out = []
    for i in changed:
        change: dict[str, Any] = {
            "case_id": cand.case_ids[i],
            "kind": "flip",
            "input": cand.inputs[i],
            "expected": cand.expected[i],
            "baseline_selected": None,
            "candidate_selected": None,
            "baseline_confidence": None,
            "candidate_confidence": None,
            "tv_distance": None,
            "error": None,
        }
        if c.newly_errored[i]:
            change["kind"] = "newly_errored"
            change["baseline_selected"] = labels[int(base.selected[i])]
            change["error"] = f"{cand.error_kind[i]}: {cand.error_message[i]}"
        elif c.recovered[i]:
            change["kind"] = "recovered"
            change["candidate_selected"] = labels[int(cand.selected[i])]
            change["candidate_confidence"] = float(cand.confidence[i])
        else:
            change["baseline_selected"] = labels[int(base.selected[i])]
            change["candidate_selected"] = labels[int(cand.selected[i])]
            change["baseline_confidence"] = float(base.confidence[i])
            change["candidate_confidence"] = float(cand.confidence[i])
            change["tv_distance"] = float(c.tv[compared_at[i]])
        out.append(change)
    return out


def folded_flip_matrix(pairs: Pairs, c: Comparison) -> LabelMatrix:
    """:func:`flip_matrix` for people: with more than ``TOP_LABELS`` labels, those in the most
    flips (then the most compared cases) have their own row and column, the others share
    the last ones (core.label_fold); never a cell per pair of labels."""
    labels = list(pairs.cand.labels)
    k = len(labels)
    rows = np.flatnonzero(c.compared)
    base, cand = pairs.base.selected[rows], pairs.cand.selected[rows]
    flipped = base != cand
    flips = np.bincount(base[flipped], minlength=k) + np.bincount(cand[flipped], minlength=k)
    compared = np.bincount(base, minlength=k) + np.bincount(cand, minlength=k)
    weight = flips.astype(np.float64) * (2 * len(rows) + 1) + compared
    folded = fold(labels, weight)
    return LabelMatrix(folded.names, folded_counts(folded, base, folded, cand), folded.pooled)


def flip_matrix(pairs: Pairs, c: Comparison) -> list[list[int]]:
    """Compared cases counted by (baseline label, candidate label), canonical order; the
    diagonal holds the unchanged answers."""
    k = len(pairs.cand.labels)
    rows = np.flatnonzero(c.compared)
    cells = pairs.base.selected[rows] * k + pairs.cand.selected[rows]
    return np.bincount(cells, minlength=k * k).reshape(k, k).tolist()

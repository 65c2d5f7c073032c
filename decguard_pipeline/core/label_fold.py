"""Label-by-label views that stay small whatever the number of labels.

A confusion or flip matrix has a cell per pair of labels and a case's probabilities one
number per label: with 2,000 labels the HTML report was 43 MB (its confusion matrix alone
4 million cells), with 10,000 the process ran out of memory. Views made for people (the HTML
pages, the Dagster UI's tables) show the ``TOP_LABELS`` labels that matter most one by one
and pool the others into one row and column, with a note; the JSON reports keep every count.
With ``TOP_LABELS`` labels or fewer nothing is pooled and every view is exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOP_LABELS = 20


@dataclass(frozen=True)
class Fold:
    """Which labels a view shows one by one (``shown``, label indices in label order) and
    where each label lands (``position``: its row, or the pooled row ``len(shown)``)."""

    labels: tuple[str, ...]
    shown: np.ndarray
    position: np.ndarray

    @property
    def pooled(self) -> int:
        """How many labels the pooled row holds (0: none, every label is shown)."""
        return len(self.labels) - len(self.shown)

    @property
    def names(self) -> list[str]:
        names = [self.labels[i] for i in self.shown.tolist()]
        if self.pooled:
            names.append(f"{self.pooled:,} other labels")
        return names


def fold(labels: list[str] | tuple[str, ...], weight: np.ndarray, top: int = TOP_LABELS) -> Fold:
    """The ``top`` labels of the largest ``weight`` (ties: the first in label order) shown,
    in label order; every label shown when there are no more than ``top``."""
    labels = tuple(labels)
    k = len(labels)
    if k <= top:
        everything = np.arange(k)
        return Fold(labels, everything, everything)
    order = np.lexsort((np.arange(k), -np.asarray(weight, dtype=np.float64)))
    shown = np.sort(order[:top])
    position = np.full(k, top, dtype=np.int64)
    position[shown] = np.arange(top)
    return Fold(labels, shown, position)


def folded_counts(
    rows: Fold, row_of: np.ndarray, columns: Fold, column_of: np.ndarray
) -> list[list[int]]:
    """Cases counted by (row label, column label), ``row_of``/``column_of`` the label index
    of each case, on the folded rows and columns."""
    n_rows, n_columns = len(rows.names), len(columns.names)
    cells = rows.position[row_of] * n_columns + columns.position[column_of]
    return np.bincount(cells, minlength=n_rows * n_columns).reshape(n_rows, n_columns).tolist()


@dataclass(frozen=True)
class LabelMatrix:
    """A folded count matrix with its row and column names (``pooled``: labels in the last
    row and column; 0 when every label has its own)."""

    names: list[str]
    cells: list[list[int]]
    pooled: int = 0


def top_probabilities(
    probs: np.ndarray, top: int = TOP_LABELS
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per case (a row of ``probs``), its ``top`` largest probabilities, largest first (ties:
    the first label): their label indices and values, the sum of the others, and whether the
    case has no probabilities (a row of NaN: errored)."""
    values = np.nan_to_num(np.asarray(probs, dtype=np.float64), nan=0.0)
    n, k = values.shape
    top = min(top, k)
    if not n or not top:
        empty = np.zeros((n, top))
        return empty.astype(np.int64), empty, np.zeros(n), np.ones(n, dtype=bool)
    candidates = np.argpartition(-values, top - 1, axis=1)[:, :top]
    chosen = np.take_along_axis(values, candidates, axis=1)
    order = np.lexsort((candidates, -chosen), axis=1)
    index = np.take_along_axis(candidates, order, axis=1)
    shown = np.take_along_axis(chosen, order, axis=1)
    rest = np.maximum(values.sum(axis=1) - shown.sum(axis=1), 0.0)
    return index, shown, rest, np.isnan(probs).all(axis=1)


def used_labels(labels: list[str], *indices: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The labels that ``indices`` (arrays of label indices, -1 for none) name, in label
    order, and each label index's place among them (-1 for a label not named, and at the
    end for none): what a page's table needs of thousands of labels is the few its rows
    show."""
    named = np.zeros(len(labels) + 1, dtype=bool)
    for index in indices:
        named[np.asarray(index, dtype=np.int64)] = True  # -1 marks the extra last slot
    kept = np.flatnonzero(named[:-1])
    place = np.full(len(labels) + 1, -1, dtype=np.int64)
    place[kept] = np.arange(len(kept))
    return [labels[i] for i in kept.tolist()], place

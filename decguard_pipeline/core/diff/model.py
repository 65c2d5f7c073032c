"""The outcome of one diff: DecGuard's document plus what the sidecar statistics, the gates and
the warehouse read from it (matched pairs, segments, settings). Its own module so the
statistics can name it without importing :mod:`.report`, which calls them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from decguard_pipeline.core.contract import Evaluation, Regression
from decguard_pipeline.core.diff.pairs import Comparison, Pairs, flip_matrix, folded_flip_matrix
from decguard_pipeline.core.diff.segments import Segment
from decguard_pipeline.core.label_fold import LabelMatrix


@dataclass
class Diff:
    document: dict[str, Any]  # the DecGuard diff, keys in DecGuard's order
    pairs: Pairs
    comparison: Comparison
    groups: list[Segment]  # the rows of each segment, in the order of document["segments"]
    evaluation: Evaluation
    regression: Regression
    values: dict[str, float | None]  # what each regression gate limits
    worst_segment: dict[str, Any] | None
    statistics: dict[str, Any] | None = None  # pipeline.statistics results (the sidecar)
    # pipeline.calibration_measures: both runs' CORP decompositions (core/diff/calibration.py)
    calibration: dict[str, Any] | None = None

    @property
    def status(self) -> str:
        return str(self.document["status"])

    def flip_matrix(self) -> list[list[int]]:
        return flip_matrix(self.pairs, self.comparison)

    def flips(self) -> LabelMatrix:
        """The flip matrix as pages and the UI show it: a row and column per label, or with
        many labels per label that flips most and one for the others (core.label_fold)."""
        return folded_flip_matrix(self.pairs, self.comparison)

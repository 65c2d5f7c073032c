"""Regression diff between two runs of the same decision (DecGuard 0.1 ``diff``), with the
``pipeline.statistics`` extension (intervals, McNemar, significance-aware gates) and the
baseline choice the pipeline needs.

Entry points: :func:`load_and_diff` / :func:`diff_reports` (-> :class:`Diff`),
:func:`render_diff`, :func:`render_statistics`, :func:`sidecar_path`, :func:`choose_baseline`.
"""

from decguard_pipeline.core.diff.baseline import BaselineChoice, choose_baseline
from decguard_pipeline.core.diff.model import Diff
from decguard_pipeline.core.diff.render import render_diff
from decguard_pipeline.core.diff.report import DIFF_VERSION, diff_reports, load_and_diff
from decguard_pipeline.core.diff.sidecar import render_statistics
from decguard_pipeline.core.report.sidecar import sidecar_path

__all__ = [
    "DIFF_VERSION",
    "BaselineChoice",
    "Diff",
    "choose_baseline",
    "diff_reports",
    "load_and_diff",
    "render_diff",
    "render_statistics",
    "sidecar_path",
]

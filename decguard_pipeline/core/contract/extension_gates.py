"""``pipeline.requirements`` / ``pipeline.warnings``: gates on the extension metrics.

Same semantics as DecGuard's golden gates (inclusive; a metric that cannot be computed fails).
Guard gates apply to every guarded label and are checked on the worst of them.
"""

from __future__ import annotations

from decguard_pipeline.core.contract.gates import _Configured
from decguard_pipeline.core.contract.types import Probability


class GuardGates(_Configured):
    min_auroc: Probability | None = None
    min_auprc: Probability | None = None
    min_precision: Probability | None = None
    min_recall: Probability | None = None
    min_f1: Probability | None = None
    max_fpr: Probability | None = None
    max_fnr: Probability | None = None
    max_ece_equal_mass: Probability | None = None
    max_confidence_gap: Probability | None = None  # |mean confidence - accuracy|
    max_overconfidence: Probability | None = None  # mean confidence - accuracy (signed)
    max_aurc: Probability | None = None

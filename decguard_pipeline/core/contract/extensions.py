"""The ``pipeline`` section: decguard_pipeline's additive, documented contract extensions.

DecGuard 0.1 knows no ``pipeline`` key, so a contract without it loads, hashes and behaves
exactly as in DecGuard. Each feature owns one subsection (documented in docs/contracts.md);
results of extensions never enter DecGuard's report files (which stay verifiable by the
reference): they go to a ``<report>.pipeline.json`` sidecar, the warehouse and the UI.
"""

from __future__ import annotations

from decguard_pipeline.core.contract.baseline import BaselineSettings
from decguard_pipeline.core.contract.cache import CacheSettings
from decguard_pipeline.core.contract.calibration_measures import CalibrationMeasures
from decguard_pipeline.core.contract.extension_gates import ExtensionGates
from decguard_pipeline.core.contract.guard_settings import (
    CalibrationSettings,
    GuardSettings,
    PartialRunSettings,
    RiskCoverageSettings,
    Suites,
)
from decguard_pipeline.core.contract.production import ProductionExtension
from decguard_pipeline.core.contract.repeats import RepeatsSettings
from decguard_pipeline.core.contract.statistics import StatisticsSettings
from decguard_pipeline.core.validation import Strict


class PipelineSection(Strict):
    """Every subsection is optional; absent means DecGuard's behaviour."""

    statistics: StatisticsSettings | None = None  # docs/statistics.md
    baseline: BaselineSettings | None = None  # which target a diff compares against
    guard: GuardSettings | None = None
    suites: Suites | None = None
    calibration: CalibrationSettings | None = None
    risk_coverage: RiskCoverageSettings | None = None
    partial_runs: PartialRunSettings | None = None
    # calibration beyond bins for every golden run (docs/metrics.md)
    calibration_measures: CalibrationMeasures | None = None
    requirements: ExtensionGates = ExtensionGates()  # every feature's gates, each checks its own
    warnings: ExtensionGates = ExtensionGates()
    production: ProductionExtension | None = None  # check extensions, docs/production.md
    cache: CacheSettings | None = None  # the response cache, docs/cache.md (not hashed)
    repeats: RepeatsSettings | None = None  # ask each golden case N times: consistency

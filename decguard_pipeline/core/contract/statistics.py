"""``pipeline.statistics``: intervals, significance tests and significance-aware regression
gates (docs/statistics.md). Absent means DecGuard's behaviour: point estimates only."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from decguard_pipeline.core.validation import Strict

GateMode = Literal["point", "significant", "interval"]
RegressionGate = Literal[
    "max_answer_flip_rate",
    "max_accuracy_drop",
    "max_macro_f1_drop",
    "max_ece_increase",
    "max_brier_increase",
    "max_nll_increase",
    "max_mean_tv_distance",
    "max_mean_confidence_shift",
    "max_error_rate_increase",
    "max_latency_p95_increase_ms",
    "max_segment_accuracy_drop",
]
# Wall times of two runs are not paired measurements of the cases: no test applies to them.
POINT_ONLY = frozenset({"max_latency_p95_increase_ms"})


class StatisticsSettings(Strict):
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    """Level of every interval (Wilson, bootstrap)."""
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    """Significance level of the ``significant`` gate mode."""
    bootstrap_resamples: int = Field(default=2000, ge=100, le=100_000)
    seed: int = Field(default=0, ge=0, lt=2**63)
    gate_mode: GateMode = "point"
    """Mode of every regression gate not named in ``gate_modes``."""
    gate_modes: dict[RegressionGate, GateMode] = {}

    @field_validator("gate_modes")
    @classmethod
    def _latency_is_point(cls, value: dict[str, str]) -> dict[str, str]:
        for gate in sorted(POINT_ONLY & value.keys()):
            if value[gate] != "point":
                raise ValueError(
                    f"{gate} can only use mode 'point' (latencies of two runs are not paired)"
                )
        return value

    def mode_for(self, gate: str) -> GateMode:
        if gate in POINT_ONLY:
            return "point"
        return self.gate_modes.get(gate, self.gate_mode)  # type: ignore[arg-type]

"""Two versions of a contract side by side: DecGuard's diff of their newest evaluations
(``core.diff.diff_reports`` on the reports ``steps.golden.golden_report`` rebuilds from the
warehouse, as the ``regression_diff`` step compares a candidate with its baseline) with the
paired-bootstrap intervals of every metric delta (the contract's ``pipeline.statistics``
settings, else their defaults) and the flip matrix. No Dagster here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from decguard_pipeline.core.contract.statistics import StatisticsSettings
from decguard_pipeline.core.diff import diff_reports
from decguard_pipeline.core.diff.sidecar import diff_statistics
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.diff import as_evaluated, evaluation_ref
from decguard_pipeline.steps.golden import golden_report
from decguard_pipeline.warehouse import Warehouse

MAX_MATRIX_LABELS = 20  # a flip matrix of more labels keeps the busiest, the rest as "other"
OTHER = "(other labels)"
# the deltas shown, in this order, with how a higher value reads
DELTAS = (
    ("accuracy", "accuracy", True),
    ("macro_f1", "macro-F1", True),
    ("ece", "ECE", False),
    ("brier", "Brier", False),
    ("nll", "NLL", False),
    ("coverage", "coverage", True),
    ("error_rate", "error rate", False),
    ("ordinal_mae", "ordinal MAE", False),
    ("latency_p95_ms", "p95 latency (ms)", False),
)


@dataclass
class Reports:
    """Each target's report, rebuilt once per site build."""

    entry: ContractEntry
    warehouse: Warehouse
    built: dict[str, tuple[Report, str]] = field(default_factory=dict)

    def of(self, target: str) -> tuple[Report, str]:
        """The report of a target's newest evaluation, and that evaluation's run id."""
        if target not in self.built:
            golden = golden_report(self.entry, target, self.warehouse)
            report = as_evaluated(golden.report, golden.evaluated)
            self.built[target] = (report, golden.evaluated.run["run_id"])
        return self.built[target]


def compare(reports: Reports, candidate: str, baseline: str) -> dict[str, Any]:
    """What the comparison page shows: counts, metric deltas with intervals, the shift, the
    flip matrix (bounded to ``MAX_MATRIX_LABELS`` labels)."""
    loaded = reports.entry.require()
    (base, base_run), (cand, cand_run) = reports.of(baseline), reports.of(candidate)
    key = reports.entry.key
    diff = diff_reports(
        base,
        cand,
        contract=loaded,
        baseline_path=evaluation_ref(key, baseline, base_run),
        candidate_path=evaluation_ref(key, candidate, cand_run),
        created_at=cand.document["created_at"],
    )
    doc = diff.document
    statistics = diff.statistics
    if statistics is None:  # no pipeline.statistics: intervals at the default settings
        pipeline = loaded.contract.pipeline
        settings = (pipeline.statistics if pipeline is not None else None) or StatisticsSettings()
        statistics = diff_statistics(
            diff, settings, metrics=doc["metrics"], shift=doc["shift"], segments=doc["segments"]
        ).document
    overall = statistics["overall"]
    deltas = []
    for name, title, higher_better in DELTAS:
        point = doc["metrics"].get(name)
        if point is None or (point["baseline"] is None and point["candidate"] is None):
            continue
        interval = (overall["metrics"].get(name) or {}).get("delta") or {}
        deltas.append(
            {
                "metric": name,
                "title": title,
                "higher_better": higher_better,
                "baseline": point["baseline"],
                "candidate": point["candidate"],
                "delta": point["delta"],
                "low": interval.get("low"),
                "high": interval.get("high"),
                "p_worse": interval.get("p_value_candidate_worse"),
                "test": interval.get("test"),
            }
        )
    labels = list(diff.pairs.cand.labels)
    return {
        "status": doc["status"],
        "counts": doc["counts"],
        "shift": doc["shift"],
        "deltas": deltas,
        "confidence": statistics["settings"]["confidence"],
        "resamples": statistics["settings"]["bootstrap_resamples"],
        "checks": doc["checks"],
        "matrix": bounded_matrix(labels, diff.flip_matrix()),
    }


def bounded_matrix(labels: list[str], matrix: list[list[int]]) -> dict[str, Any]:
    """The flip matrix, or with more than ``MAX_MATRIX_LABELS`` labels the busiest ones
    (most compared cases either side) and one row and column for all the others."""
    k = len(labels)
    if k <= MAX_MATRIX_LABELS:
        return {"labels": labels, "rows": matrix, "folded": 0}
    weight = [sum(matrix[i]) + sum(row[i] for row in matrix) for i in range(k)]
    keep = sorted(sorted(range(k), key=lambda i: -weight[i])[: MAX_MATRIX_LABELS - 1])
    slot = {i: n for n, i in enumerate(keep)}
    size = len(keep) + 1
    rows = [[0] * size for _ in range(size)]
    for i in range(k):
        for j in range(k):
            if matrix[i][j]:
                rows[slot.get(i, size - 1)][slot.get(j, size - 1)] += matrix[i][j]
    return {"labels": [labels[i] for i in keep] + [OTHER], "rows": rows, "folded": k - len(keep)}

"""What the site shows, read from the warehouse's DuckDB views (docs/warehouse.md) on one
in-memory connection: plain rows for the templates (``core/site``). No Dagster here.

Every query reads a ``latest_*`` view (one write per target: its cost does not grow with
history) except the metric history, which reads every evaluation of a contract's targets.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, ExitStack
from typing import Any

from decguard_pipeline.warehouse import Warehouse

# The columns of the versions table, from the ``verdicts`` row (the scoreboard's numbers).
VERSION_NUMBERS = (
    "accuracy",
    "macro_f1",
    "ece",
    "ece_equal_mass",
    "coverage",
    "latency_p95_ms",
    "cost_per_1000",
)
# Metrics drawn over time, with the ``metrics`` name and how a gate on them is named.
HISTORY = (
    ("accuracy", "accuracy"),
    ("macro_f1", "macro-F1"),
    ("ece", "ECE"),
    ("coverage", "coverage"),
    ("latency_p95_ms", "p95 latency (ms)"),
    ("cost_per_1000", "cost per 1,000"),
)
# Gate sources whose thresholds apply to a run's own metrics (not to a diff or production)
OWN_GATES = ("golden", "cost", "calibration")


class SiteData(AbstractContextManager["SiteData"]):
    """One connection with every view; :meth:`rows` runs a query with parameters."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self._open = ExitStack()
        self.con = self._open.enter_context(warehouse.connect())
        self._checks: dict[str, dict[str, list[dict[str, Any]]]] = {}

    def __exit__(self, *exc: object) -> None:
        self._open.close()

    def rows(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        relation = self.con.execute(sql, params or [])
        names = [d[0] for d in relation.description]
        return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]

    # -- contracts and versions ---------------------------------------------------------------

    def contracts(self) -> list[dict[str, Any]]:
        """Every contract the warehouse has, with its normalised contract as ``spec``."""
        out = []
        for row in self.rows(
            "SELECT contract, decision, decision_type, labels, contract_hash, contract_json "
            "FROM latest_contracts ORDER BY contract"
        ):
            row["spec"] = json.loads(row.pop("contract_json") or "{}")
            row["labels"] = list(row["labels"] or [])
            out.append(row)
        return out

    def versions(self, contract: str) -> list[dict[str, Any]]:
        """The newest verdict of every evaluated target, the newest evaluation first, with
        its run (provider, model, cases) and smooth ECE when measured."""
        return self.rows(
            """
            SELECT v.*, r.provider, r.model, r.model_version AS served_version, r.n_cases,
                   r.n_errored, r.started_at, r.wall_s, r.prompt_tokens, r.completion_tokens,
                   r.cost_per_run, r.usage_json, r.consistency_json,
                   s.value AS smece, s.low AS smece_low, s.high AS smece_high
            FROM latest_verdicts v
            LEFT JOIN latest_runs r ON r.contract = v.contract AND r.target = v.target
                AND r.run_id = v.evaluation_run_id
            LEFT JOIN latest_calibration s ON s.contract = v.contract AND s.target = v.target
                AND s.run_id = v.evaluation_run_id AND s.measure = 'smece'
            WHERE v.contract = ?
            ORDER BY v.evaluated_at DESC, v.target DESC
            """,
            [contract],
        )

    def registered(self, contract: str) -> list[dict[str, Any]]:
        """Every registered target (``targets``), first registration first."""
        return self.rows(
            "SELECT target, backend, provider, model, model_version, min(recorded_at) AS seen "
            "FROM targets WHERE contract = ? GROUP BY ALL ORDER BY seen, target",
            [contract],
        )

    def checks(self, contract: str, target: str) -> list[dict[str, Any]]:
        """Every check of a target's newest evaluation (golden, properties, guard,
        regression, cost, calibration), as ``latest_all_checks`` has them; read once per
        contract (the union of every check table is the slowest view)."""
        if contract not in self._checks:
            by_target: dict[str, list[dict[str, Any]]] = {}
            for row in self.rows(
                """
                SELECT target, source, gate, suite, level, metric, comparison, threshold, value,
                       status, message, baseline_target, mode, p_value, ci_low, ci_high
                FROM latest_all_checks
                WHERE contract = ? AND source <> 'production'
                """,
                [contract],
            ):
                by_target.setdefault(row.pop("target"), []).append(row)
            self._checks[contract] = by_target
        return [dict(r) for r in self._checks[contract].get(target, [])]

    def history(self, contract: str) -> list[dict[str, Any]]:
        """Every evaluation's headline metrics (all history): one row per target, run and
        metric, with the backend to draw one line per backend."""
        names = [m for m, _ in HISTORY]
        marks = ", ".join("?" for _ in names)
        rows = self.rows(
            f"SELECT target, backend, run_id, recorded_at, metric, value FROM metrics "
            f"WHERE contract = ? AND metric IN ({marks}) ORDER BY recorded_at, target",
            [contract, *names],
        )
        smooth = self.rows(
            "SELECT target, backend, run_id, recorded_at, 'smece' AS metric, value "
            "FROM calibration WHERE contract = ? AND measure = 'smece' ORDER BY recorded_at",
            [contract],
        )
        return rows + smooth

    def thresholds(self, contract: str) -> list[dict[str, Any]]:
        """The gates on a run's own metrics, as the newest evaluations checked them."""
        marks = ", ".join("?" for _ in OWN_GATES)
        return self.rows(
            f"SELECT DISTINCT gate, level, metric, comparison, threshold FROM latest_gate_results "
            f"WHERE contract = ? AND source IN ({marks}) AND threshold IS NOT NULL "
            f"ORDER BY level, gate",
            [contract, *OWN_GATES],
        )

    def reliability(self, contract: str, target: str, run_id: str) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT bin, lower, upper, count, mean_confidence, accuracy "
            "FROM latest_reliability_bins "
            "WHERE contract = ? AND target = ? AND run_id = ? ORDER BY bin",
            [contract, target, run_id],
        )

    def calibration(self, contract: str, target: str, run_id: str) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT measure, label, value, low, high, n_cases FROM latest_calibration "
            "WHERE contract = ? AND target = ? AND run_id = ? ORDER BY measure, label",
            [contract, target, run_id],
        )

    def smooth_curve(self, contract: str, target: str, run_id: str) -> dict[str, Any] | None:
        rows = self.rows(
            "SELECT confidence, accuracy, lower, upper, density FROM latest_calibration_curve "
            "WHERE contract = ? AND target = ? AND run_id = ? ORDER BY point",
            [contract, target, run_id],
        )
        if not rows:
            return None
        banded = all(r["lower"] is not None for r in rows)
        return {
            "mesh": [r["confidence"] for r in rows],
            "accuracy": [r["accuracy"] for r in rows],
            "lower": [r["lower"] for r in rows] if banded else None,
            "upper": [r["upper"] for r in rows] if banded else None,
            "density": [r["density"] or 0.0 for r in rows],
        }

    def intervals(self, contract: str, target: str, run_id: str) -> dict[str, dict[str, Any]]:
        """``pipeline.statistics``' intervals of the golden metrics, by metric."""
        rows = self.rows(
            "SELECT metric, value, low, high, method, confidence FROM latest_metric_intervals "
            "WHERE contract = ? AND target = ? AND run_id = ?",
            [contract, target, run_id],
        )
        return {r["metric"]: r for r in rows}

    def diff(self, contract: str, target: str) -> dict[str, Any] | None:
        rows = self.rows(
            "SELECT * FROM latest_diffs WHERE contract = ? AND target = ?", [contract, target]
        )
        return rows[-1] if rows else None

    def report_files(self, contract: str, target: str) -> dict[str, Any]:
        """The newest HTML report and diff page of a target (paths under report_files)."""
        report = self.rows(
            "SELECT path FROM latest_reports WHERE contract = ? AND target = ?",
            [contract, target],
        )
        diff = self.diff(contract, target)
        return {
            "report_json": report[-1]["path"] if report else None,
            "diff_json": None if diff is None else diff.get("diff_path"),
        }

    # -- cases --------------------------------------------------------------------------------

    def case_count(self, contract: str, target: str) -> int:
        rows = self.rows(
            "SELECT count(*) AS n FROM latest_case_results WHERE contract = ? AND target = ?",
            [contract, target],
        )
        return int(rows[0]["n"])

    def cases(
        self, contract: str, target: str, *, offset: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """A target's newest evaluation, case by case in dataset order."""
        page = "" if limit is None else f" LIMIT {int(limit)} OFFSET {int(offset)}"
        return self.rows(
            "SELECT position, case_id, input_text, input_json, expected, labels, probs, "
            "selected, confidence, correct, latency_ms, error_kind, error_message, "
            "result_metadata_json, prompt_tokens, completion_tokens "
            "FROM latest_case_results WHERE contract = ? AND target = ? ORDER BY position" + page,
            [contract, target],
        )

    def case_grid(self, contract: str, targets: list[str]) -> list[dict[str, Any]]:
        """Per case and target: the decision, its confidence, correctness and error."""
        if not targets:
            return []
        marks = ", ".join("?" for _ in targets)
        return self.rows(
            f"SELECT target, position, case_id, input_text, expected, selected, confidence, "
            f"correct, error_kind FROM latest_case_results "
            f"WHERE contract = ? AND target IN ({marks}) ORDER BY position, target",
            [contract, *targets],
        )

    # -- production ---------------------------------------------------------------------------

    def production_days(self, contract: str) -> list[dict[str, Any]]:
        """Every checked day, the newest first: status, records, pending, accuracy with its
        Wilson interval, drift."""
        return self.rows(
            """
            SELECT r.target AS day, r.status, r.n_records, r.n_correctness, r.pending,
                   r.baseline, r.baseline_rule, r.baseline_reason, r.run_id,
                   a.value AS accuracy, lo.value AS accuracy_low, hi.value AS accuracy_high,
                   d.confidence_tv_distance, d.label_tv_distance, d.label_psi,
                   d.accuracy_drop, d.ece_increase, d.confidence_mean_delta
            FROM latest_production_runs r
            LEFT JOIN latest_production_drift d USING (contract, target, run_id)
            LEFT JOIN latest_production_extensions a ON a.contract = r.contract
                AND a.target = r.target AND a.run_id = r.run_id
                AND a.section = 'accuracy_interval' AND a.metric = 'accuracy'
                AND a.segment_key IS NULL
            LEFT JOIN latest_production_extensions lo ON lo.contract = r.contract
                AND lo.target = r.target AND lo.run_id = r.run_id
                AND lo.section = 'accuracy_interval' AND lo.metric = 'low'
                AND lo.segment_key IS NULL
            LEFT JOIN latest_production_extensions hi ON hi.contract = r.contract
                AND hi.target = r.target AND hi.run_id = r.run_id
                AND hi.section = 'accuracy_interval' AND hi.metric = 'high'
                AND hi.segment_key IS NULL
            WHERE r.contract = ?
            ORDER BY r.target DESC
            """,
            [contract],
        )

    def histogram(self, contract: str, day: str) -> list[float]:
        """A day's records per calibration bin of confidence (``confidence.histogram.<bin>``)."""
        rows = self.rows(
            "SELECT metric, value FROM latest_production_metrics WHERE contract = ? "
            "AND target = ? AND segment_key IS NULL AND metric LIKE 'confidence.histogram.%'",
            [contract, day],
        )
        counts = {int(r["metric"].rsplit(".", 1)[1]): r["value"] or 0.0 for r in rows}
        return [counts[i] for i in sorted(counts)]

    def label_drift(self, contract: str, day: str) -> list[dict[str, Any]]:
        """Per label: current and baseline count and share."""
        rows = self.rows(
            "SELECT label, metric, value FROM latest_production_extensions WHERE contract = ? "
            "AND target = ? AND section = 'label_drift' AND label IS NOT NULL",
            [contract, day],
        )
        by_label: dict[str, dict[str, Any]] = {}
        for r in rows:
            by_label.setdefault(r["label"], {"label": r["label"]})[r["metric"]] = r["value"]
        return list(by_label.values())

    def segments(self, contract: str, day: str) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT segment_key, segment_value, status, n_records, n_correctness, accuracy, "
            "accuracy_low, accuracy_high, ece, pending FROM latest_production_segments "
            "WHERE contract = ? AND target = ? ORDER BY position",
            [contract, day],
        )

    def production_checks(self, contract: str, day: str) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT gate, level, metric, comparison, threshold, value, status, message "
            "FROM latest_production_checks WHERE contract = ? AND target = ?",
            [contract, day],
        )

    def pending_records(self, contract: str, day: str, limit: int) -> list[dict[str, Any]]:
        """Records of the day still lacking an outcome (the first ``limit``)."""
        return self.rows(
            "SELECT position, id, timestamp, selected, confidence, model_version, input_text "
            "FROM latest_production_records WHERE contract = ? AND target = ? "
            "AND outcome_correct IS NULL ORDER BY position LIMIT ?",
            [contract, day, limit],
        )

    def golden_confidences(self, contract: str, target: str) -> list[float]:
        rows = self.rows(
            "SELECT confidence FROM latest_case_results WHERE contract = ? AND target = ? "
            "AND confidence IS NOT NULL",
            [contract, target],
        )
        return [r["confidence"] for r in rows]

    # -- usage --------------------------------------------------------------------------------

    def usage(self) -> list[dict[str, Any]]:
        """Every target's newest run: what it asked, used and cost."""
        rows = self.rows(
            "SELECT contract, target, backend, provider, model, model_version, n_cases, "
            "n_errored, wall_s, prompt_tokens, completion_tokens, cost_per_run, cost_per_1000, "
            "usage_json, started_at FROM latest_runs ORDER BY contract, started_at DESC"
        )
        for row in rows:
            usage = json.loads(row.pop("usage_json") or "null") or {}
            backend = usage.get("backend") or {}
            row["requests"] = backend.get("requests")
            row["retries"] = backend.get("retries")
            row["pricing"] = usage.get("pricing")
            row["cases_with_usage"] = usage.get("cases_with_usage")
        return rows

"""A target's verdict over every gate of its evaluation, and whether it may be a baseline.

One value, computed here and only here: ``evaluate``'s summary, the run tag, the ``verdict``
asset and its check, the scoreboard, the HTML report's banner and the exit of ``test`` all
show what :func:`decide` returns (the pipeline stores it as a ``verdicts`` row).

The gates come in kinds: the golden run's (DecGuard's gates, and the pipeline's cost and
calibration gates on the same run), the property gates, the guard extension's gates (per
suite) and the regression gates against the target's baseline. The verdict is the worst
status of them all (FAIL when a requirement fails, WARN when only warnings do, else PASS);
the target is *approved* (may replace the baseline of later versions) when no requirement of
any kind fails. Warnings never block approval.

Every gate is named ``<suite>.<gate>``: the suite is where it was measured — ``golden``,
``cost`` or ``calibration`` for the golden run, the property for a property gate
(``option_order.max_violation_rate``, DecGuard's own name), the guard suite for a guard gate
(``adversarial.max_fnr``) and ``regression`` for a regression gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from decguard_pipeline.core.gates import FAIL, PASS, WARN, overall_status
from decguard_pipeline.core.html.markup import sig

GOLDEN, PROPERTIES, GUARD, REGRESSION = "golden", "properties", "guard", "regression"
KINDS = (GOLDEN, PROPERTIES, GUARD, REGRESSION)
WORDS = {PASS: "PASS", WARN: "WARN", FAIL: "FAIL"}
# a gate that does not hold shows the comparison it broke
BROKEN = {"<=": ">", ">=": "<", "<": ">=", ">": "<="}


@dataclass(frozen=True)
class Gate:
    """One gate that does not hold (a failing requirement or a warning)."""

    name: str  # <suite>.<gate>
    kind: str  # golden | properties | guard | regression
    suite: str
    gate: str
    level: str  # requirement | warning
    status: str  # fail | warn
    value: float | None
    threshold: float | None
    comparison: str | None
    message: str = ""

    def text(self) -> str:
        """``golden.max_ece 0.1751 > 0.15``; ``cost.max_cost_per_1000 n/a (<= 0.15)`` when
        the value could not be computed."""
        value = _number(self.value)
        if self.threshold is None or self.comparison is None:
            return self.name if value is None else f"{self.name} {sig(value)}"
        limit = sig(self.threshold)
        if value is None:
            return f"{self.name} n/a ({self.comparison} {limit})"
        return f"{self.name} {sig(value)} {BROKEN.get(self.comparison, '!')} {limit}"

    def as_row(self) -> dict[str, Any]:
        """The gate as the ``verdicts`` row's ``gates`` list holds it."""
        return {
            "name": self.name,
            "kind": self.kind,
            "suite": self.suite,
            "gate": self.gate,
            "level": self.level,
            "status": self.status,
            "value": _number(self.value),
            "threshold": _number(self.threshold),
            "comparison": self.comparison,
            "message": self.message,
        }


@dataclass(frozen=True)
class Verdict:
    status: str  # pass | warn | fail
    approved: bool
    failing: list[str] = field(default_factory=list)  # names of the failing requirements
    warned: list[str] = field(default_factory=list)  # names of the warnings that do not hold
    statuses: dict[str, str] = field(default_factory=dict)  # per kind that has checks
    gates: list[Gate] = field(default_factory=list)  # every gate not holding: failing first
    baseline: str | None = None  # the regression baseline, when there was one

    @property
    def word(self) -> str:
        return WORDS.get(self.status, self.status.upper())

    def reason(self) -> str:
        """Why, in a few words: the gates that decide the status (the failing ones for FAIL,
        the warnings for WARN), the regression ones as ``regression vs <baseline> (<gates>)``;
        ``every gate holds`` for PASS."""
        deciding = [g for g in self.gates if g.status == self.status]
        if not deciding:
            return "every gate holds"
        parts = [g.name for g in deciding if g.kind != REGRESSION]
        regression = [g.gate for g in deciding if g.kind == REGRESSION]
        if regression:
            against = f" vs {self.baseline}" if self.baseline else ""
            parts.append(f"regression{against} ({', '.join(regression)})")
        return ", ".join(parts)

    def headline(self) -> str:
        """``FAIL — regression vs default@v1 (max_mean_tv_distance)``: the one line every
        surface shows."""
        return f"{self.word} — {self.reason()}"

    def gate_texts(self) -> list[str]:
        """Every gate not holding with its value and threshold, warnings marked."""
        return [g.text() + (" (warning)" if g.status == WARN else "") for g in self.gates]


def _number(value: Any) -> float | None:
    """A float, or None for a value that is missing or not a number (NaN: not computed)."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if value != value else float(value)  # NaN != NaN


def suite_of(kind: str, check: Mapping[str, Any]) -> str:
    """Where a check was measured (see the module's docstring)."""
    if kind == GOLDEN:
        return str(check.get("source") or GOLDEN)
    if kind == PROPERTIES:
        return str(check.get("property") or str(check["gate"]).partition(".")[0])
    if kind == GUARD:
        return str(check.get("suite") or GUARD)
    return kind


def gate_name(kind: str, check: Mapping[str, Any]) -> str:
    """``<suite>.<gate>``: ``golden.max_ece``, ``option_order.max_violation_rate``,
    ``adversarial.max_fnr``, ``regression.max_accuracy_drop``."""
    suite, gate = suite_of(kind, check), str(check["gate"])
    return gate if gate.startswith(f"{suite}.") else f"{suite}.{gate}"


def _gate(kind: str, check: Mapping[str, Any]) -> Gate:
    return Gate(
        name=gate_name(kind, check),
        kind=kind,
        suite=suite_of(kind, check),
        gate=str(check["gate"]),
        level=str(check.get("level") or ("requirement" if check["status"] == FAIL else "warning")),
        status=str(check["status"]),
        value=_number(check.get("value")),
        threshold=_number(check.get("threshold")),
        comparison=check.get("comparison"),
        message=str(check.get("message") or ""),
    )


def decide(
    checks: Mapping[str, Sequence[Mapping[str, Any]]], *, baseline: str | None = None
) -> Verdict:
    """The verdict over the checks of each kind (kinds without checks are left out);
    ``baseline``: the target the regression checks compared against. A gate measured twice
    under one name (e.g. per segment) is listed once, with its worst check."""
    statuses: dict[str, str] = {}
    found: dict[tuple[str, str], Gate] = {}
    for kind in [*KINDS, *(k for k in checks if k not in KINDS)]:
        rows = checks.get(kind)
        if not rows:
            continue
        statuses[kind] = overall_status([dict(r) for r in rows])
        for check in rows:
            if check["status"] in (FAIL, WARN):
                gate = _gate(kind, check)
                found.setdefault((gate.status, gate.name), gate)
    gates = [g for (status, _), g in found.items() if status == FAIL]
    gates += [g for (status, _), g in found.items() if status == WARN]
    failing = [g.name for g in gates if g.status == FAIL]
    warned = [g.name for g in gates if g.status == WARN]
    status = FAIL if failing else (WARN if warned else PASS)
    if baseline is None:
        baseline = next(
            (str(c["baseline_target"]) for c in checks.get(REGRESSION, [])
             if c.get("baseline_target")),
            None,
        )  # fmt: skip
    return Verdict(status, not failing, failing, warned, statuses, gates, baseline)


def _named(name: str, status: str) -> Gate:
    level = "requirement" if status == FAIL else "warning"
    return Gate(name, "", "", name, level, status, None, None, None)


def from_row(row: Mapping[str, Any]) -> Verdict:
    """The verdict a ``verdicts`` row holds (what every surface reading the warehouse shows)."""
    gates = [Gate(**g) for g in row.get("gates") or []]
    if not gates:  # a row written before the gates were stored: their names alone
        gates = [_named(name, FAIL) for name in row.get("failing") or []]
        gates += [_named(name, WARN) for name in row.get("warned") or []]
    statuses = {k: row[f"{k}_status"] for k in KINDS if row.get(f"{k}_status")}
    return Verdict(
        status=row["status"],
        approved=bool(row["approved"]),
        failing=list(row.get("failing") or []),
        warned=list(row.get("warned") or []),
        statuses=statuses,
        gates=gates,
        baseline=row.get("baseline_target"),
    )


def run_checks(report: Any, guarded: Any = None) -> dict[str, list[dict[str, Any]]]:
    """The checks of one run of ``test``, ``fuzz`` or ``report`` by kind, as the pipeline
    stores them: DecGuard's gates of the report (its property gates, ``<property>.<gate>``,
    as properties), the cost and calibration gates of its extension sections, and with the
    guard extension (``guarded``, a ``core.guard.evaluation.GuardedRun``) every suite's guard
    gates and the other suites' DecGuard gates."""
    golden: list[dict[str, Any]] = []
    properties: list[dict[str, Any]] = []
    for check in report.checks:
        (properties if "." in str(check["gate"]) else golden).append(check)
    extensions = report.extensions
    for source, name in (("cost", "usage"), ("calibration", "calibration")):
        section = extensions.get(name) or {}
        golden += [{**c, "source": source} for c in section.get("checks") or []]
    out = {GOLDEN: golden, PROPERTIES: properties}
    if guarded is not None:
        guard: list[dict[str, Any]] = []
        for index, run in enumerate(guarded.runs):
            guard += [{**c, "suite": run.label} for c in run.checks]
            if index:  # the main evaluation's DecGuard gates are the golden ones
                guard += [{**c, "suite": run.label} for c in run.report.document["checks"]]
        out[GUARD] = guard
    return out

"""A target's verdict, its approval as a baseline, and the contract's scoreboard: what the
``verdict``, ``approved_target`` and ``scoreboard`` assets call. No Dagster here.

The verdict reads what the target's evaluation stored (this run's rows, else the newest):
the checks of every kind (``gate_results``, ``property_checks``, ``guard_checks``,
``regression_checks``), the headline metrics, the regression diff and the report, decides
with ``core.verdict.decide`` and writes one ``verdicts`` row. A target is approved when no
requirement of any kind failed; the regression baseline of later versions is chosen among
approved targets (``steps/diff.known_targets`` reads :func:`approvals`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decguard_pipeline.core.guard.curves import calibration_of
from decguard_pipeline.core.report.html import read_sidecar
from decguard_pipeline.core.report.sidecar import sections_of
from decguard_pipeline.core.report.verify import load_report
from decguard_pipeline.core.verdict import GOLDEN, GUARD, PROPERTIES, REGRESSION, Verdict, decide
from decguard_pipeline.steps.base import Step, evaluated_of, run_rows
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import write_page
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.verdict import verdict_row

# Where each kind of check is stored (same columns as gate_results).
CHECK_TABLES = {
    GOLDEN: "gate_results",
    PROPERTIES: "property_checks",
    GUARD: "guard_checks",
    REGRESSION: "regression_checks",
}
# The scoreboard's numbers from the ``metrics`` table (DecGuard's flat metrics). The cost per
# 1,000 decisions is there when the backend reported usage and the contract prices it.
METRICS = {
    "accuracy": "accuracy",
    "macro_f1": "macro_f1",
    "ece": "ece",
    "brier": "brier",
    "nll": "nll",
    "coverage": "coverage",
    "error_rate": "error_rate",
    "latency_p95_ms": "latency_p95_ms",
    "cost_per_1000": "cost_per_1000",
}


@dataclass
class TargetVerdict:
    target: str
    verdict: Verdict
    row: dict[str, Any]  # the ``verdicts`` row
    checks: dict[str, list[dict[str, Any]]]  # by kind

    @property
    def approved(self) -> bool:
        return self.verdict.approved


def stored_checks(
    entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str | None
) -> dict[str, list[dict[str, Any]]]:
    """Every kind's checks of a target: run ``run_id``'s, else the newest."""
    out = {}
    for kind, table in CHECK_TABLES.items():
        rows = run_rows(warehouse, table, entry.key, target, run_id)
        if rows:
            out[kind] = rows
    return out


def _last(
    warehouse: Warehouse, table: str, entry: ContractEntry, target: str, run_id: str
) -> dict[str, Any] | None:
    rows = run_rows(warehouse, table, entry.key, target, run_id)
    return rows[-1] if rows else None


def decide_target(entry: ContractEntry, target: str, step: Step) -> TargetVerdict:
    """The verdict over everything the target's evaluation stored; its ``verdicts`` row."""
    wh = step.warehouse
    with wh.snapshot():  # what the run stored, read together
        evaluated = evaluated_of(entry, target, step)
        checks = stored_checks(entry, target, wh, step.run_id)
        regression = _last(wh, "diffs", entry, target, step.run_id)
        metrics = {
            r["metric"]: r["value"]
            for r in run_rows(wh, "metrics", entry.key, target, step.run_id) or []
        }
        report = _last(wh, "reports", entry, target, step.run_id)
    verdict = decide(checks, baseline=None if regression is None else regression["baseline_target"])
    numbers = {name: metrics.get(metric) for name, metric in METRICS.items()}
    numbers["ece_equal_mass"] = calibration_of(evaluated.results, entry.require().contract)[
        "ece_equal_mass"
    ]
    report_path = None if report is None else report["path"]
    html = None if report_path is None else Path(report_path).with_suffix(".html")
    diff_html = _diff_html(regression)
    if html is not None and html.is_file():  # the page says the verdict, as every surface
        judged_page(entry, target, step, verdict, Path(report_path), diff_html)
    row = verdict_row(
        step.keys(entry.key, target),
        evaluated.run,
        verdict,
        numbers,
        regression=regression,
        report_path=report_path,
        report_html=str(html) if html is not None and html.is_file() else None,
        diff_html=diff_html,
    )
    wh.write("verdicts", [row], **step.keys(entry.key, target))
    return TargetVerdict(target, verdict, row, checks)


def judged_page(
    entry: ContractEntry,
    target: str,
    step: Step,
    verdict: Verdict,
    report_path: Path,
    diff_html: str | None,
) -> Path:
    """Write the report's page again (atomically, same file) with the pipeline's verdict in
    its banner and the link to the diff's page: the report written before the diff and the
    verdict showed DecGuard's verdict alone. Read back from the report file and its sidecar
    (milliseconds), so a verdict materialised alone writes it too."""
    report = load_report(report_path)
    stored = read_sidecar(report_path, report)
    if stored is not None:
        report.extensions.update(sections_of(stored))
    diff_href = None
    if diff_html is not None and Path(diff_html).parent == report_path.parent:
        diff_href = Path(diff_html).name  # next to the page: a link that works anywhere
    return write_page(entry, target, step, report, report_path, verdict=verdict,
                      diff_href=diff_href)  # fmt: skip


def stored_verdict(
    entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str | None
) -> dict[str, dict[str, Any]]:
    """The ``verdicts`` row of run ``run_id`` (else the newest) as the verdict check's row."""
    rows = run_rows(warehouse, "verdicts", entry.key, target, run_id)
    return {"verdict": rows[-1]} if rows else {}


def _diff_html(regression: dict[str, Any] | None) -> str | None:
    """The page of the regression diff (``<stem>.diff.html`` next to its JSON), when written."""
    path = None if regression is None else regression.get("diff_path")
    if not path:
        return None
    html = Path(path).with_name(Path(path).name.removesuffix(".json") + ".html")
    return str(html) if html.is_file() else None


def latest_verdicts(contract: str, warehouse: Warehouse) -> list[dict[str, Any]]:
    """The newest verdict of every target of a contract, the newest evaluation first."""
    newest: dict[str, dict[str, Any]] = {}
    for row in warehouse.newest_writes("verdicts", contract).to_pylist():
        newest[row["target"]] = row  # the last row of a target's newest write
    rows = list(newest.values())
    return sorted(rows, key=lambda r: (r["evaluated_at"], r["target"]), reverse=True)


TURN_WAIT_S = 60.0  # a scoreboard's turn takes milliseconds


@contextlib.contextmanager
def scoreboard_turn(contract: str, warehouse: Warehouse) -> Iterator[None]:
    """One scoreboard of a contract at a time on this host, from its read of the verdicts to
    the end of the block (the scoreboard asset holds it until Dagster has stored its
    materialisation). Without it two targets evaluated side by side (``evaluate --workers``)
    could store their scoreboards in the opposite order to their reads, and the newest one
    would miss the target that finished last. A ``flock`` in the temp folder, keyed by the
    warehouse and the contract: the kernel releases it however its holder ends."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, and the race stays possible with --workers > 1
        yield
        return
    key = hashlib.sha256(f"{warehouse.root}\0{contract}".encode()).hexdigest()[:24]
    # one folder per user: another user's folder or file in a shared /tmp is not writable
    folder = Path(tempfile.gettempdir()) / f"decguard-pipeline-locks-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(folder / f"scoreboard-{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # no lock to be had (a read-only temp folder): the race is only a miss
        fd = -1
    if fd < 0:
        yield
        return
    try:
        # bounded: a holder that never let go (a generator Dagster abandoned, kept alive)
        # must not wedge every later scoreboard; past the bound, go on without the turn
        deadline = time.monotonic() + TURN_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


def approvals(contract: str, warehouse: Warehouse) -> dict[str, dict[str, Any]]:
    """Per target, its newest verdict's evaluation and approval:
    ``{target: {"evaluation_run_id", "approved"}}``."""
    return {
        r["target"]: {"evaluation_run_id": r["evaluation_run_id"], "approved": r["approved"]}
        for r in latest_verdicts(contract, warehouse)
    }

"""When a target's evaluation counts: once its run has written the target's ``verdicts`` row.

An evaluation writes ``runs``, ``case_results``, the metrics, checks, report, diff, property
and guard rows of a target, and its verdict last (the verdict step runs after every other
part, and only when none broke). A run broken midway may have committed some of those rows and
no verdict: they stay queryable in the tables, but they are not the target's evaluation. So,
for the tables in ``schema.EVALUATION``:

* ``latest_<table>`` (warehouse/views.py) and ``Warehouse.read_latest`` give the newest write
  of a run that wrote a ``verdicts`` row of the same contract and target;
* whether a target was already evaluated on the current inputs (the sensor,
  steps/registration.py) and which targets can be a regression baseline (steps/diff.py) go by
  such runs;
* retention never deletes ``verdicts`` (warehouse/maintenance.py).
"""

from __future__ import annotations

from decguard_pipeline.warehouse.schema import EVALUATION, VERDICTS


def gated(table: str) -> bool:
    """Whether ``table``'s newest rows are those of the newest run that reached its verdict
    (else simply those of the newest write)."""
    return table in EVALUATION


def completed_condition(alias: str) -> str:
    """SQL true for the rows of ``alias`` written by a run that wrote a verdict of the same
    contract and target (the verdicts table named unqualified, as the views name theirs)."""
    return (
        f'EXISTS (SELECT 1 FROM "{VERDICTS}" AS _v WHERE _v.contract = {alias}.contract '
        f"AND _v.target = {alias}.target AND _v.run_id = {alias}.run_id)"
    )

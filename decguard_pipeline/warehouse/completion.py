"""When a target's evaluation counts: once its run has written the target's ``verdicts`` row.

An evaluation writes ``runs``, ``case_results``, the metrics, checks, report, diff, property
and guard rows of a target one file at a time, and its verdict last (the verdict step runs
after every other part, and only when none broke). A run killed or broken midway leaves some
of those files and no verdict: it stays queryable in the tables, but it is not the target's
evaluation. So, for the tables in ``schema.EVALUATION``:

* ``latest_<table>`` (warehouse/views.py) and ``Warehouse.read_latest`` give the newest write
  of a run that wrote a ``verdicts`` row of the same contract and target;
* whether a target was already evaluated on the current inputs (the sensor,
  steps/registration.py) and which targets can be a regression baseline (steps/diff.py) go by
  such runs;
* compaction keeps that write apart, as it keeps the partition's newest write, and retention
  never deletes ``verdicts`` (warehouse/compaction.py).

The verdicts table is small (one row per evaluation), and a run's write is named after it
(``<stamp>_<run part>.parquet``): whether a run reached its verdict is a look at the names in
one partition folder, plus the run ids of its compacted files, if any.
"""

from __future__ import annotations

from decguard_pipeline.warehouse.locations import Location
from decguard_pipeline.warehouse.manifest import (
    counted_files,
    counted_table_files,
    is_compacted,
    run_part,
    writer_of,
)
from decguard_pipeline.warehouse.schema import EVALUATION, VERDICTS
from decguard_pipeline.warehouse.storage import storage_of


def gated(table: str) -> bool:
    """Whether ``table``'s newest rows are those of the newest run that reached its verdict
    (else simply those of the newest write)."""
    return table in EVALUATION


class Completed:
    """The runs that wrote a verdict of one contract and target, read from its ``verdicts``
    partition folder (``folder``) as it is now."""

    def __init__(self, folder: Location) -> None:
        files = counted_files(folder)
        self._parts = {writer_of(p.name) for p in files if not is_compacted(p.name)}
        self._compacted = [p for p in files if is_compacted(p.name)]
        self._merged: set[str] | None = None  # run parts of the compacted files, when asked

    def _merged_parts(self) -> set[str]:
        if self._merged is None:
            self._merged = set()
            for path in self._compacted:
                runs = storage_of(path).read_table(path, columns=["run_id"]).column("run_id")
                self._merged |= {run_part(r) for r in runs.to_pylist() if r is not None}
        return self._merged

    def has_part(self, part: str) -> bool:
        """Whether the run whose writes carry ``part`` in their names wrote a verdict."""
        return part in self._parts or (bool(self._compacted) and part in self._merged_parts())

    def has(self, run_id: str) -> bool:
        """Whether run ``run_id`` wrote a verdict of this target."""
        return self.has_part(run_part(run_id))

    def write_done(self, path: Location) -> bool:
        """Whether the write ``path`` (not a compacted file) is by a run that wrote a verdict."""
        return self.has_part(writer_of(path.name))


def completed(root: Location, contract_folder: str, target_folder: str) -> Completed:
    """The completed runs of the partition ``contract=…/target=…`` (folder names as written)."""
    return Completed(root / VERDICTS / contract_folder / target_folder)


def write_key(path: Location) -> str:
    """``contract=…/target=…/<run part>`` of a write: the same for every table's writes of
    one run and partition."""
    return f"{path.parent.parent.name}/{path.parent.name}/{writer_of(path.name)}"


def verdict_keys(root: Location) -> set[str]:
    """The ``write_key`` of every verdicts write a reader counts now, by name (compaction
    never merges the verdict of a run whose write ``latest_*`` shows)."""
    writes, _ = counted_table_files(root / VERDICTS)
    return {write_key(path) for path in writes}

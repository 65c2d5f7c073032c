"""``warehouse compact``: DuckLake's own maintenance, called in order.

1. With ``keep_days``, retention: the rows older than that are deleted, in one transaction,
   except each contract's and target's newest write and, in a table an evaluation writes,
   its newest write of a run that reached its verdict (``latest_*`` keeps its answer), and
   the ``targets``, ``runs`` and ``verdicts`` tables (a target's first registration and first
   evaluation choose regression baselines; ``runs`` says whether a target was already
   evaluated, ``verdicts`` which runs completed: warehouse/completion.py).
2. ``ducklake_flush_inlined_data``: rows inlined in the catalog (small writes) move into
   Parquet files, while no reader reads (``Lake.flush_turn``: the flush deletes the rows
   from the catalog, which a reader mid-query would miss). When readers keep reading for
   ``flush_wait_s``, the rows stay inlined until the next compaction.
3. ``ducklake_merge_adjacent_files`` (and ``ducklake_rewrite_data_files`` after a retention,
   which applies the deletions): small files become a few large ones.
4. ``ducklake_expire_snapshots``: snapshots older than ``snapshot_days`` go (time travel
   reaches back that far, never further), then ``ducklake_cleanup_old_files`` deletes the
   files only they referenced.
5. ``ducklake_delete_orphaned_files``: files no snapshot ever referenced (left by writers that
   were killed before their commit), once older than ``orphan_grace_s`` (a writer still
   running may be about to commit its files).

Each step is a DuckLake transaction: readers keep seeing every row exactly once before, during
and after, a killed compaction leaves the state of its last finished step, and writers never
wait for more than one step's commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.warehouse.completion import completed_condition, gated
from decguard_pipeline.warehouse.lake import ALIAS
from decguard_pipeline.warehouse.schema import TABLES, VERDICTS
from decguard_pipeline.warehouse.store import Warehouse
from decguard_pipeline.warehouse.views import newest

# Retention never deletes these (see the module docstring).
KEPT_WHOLE = frozenset({"targets", "runs", VERDICTS})


@dataclass(frozen=True)
class Settings:
    keep_days: float | None = None  # retention: delete rows older than this (off)
    snapshot_days: float = 7.0  # time travel window: older snapshots expire
    orphan_grace_s: float = 86400.0  # unreferenced files younger than this are left alone
    dry_run: bool = False  # only report what is there
    flush_wait_s: float = 60.0  # how long the flush waits for readers to finish
    # the calendar ages are measured on (tests pass a fixed day)
    today: Callable[[], datetime] = field(default=lambda: datetime.now(UTC), repr=False)

    def __post_init__(self) -> None:
        if self.keep_days is not None and self.keep_days < 0:
            raise DecGuardError("keep-days must not be negative")
        if self.snapshot_days < 0:
            raise DecGuardError("snapshot-days must not be negative")


@dataclass
class TableResult:
    files_before: int = 0
    files_after: int = 0
    rows_dropped: int = 0  # by retention


@dataclass
class Result:
    tables: dict[str, TableResult] = field(default_factory=dict)
    dry_run: bool = False
    inlined_rows: int = 0  # rows moved from the catalog into files
    snapshots_expired: int = 0
    files_deleted: int = 0  # of expired snapshots, and orphans

    @property
    def files_before(self) -> int:
        return sum(t.files_before for t in self.tables.values())

    @property
    def files_after(self) -> int:
        return sum(t.files_after for t in self.tables.values())

    def render(self) -> str:
        lines = [f"{'table':<24} {'files before':>12} {'after':>7} {'rows dropped':>13}"]
        for name, t in self.tables.items():
            if t.files_before or t.files_after or t.rows_dropped:
                lines.append(
                    f"{name:<24} {t.files_before:>12} {t.files_after:>7} {t.rows_dropped:>13}"
                )
        lines.append(
            f"{'all tables':<24} {self.files_before:>12} {self.files_after:>7} "
            f"{sum(t.rows_dropped for t in self.tables.values()):>13}"
        )
        if not self.dry_run:
            lines.append(
                f"inlined rows written to files: {self.inlined_rows:,}; snapshots expired: "
                f"{self.snapshots_expired:,}; files deleted: {self.files_deleted:,}"
            )
        return "\n".join(lines)


def data_files(warehouse: Warehouse) -> dict[str, int]:
    """Data files each table's current snapshot reads."""
    found = warehouse.query(f"SELECT table_name, file_count FROM ducklake_table_info('{ALIAS}')")
    counts = dict(zip(found.column(0).to_pylist(), found.column(1).to_pylist(), strict=True))
    return {t: int(counts.get(t) or 0) for t in TABLES}


def compact(
    warehouse: Warehouse, settings: Settings | None = None, *, log: Callable[[str], None] = print
) -> Result:
    """Run the maintenance of the module docstring on ``warehouse``."""
    # on the process's one thread, not ``bulk``: a flush right after the thread count was
    # raised aborted DuckDB once (CI, not reproduced); compaction has no hurry
    return _compact(warehouse, settings or Settings(), log)


def _compact(warehouse: Warehouse, settings: Settings, log: Callable[[str], None]) -> Result:
    result = Result(dry_run=settings.dry_run)
    for table, files in data_files(warehouse).items():
        result.tables[table] = TableResult(files_before=files, files_after=files)
    if settings.dry_run:
        return result
    lake, now = warehouse.lake, settings.today()
    if settings.keep_days is not None:
        cutoff = now - timedelta(days=settings.keep_days)
        with warehouse.direct() as con:
            for table in TABLES:
                if table in KEPT_WHOLE:
                    continue
                name = f'"{table}"'
                shown = f"SELECT rowid FROM {name} AS _t WHERE {newest(name, False)}"
                if gated(table):
                    shown += (
                        f" UNION ALL SELECT rowid FROM {name} AS _t WHERE "
                        f"{completed_condition('_t')} AND {newest(name, True)}"
                    )
                found = con.execute(
                    f'DELETE FROM "{table}" WHERE recorded_at < $cutoff AND rowid NOT IN ({shown})',
                    {"cutoff": cutoff},
                ).fetchone()
                result.tables[table].rows_dropped = int(found[0]) if found else 0

    def call(sql: str, params: dict[str, object] | None = None) -> list[tuple[object, ...]]:
        # each call is its own commit; DuckLake's own functions, so no read turn
        with lake.commit_lock():
            con = lake.cursor()
            try:
                return con.execute(sql, params or None).fetchall()
            finally:
                con.close()

    log("moving inlined rows into files")
    with lake.flush_turn(settings.flush_wait_s) as alone:
        if alone:
            flushed = call(f"SELECT * FROM ducklake_flush_inlined_data('{ALIAS}')")
            result.inlined_rows = sum(int(r[-1] or 0) for r in flushed)
        else:
            log(
                f"readers kept reading for {settings.flush_wait_s:g} s: inlined rows stay in "
                "the catalog until the next compaction"
            )
    log("merging small files")
    call(f"CALL ducklake_merge_adjacent_files('{ALIAS}')")
    if any(t.rows_dropped for t in result.tables.values()):
        call(f"CALL ducklake_rewrite_data_files('{ALIAS}')")
        call(f"CALL ducklake_merge_adjacent_files('{ALIAS}')")
    log("expiring old snapshots")
    expired = call(
        f"SELECT * FROM ducklake_expire_snapshots('{ALIAS}', older_than => $at)",
        {"at": now - timedelta(days=settings.snapshot_days)},
    )
    result.snapshots_expired = len(expired)
    log("deleting the files nothing reads")
    deleted = call(f"SELECT * FROM ducklake_cleanup_old_files('{ALIAS}', cleanup_all => true)")
    orphans = call(
        f"SELECT * FROM ducklake_delete_orphaned_files('{ALIAS}', older_than => $at)",
        {"at": datetime.now(UTC) - timedelta(seconds=settings.orphan_grace_s)},
    )
    result.files_deleted = len(deleted) + len(orphans)
    for table, files in data_files(warehouse).items():
        result.tables[table].files_after = files
    log(f"compacted {warehouse.root}")
    return result

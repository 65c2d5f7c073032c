"""Compaction: old writes of a table merged into a few larger files, switched atomically.

Per table, contract and target (one partition folder), the writes older than
``older_than_days`` — never the partition's newest write, nor, in a table a target's
evaluation writes, the newest write of a run that reached its verdict
(warehouse/completion.py): ``latest_*`` reads them — are merged with the compacted file of
their calendar month (UTC) into one new compacted file. A new manifest per table then lists
the table's compacted files (``live``) and every file they replace (``hidden``), and takes
effect ``activation_delay_s`` later; once it has been in effect for ``grace_s``, the files it
hides and the manifests before it are deleted. Readers count
rows by the manifest in effect when they start (warehouse/manifest.py), so a concurrent reader
sees every row exactly once throughout, and a compaction killed at any point leaves either
the old state or the new one, with only unreferenced files (deleted by the next run) behind.

Writers never wait: compaction only touches files it listed, and a write published meanwhile
is simply one more write. Two compactions never run at once on a warehouse
(warehouse/lease.py: a lock file the kernel releases when its holder dies, even by kill -9;
on an object store a lease object created only if absent, renewed while the compaction runs).

The file layer is the warehouse's own (warehouse/storage.py): list a folder, publish a file
(staged, then renamed; on an object store uploaded whole in one PUT), delete a file.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from decguard_pipeline.warehouse.compaction_settings import Result, Settings, TableResult
from decguard_pipeline.warehouse.completion import Completed, completed, gated
from decguard_pipeline.warehouse.lease import CompactionBusy, Lease, held
from decguard_pipeline.warehouse.locations import Location
from decguard_pipeline.warehouse.manifest import (
    COMPACTED,
    MANIFEST_SEED,
    MANIFESTS,
    Manifest,
    active_manifest,
    counted_files,
    is_compacted,
    manifest_name,
    manifest_table,
    manifests,
    now_us,
    partition_folders,
    read_manifest,
    writer_of,
)
from decguard_pipeline.warehouse.schema import TABLES, VERDICTS
from decguard_pipeline.warehouse.storage import storage_of
from decguard_pipeline.warehouse.store import Warehouse

__all__ = ["CompactionBusy", "Result", "Settings", "TableResult", "compact"]
# production_records reads a day's inbox batch by batch in file order (then by position
# within a batch): merging batches would change the order it reads them in.
NOT_COMPACTED = frozenset({"production_inbox"})
# Retention never deletes these: a target's first registration and first evaluation decide
# which target is a regression baseline (steps/diff.py), whether a target was already
# evaluated on these inputs is looked up in runs (steps/registration.py), and the verdicts say
# which runs completed (warehouse/completion.py: what latest_* and the pipeline's reads count).
KEPT_WHOLE = frozenset({"targets", "runs", VERDICTS})
_STAMP = "%Y%m%dT%H%M%S%fZ"


@dataclass
class _Merge:
    folder: Location
    sources: list[Location]  # counted files merged (writes and compacted), name order


@dataclass
class _Shown:
    """What one compaction's plans share, per partition (``contract=…/target=…``): its runs
    that reached their verdict, and the run parts of the writes the ``latest_*`` views of the
    tables an evaluation writes show (warehouse/completion.py). The views find those runs
    by the names of the verdicts writes, so their verdicts are never merged: the verdicts
    table is planned last."""

    completed: dict[str, Completed] = field(default_factory=dict)
    runs: dict[str, set[str]] = field(default_factory=dict)


def _in_order() -> list[str]:
    """Every table, the verdicts last (their plan needs every other table's)."""
    return sorted(TABLES, key=lambda table: table == VERDICTS)


def compact(
    warehouse: Warehouse, settings: Settings | None = None, *, log: Callable[[str], None] = print
) -> Result:
    """Compact every table of ``warehouse`` (see the module docstring)."""
    settings = settings or Settings()
    warehouse.ensure_catalog()
    result = Result(dry_run=settings.dry_run)
    if settings.dry_run:
        shown = _Shown()
        for table in _in_order():
            result.tables[table] = _plan_only(warehouse, table, settings, shown)
        return result
    with held(warehouse.root) as lease:
        _wait_for_manifests(warehouse, log)
        for table in TABLES:
            result.tables[table] = TableResult()
        _clean(warehouse, settings, result, lease)  # what earlier runs left to delete
        newest_activation = 0
        shown = _Shown()
        for table in _in_order():
            counts = result.tables[table]
            activation = _compact_table(warehouse, table, settings, counts, lease, shown)
            newest_activation = max(newest_activation, activation)
        if settings.wait and newest_activation:
            start = time.monotonic()
            ready_us = newest_activation + int(settings.grace_s * 1e6)
            delay = (ready_us - now_us()) / 1e6
            if delay > 0:
                log(f"waiting {delay:.1f} s for the new manifests, then deleting what they replace")
                time.sleep(delay)
            tidy = _clean(warehouse, settings, result, lease)
            if tidy:  # leave the command with the short manifests in effect
                time.sleep(max(0.0, (tidy - now_us()) / 1e6) + 0.001)
            result.waited_s = time.monotonic() - start
        loose = warehouse.loose_tables()  # writes always carry every column: only old files
        if loose and loose != warehouse.find_loose_tables():
            warehouse.ensure_catalog(refresh=True)  # old files rewritten: drop union_by_name
        for table, counts in result.tables.items():
            counts.files_after = _count(warehouse, table)
    return result


# -- planning ----------------------------------------------------------------------------


def _cutoff(settings: Settings, days: float) -> str:
    return (settings.today() - timedelta(days=days)).strftime(_STAMP)


def _plan(
    warehouse: Warehouse,
    table: str,
    manifest: Manifest,
    settings: Settings,
    shown: _Shown,
) -> tuple[list[_Merge], int]:
    """The merges of one table, and how many files a reader counts now (``shown``: what
    the plans of the tables before it found)."""
    table_dir = warehouse.root / table
    cutoff = _cutoff(settings, settings.older_than_days)
    keep = None if settings.keep_days is None else _cutoff(settings, settings.keep_days)
    columns = set(TABLES[table].names)
    merges, counted = [], 0
    for folder in partition_folders(table_dir):
        files = counted_files(folder, manifest)
        counted += len(files)
        if table in NOT_COMPACTED or not files:
            continue
        # the newest file holds the partition's newest write (latest_* reads only writes);
        # found for every partition, even one with nothing to merge (the verdicts need it)
        kept = {files[-1], *_shown_writes(warehouse, table, folder, files, shown)}
        if len(files) < 2:
            continue
        candidates = [
            f for f in files if f not in kept and (is_compacted(f.name) or f.name < cutoff)
        ]
        months: dict[str, list[Location]] = {}
        for path in candidates:
            months.setdefault(path.name[:6], []).append(path)
        for group in months.values():
            writes = [p for p in group if not is_compacted(p.name)]
            old = keep is not None and table not in KEPT_WHOLE and group[0].name < keep
            if (writes and len(group) > 1) or old or not _conforms(group, columns):
                merges.append(_Merge(folder, group))
    return merges, counted


def _shown_writes(
    warehouse: Warehouse, table: str, folder: Location, files: list[Location], shown: _Shown
) -> list[Location]:
    """The writes of a partition a ``latest_*`` view shows besides the newest: in a table an
    evaluation writes, the newest write of a run that reached its verdict; of the verdicts,
    those of the runs whose writes are shown. (Compacted files are passed over: the
    completed rows they hold are older than the write kept apart.)"""
    key = f"{folder.parent.name}/{folder.name}"
    writes = [p for p in files if not is_compacted(p.name)]
    if table == VERDICTS:
        runs = shown.runs.get(key, set())
        return [p for p in writes if writer_of(p.name) in runs]
    if not gated(table):
        return []
    if key not in shown.completed:
        shown.completed[key] = completed(warehouse.root, folder.parent.name, folder.name)
    done = shown.completed[key]
    newest = next((p for p in reversed(writes) if done.write_done(p)), None)
    if newest is None:
        return []
    shown.runs.setdefault(key, set()).add(writer_of(newest.name))
    return [newest]


def _conforms(paths: list[Location], columns: set[str]) -> bool:
    return all(
        columns <= set(storage_of(p).read_schema(p).names)
        for p in paths
        if not is_compacted(p.name)
    )


def _plan_only(warehouse: Warehouse, table: str, settings: Settings, shown: _Shown) -> TableResult:
    manifest = active_manifest(warehouse.root / table)
    merges, counted = _plan(warehouse, table, manifest, settings, shown)
    merged = sum(len(m.sources) for m in merges)
    return TableResult(
        files_before=counted,
        files_after=counted - merged + len(merges),
        writes_merged=sum(1 for m in merges for p in m.sources if not is_compacted(p.name)),
    )


def _count(warehouse: Warehouse, table: str) -> int:
    table_dir = warehouse.root / table
    manifest = active_manifest(table_dir)
    return sum(len(counted_files(folder, manifest)) for folder in partition_folders(table_dir))


# -- one table ---------------------------------------------------------------------------


def _compact_table(
    warehouse: Warehouse,
    table: str,
    settings: Settings,
    counts: TableResult,
    lease: Lease,
    shown: _Shown,
) -> int:
    """Write the compacted files of ``table`` and publish its next manifest; returns the
    manifest's activation time (0 when there was nothing to do)."""
    table_dir = warehouse.root / table
    manifest = active_manifest(table_dir)
    merges, counts.files_before = _plan(warehouse, table, manifest, settings, shown)
    if not merges:
        return 0
    keep = None
    if settings.keep_days is not None and table not in KEPT_WHOLE:
        keep = settings.today() - timedelta(days=settings.keep_days)
    live = {file: (writes, rows) for file, writes, rows in manifest.sizes}
    hidden = {f for f in manifest.hidden if warehouse.storage.exists(table_dir / f)}
    token = uuid.uuid4().hex[:12]
    for merge in merges:
        prefix = f"{merge.folder.parent.name}/{merge.folder.name}/"
        data = _merged(table, merge.sources, keep, counts)
        for source in merge.sources:
            live.pop(prefix + source.name, None)
            hidden.add(prefix + source.name)
        counts.writes_merged += sum(1 for p in merge.sources if not is_compacted(p.name))
        if data is None:
            continue
        first = data.column("recorded_at")[0].as_py().strftime(_STAMP)
        name = f"{min(first, merge.sources[0].name.split('_', 1)[0])}_~{token}.parquet"
        path = merge.folder / name
        lease.check()
        warehouse._publish(path, lambda tmp, d=data, s=merge.sources: _write_compacted(d, tmp, s))
        writes = len(pc.unique(data.column("recorded_at")))
        live[prefix + name] = (writes, data.num_rows)
        counts.compacted_written += 1
    return _publish_manifest(warehouse, table_dir, live, hidden, settings, lease)


def _merged(
    table: str, sources: list[Location], keep: datetime | None, counts: TableResult
) -> pa.Table | None:
    """The rows of ``sources`` in the table's current columns, oldest write first (rows of
    one write keep their order); None when retention dropped every row."""
    schema = TABLES[table]
    parts = [_conformed(storage_of(path).read_table(path), schema) for path in sources]
    data = pa.concat_tables(parts)
    if keep is not None:
        at = data.column("recorded_at")
        old = pc.less(at, pa.scalar(keep, type=at.type))
        counts.writes_dropped += len(pc.unique(pc.filter(at, old)))
        data = data.filter(pc.invert(old))
    if not data.num_rows:
        return None
    order = pc.sort_indices(
        data, sort_keys=[("recorded_at", "ascending"), ("run_id", "ascending")]
    )  # a stable sort: each write's rows stay in the order it wrote them
    return data.take(order)


def _conformed(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` with exactly ``schema``'s columns: a column an older version did not write
    is NULL."""
    columns = [
        data.column(f.name).cast(f.type)
        if f.name in data.column_names
        else pa.nulls(data.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _write_compacted(data: pa.Table, path: str, sources: list[Location]) -> None:
    metadata = {b"decguard.compacted_from": "\n".join(p.name for p in sources).encode()}
    data = data.replace_schema_metadata({**(data.schema.metadata or {}), **metadata})
    pq.write_table(data, path, compression="zstd", row_group_size=256 * 1024)


def _publish_manifest(
    warehouse: Warehouse,
    table_dir: Location,
    live: dict[str, tuple[int, int]],
    hidden: set[str],
    settings: Settings,
    lease: Lease,
) -> int:
    """Publish the next manifest of a table; returns its activation time. The publication
    must happen before the activation (every reader starting after it must find the
    manifest), so one that would come too late is refused and retried with a later one; an
    upload to an object store that ended after the activation is deleted and retried too."""
    delay_us = int(settings.activation_delay_s * 1e6)
    folder = table_dir / MANIFESTS
    while True:
        activation = now_us() + delay_us
        data = manifest_table(activation, live, sorted(hidden))

        def in_time(at: int = activation) -> None:
            lease.check()
            if now_us() >= at - delay_us // 2:
                raise _TooLate

        path = folder / manifest_name(activation, uuid.uuid4().hex[:12])
        try:
            warehouse._publish(
                path, lambda tmp, d=data: pq.write_table(d, tmp), before_rename=in_time
            )
        except _TooLate:
            continue
        if now_us() >= activation:  # the upload outlasted the activation delay
            warehouse.storage.delete(path)
            continue
        return activation


class _TooLate(Exception):
    pass


# -- deleting what the manifest in effect replaced ---------------------------------------


def _clean(warehouse: Warehouse, settings: Settings, result: Result, lease: Lease) -> int:
    """For every table whose manifest has been in effect for ``grace_s``: delete the files
    it hides, the manifests before it and compacted files no manifest lists (left by a
    killed compaction). Hidden files go first, then manifests, so that whatever a kill
    leaves is still consistent. A manifest whose hidden files are all gone is then replaced
    by one without them (every query reads the manifest: the list of a first compaction of
    a year would cost it tens of milliseconds). Returns the newest activation published."""
    published = 0
    now = now_us()
    grace_us = int(settings.grace_s * 1e6)
    for table in TABLES:
        table_dir = warehouse.root / table
        manifest = active_manifest(table_dir, now)
        if manifest.path is None or now < manifest.activation_us + grace_us:
            continue
        counts = result.tables.setdefault(table, TableResult())
        lease.check()
        delete = warehouse.storage.delete
        for relative in sorted(manifest.hidden):
            counts.deleted += delete(table_dir / relative)
        for older in manifests(table_dir):
            if older.name < manifest.path.name and older.name != MANIFEST_SEED:
                delete(older)
        pending = set()  # compacted files of manifests not yet in effect (none while locked)
        for newer in manifests(table_dir):
            if newer.name > manifest.path.name:
                pending |= read_manifest(newer).live
        for folder in partition_folders(table_dir):
            prefix = f"{folder.parent.name}/{folder.name}/"
            for path in warehouse.storage.files(folder, COMPACTED):
                relative = prefix + path.name
                if relative not in manifest.live and relative not in pending:
                    counts.deleted += delete(path)
        if manifest.hidden and not pending:
            live = {file: (writes, rows) for file, writes, rows in manifest.sizes}
            activation = _publish_manifest(warehouse, table_dir, live, set(), settings, lease)
            published = max(published, activation)
    return published


def _wait_for_manifests(warehouse: Warehouse, log: Callable[[str], None]) -> None:
    """A killed compaction may have published manifests that take effect in a moment: plan
    from the state after them."""
    newest = 0
    for table in TABLES:
        listed = manifests(warehouse.root / table)
        if listed:
            newest = max(newest, read_manifest(listed[-1]).activation_us)
    delay = (newest - now_us()) / 1e6
    if delay > 0:
        log(f"waiting {delay:.1f} s for a manifest published by an earlier compaction")
        time.sleep(delay + 0.001)

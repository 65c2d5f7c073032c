"""Which files of a table a reader counts: writes, compacted files and compaction manifests.

A table folder holds three kinds of published files:

* a **write**: ``contract=<c>/target=<t>/<UTC stamp>_<run id>.parquet``, one per
  ``Warehouse.write`` (plus the empty seed ``00000000_schema.parquet``);
* a **compacted file**: ``contract=<c>/target=<t>/<first stamp>_~<generation>.parquet``, the
  rows of many older writes of one partition (the ``~`` never occurs in a run id's part of a
  name, so the two kinds never mix);
* a **manifest**: ``_compaction/<activation>_<id>.parquet``, written by compaction. It lists
  the compacted files to read (``live``) and the files they replace (``hidden``), and takes
  effect at ``activation_us`` (epoch microseconds), a moment after it was published.

The rule every reader applies (the views in SQL, the pipeline in Python): take the newest
manifest whose activation is not after the reader's start ``T0``; count every write it does
not hide and every compacted file it lists as live; nothing else. Since a manifest and its
compacted files are published before its activation, and hidden files are deleted only a
grace period after it, every listing a reader makes after ``T0`` gives the same answer: a
reader sees each row exactly once, before, during and after a compaction, whichever order it
lists folders in.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass

import pyarrow as pa

from decguard_pipeline.warehouse.locations import Location
from decguard_pipeline.warehouse.storage import storage_of

WRITES = "[0-9]*_[!~]*.parquet"
COMPACTED = "[0-9]*_~*.parquet"
MANIFESTS = "_compaction"
MANIFEST_GLOB = "[0-9]*.parquet"
SEED = "00000000_schema.parquet"  # zero rows with the table's schema: views bind without data
COMPACTED_SEED = "00000000_~seed.parquet"  # lets the compacted-file glob match in an empty table
MANIFEST_SEED = "00000000000000000000_seed.parquet"  # activation 0: nothing compacted yet

MANIFEST_SCHEMA = pa.schema(
    [
        ("activation_us", pa.int64()),  # when the manifest takes effect (epoch microseconds)
        ("role", pa.string()),  # "manifest" (one header row), "live" or "hidden"
        ("file", pa.string()),  # contract=<c>/target=<t>/<name>, under the table folder
        ("writes", pa.int64()),  # live: writes in the compacted file
        ("rows", pa.int64()),  # live: rows in the compacted file
    ]
)


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._@=-]")


def run_part(run_id: str) -> str:
    """A run id as its writes' names carry it: ``<stamp>_<run part>.parquet``."""
    return _UNSAFE_NAME.sub("_", run_id) or "_"


def writer_of(name: str) -> str:
    """The run part of a write's name (``20250101T…Z_abc-1.parquet`` -> ``abc-1``)."""
    return name.split("_", 1)[-1].removesuffix(".parquet")


def now_us() -> int:
    return time.time_ns() // 1000


def is_compacted(name: str) -> bool:
    return "_~" in name


def manifest_name(activation_us: int, token: str) -> str:
    """Name order is activation order."""
    return f"{activation_us:020d}_{token}.parquet"


def manifest_table(
    activation_us: int, live: dict[str, tuple[int, int]], hidden: list[str]
) -> pa.Table:
    """A manifest: a header row, then every live compacted file (with its write and row
    counts) and every hidden file."""
    rows = [{"activation_us": activation_us, "role": "manifest"}]
    rows += [
        {"activation_us": activation_us, "role": "live", "file": f, "writes": w, "rows": r}
        for f, (w, r) in sorted(live.items())
    ]
    rows += [{"activation_us": activation_us, "role": "hidden", "file": f} for f in sorted(hidden)]
    return pa.Table.from_pylist(rows, schema=MANIFEST_SCHEMA)


@dataclass(frozen=True)
class Manifest:
    path: Location | None
    activation_us: int
    live: frozenset[str]
    hidden: frozenset[str]
    sizes: tuple[tuple[str, int, int], ...] = ()  # live file, its writes, its rows

    def counts(self, relative: str) -> bool:
        """Whether a reader under this manifest counts the file ``contract=…/target=…/name``."""
        name = relative.rsplit("/", 1)[-1]
        return relative in self.live if is_compacted(name) else relative not in self.hidden


NOTHING_COMPACTED = Manifest(None, 0, frozenset(), frozenset())


@functools.lru_cache(maxsize=256)
def read_manifest(path: Location) -> Manifest:
    """A manifest file, whatever its activation (immutable, so cached by path)."""
    table = storage_of(path).read_table(path, schema=MANIFEST_SCHEMA)
    rows = table.to_pylist()
    activation = rows[0]["activation_us"] if rows else 0
    live = [r for r in rows if r["role"] == "live"]
    return Manifest(
        path,
        activation,
        frozenset(r["file"] for r in live),
        frozenset(r["file"] for r in rows if r["role"] == "hidden"),
        tuple((r["file"], r["writes"] or 0, r["rows"] or 0) for r in live),
    )


def manifests(table_dir: Location) -> list[Location]:
    """Every published manifest of a table, oldest activation first."""
    return storage_of(table_dir).files(table_dir / MANIFESTS, MANIFEST_GLOB)


def active_manifest(table_dir: Location, at_us: int | None = None) -> Manifest:
    """The manifest a reader starting at ``at_us`` (default: now) goes by."""
    at_us = now_us() if at_us is None else at_us
    for path in reversed(manifests(table_dir)):
        try:
            manifest = read_manifest(path)
        except FileNotFoundError:  # deleted since listing: a newer one is active
            continue
        if manifest.activation_us <= at_us:
            return manifest
    return NOTHING_COMPACTED


def counted_files(directory: Location, manifest: Manifest | None = None) -> list[Location]:
    """The files of one partition folder a reader counts, in name order (a compacted file
    sorts by its oldest write, so name order stays time order)."""
    # the manifest is chosen before the folder is listed: the listing then holds every
    # file it counts (see the module docstring)
    table_dir = directory.parent.parent
    manifest = active_manifest(table_dir) if manifest is None else manifest
    listed = storage_of(directory).files(directory, "[0-9]*.parquet")
    prefix = f"{directory.parent.name}/{directory.name}/"
    return [p for p in listed if manifest.counts(prefix + p.name)]


def partition_folders(table_dir: Location) -> list[Location]:
    """Every ``contract=…/target=…`` folder of a table but the seed files' ``contract=_/target=_``,
    in name order."""
    storage = storage_of(table_dir)
    return [
        folder
        for contract in storage.folders(table_dir, "contract=*")
        for folder in storage.folders(contract, "target=*")
        if (folder.parent.name, folder.name) != ("contract=_", "target=_")
    ]


def counted_table_files(table_dir: Location) -> tuple[list[Location], list[Location]]:
    """The writes and the compacted files of a whole table that a reader starting now counts
    (the manifest is chosen before the folders are listed, as in ``counted_files``)."""
    manifest = active_manifest(table_dir)
    writes: list[Location] = []
    compacted: list[Location] = []
    for folder in partition_folders(table_dir):
        for path in counted_files(folder, manifest):
            (compacted if is_compacted(path.name) else writes).append(path)
    return writes, compacted


def sql_manifest(table_sql_path: str) -> str:
    """The active manifest's entries, as the SQL of a relation ``(role, path)`` where ``path``
    is the full path DuckDB reports as ``filename``. ``now()`` is the start of the reader's
    transaction: every listing of the query happens after it."""
    return (
        f"SELECT role, '{table_sql_path}/' || file AS path "
        f"FROM read_parquet('{table_sql_path}/{MANIFESTS}/{MANIFEST_GLOB}', filename = true) "
        "WHERE activation_us <= epoch_us(now()) "
        "QUALIFY dense_rank() OVER (ORDER BY activation_us DESC, filename DESC) = 1"
    )

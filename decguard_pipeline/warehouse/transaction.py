"""What a step writes, held until it commits in ONE DuckLake transaction.

A step's rows are staged on this machine while it runs: small writes as Arrow tables in
memory, large ones (``Warehouse.writing``: a day of records) in a local Parquet file. The
commit then inserts them all in one short DuckLake transaction (for a SQLite catalog, under
the turn every commit takes, warehouse/lake.py), so a reader sees all of the step's rows or
none of them and a step killed before its commit leaves nothing at all. Committing at the end
rather than holding a DuckLake transaction open while the step runs is what SQLite needs:
its snapshot of the catalog would be stale once anyone else commits, and its commit refused.

While the step runs, its own reads see its staged rows: a connection of the transaction
shadows each staged table by a temporary view, the table's committed rows followed by the
staged ones (so the ``latest_*`` views see them too).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from decguard_pipeline.warehouse import objects
from decguard_pipeline.warehouse.lake import ALIAS, Lake
from decguard_pipeline.warehouse.locations import Location

if TYPE_CHECKING:
    import duckdb

ORDER = "_order"  # the order written, in the ordered sources (``ordered()``)
BULK_ROWS = 50_000  # a commit of this many rows (or a spilled file) gets every core
_STAGED_AFTER = 1 << 62  # staged rows come after every committed one (DuckLake row ids)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Transaction:
    """The staged writes of one step (see the module docstring). Safe to use from several
    threads (a step may hand batches to a writer thread)."""

    def __init__(self, lake: Lake, files_root: Location) -> None:
        self.lake = lake
        self.files_root = files_root  # where files made in ``files_dir`` are published
        self.lock = threading.RLock()
        # table -> what is staged, in the order written: Arrow tables or Parquet files
        self.staged: dict[str, list[pa.Table | Path]] = {}
        self._scratch: Path | None = None  # spilled files; an object store's files
        self._files: Path | None = None
        self._reader: duckdb.DuckDBPyConnection | None = None
        self._shadowed: dict[str, int] = {}  # table -> staged items its view shows
        self._pinned = False  # the reader is inside a transaction of its own (``pinned``)

    # -- staging ---------------------------------------------------------------------

    def insert(self, table: str, data: pa.Table) -> None:
        if not data.num_rows:
            return
        if self._files is not None:
            data = _translate(data, f"{self._files}{os.sep}", self.files_root)
        with self.lock:
            self.staged.setdefault(table, []).append(data)

    @contextlib.contextmanager
    def spilling(self, table: str, schema: pa.Schema) -> Iterator[Callable[[pa.Table], None]]:
        """A local Parquet file of ``table`` rows, appended to batch by batch, staged when
        the block ends without error."""
        import pyarrow.parquet as pq

        path = self._scratch_dir() / f"{table}-{len(self.staged.get(table, []))}.parquet"
        with pq.ParquetWriter(path, schema, compression="zstd") as out:

            def append(data: pa.Table) -> None:
                if self._files is not None:
                    data = _translate(data, f"{self._files}{os.sep}", self.files_root)
                with self.lock:
                    out.write_table(data)

            yield append
        with self.lock:
            self.staged.setdefault(table, []).append(path)

    def files_dir(self, part: str) -> Path:
        """A folder of this transaction standing for ``<files_root>/<part>`` (object
        storage): what is written there is uploaded before the commit."""
        if self._files is None:
            self._files = self._scratch_dir() / "files"
        folder = self._files / part
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def location(self, path: str) -> str:
        """The published location of a path in ``files_dir`` (other paths as they are)."""
        prefix = f"{self._files}{os.sep}"
        if self._files is None or not path.startswith(prefix):
            return path
        return f"{self.files_root}/{path[len(prefix) :].replace(os.sep, '/')}"

    def staged_file(self, where: str) -> Path | None:
        """The local file of this transaction published at ``where`` (not uploaded yet: the
        step's own reads find it here), None for any other location."""
        prefix = f"{self.files_root}/"
        if self._files is None or not where.startswith(prefix):
            return None
        local = self._files.joinpath(*where[len(prefix) :].split("/"))
        return local if local.is_file() else None

    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="decguard-step-"))
        return self._scratch

    def spilled_run(self, table: str) -> Path | None:
        """The one file of ``table`` this transaction spilled, if that is all it staged."""
        items = self.staged.get(table, [])
        return items[0] if len(items) == 1 and isinstance(items[0], Path) else None

    # -- reading what is staged ----------------------------------------------------------

    @contextlib.contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection seeing the committed tables and, over them, what is staged."""
        with self.lock, self.lake.reading():
            if self._reader is None:
                self._reader = self.lake.cursor()
            changed = [t for t, items in self.staged.items() if self._shadowed.get(t) != len(items)]
            if changed:
                # one transaction for all the views: each statement on its own would begin
                # a DuckLake transaction (a snapshot read from the catalog) of its own
                con = self._reader
                if not self._pinned:
                    con.execute("BEGIN")
                try:
                    for table in changed:
                        self._shadow(con, table, self.staged[table])
                    if not self._pinned:
                        con.execute("COMMIT")
                except BaseException:
                    if not self._pinned:
                        con.execute("ROLLBACK")
                    self._shadowed.clear()
                    raise
                for table in changed:
                    self._shadowed[table] = len(self.staged[table])
            yield self._reader

    @contextlib.contextmanager
    def pinned(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """``reader()``'s connection inside one DuckLake transaction for the block
        (``Warehouse.snapshot``)."""
        with self.reader() as con:
            con.execute("BEGIN")
            self._pinned = True
            try:
                yield con
            except BaseException:
                self._pinned = False
                self._shadowed.clear()  # the views made in the block are rolled back
                with contextlib.suppress(Exception):
                    con.execute("ROLLBACK")
                raise
            self._pinned = False
            con.execute("COMMIT")  # it only read, and made temporary views

    def _shadow(
        self, con: duckdb.DuckDBPyConnection, table: str, items: list[pa.Table | Path]
    ) -> None:
        name = _quoted(table)
        parts = [f"SELECT *, rowid AS {ORDER} FROM {ALIAS}.main.{name}"]
        tables = [t for t in items if isinstance(t, pa.Table)]
        if tables:
            rows = pa.concat_tables(tables)
            import numpy as np

            order = pa.array(np.arange(rows.num_rows, dtype=np.int64) + _STAGED_AFTER)
            con.register(f"_staged_{table}", rows.append_column(ORDER, order))
            parts.append(f"SELECT * FROM {_quoted('_staged_' + table)}")
        for index, path in enumerate(p for p in items if isinstance(p, Path)):
            offset = _STAGED_AFTER + ((index + 1) << 48)
            literal = str(path).replace("'", "''")
            parts.append(
                f"SELECT * EXCLUDE (file_row_number), {offset} + file_row_number AS {ORDER} "
                f"FROM read_parquet('{literal}', file_row_number = true)"
            )
        union = " UNION ALL BY NAME ".join(parts)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {_quoted('_ordered_' + table)} AS {union}")
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * EXCLUDE ({ORDER}) "
            f"FROM {_quoted('_ordered_' + table)}"
        )

    def staged_run(self, table: str, contract: str, target: str, run_id: str) -> pa.Table | None:
        """The newest write of a run's rows of ``table`` among those staged (its rows are
        stamped when its step starts, after every write of the run committed before it, so
        it is the run's newest write); empty when every staged row is in memory and none is
        the run's; None when some are in a spilled file (DuckLake reads those)."""
        import pyarrow.compute as pc

        with self.lock:
            rows = in_memory(self.staged.get(table, []))
        if rows is None:
            return None
        mask = pc.and_(
            pc.and_(pc.equal(rows["contract"], contract), pc.equal(rows["target"], target)),
            pc.equal(rows["run_id"], run_id),
        )
        mine = rows.filter(mask)
        if mine.num_rows:
            newest = pc.max(mine["recorded_at"])
            mine = mine.filter(pc.equal(mine["recorded_at"], newest))
        return mine

    def ordered(self, table: str) -> str | None:
        """The temporary view of ``table`` with its ``_order`` column, when rows of it are
        staged (read through ``reader()``)."""
        return _quoted("_ordered_" + table) if table in self.staged else None

    # -- the end -------------------------------------------------------------------------

    def commit(self) -> None:
        """Upload the files made beside the tables, then insert everything staged in one
        DuckLake transaction."""
        with self.lock:
            if self._files is not None:
                for path in sorted(p for p in self._files.rglob("*") if p.is_file()):
                    relative = path.relative_to(self._files).as_posix()
                    objects.upload(path, self.files_root / relative)  # type: ignore[arg-type]
            if not self.staged:
                return
            every = [i for staged in self.staged.values() for i in staged]
            big = any(isinstance(i, Path) for i in every) or (
                sum(i.num_rows for i in every if isinstance(i, pa.Table)) >= BULK_ROWS
            )
            bulk = self.lake.bulk() if big else contextlib.nullcontext()
            with bulk, self.lake.committed() as con:
                for table, items in self.staged.items():
                    _insert(con, table, items)

    def close(self) -> None:
        with self.lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
            self.staged.clear()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


def in_memory(items: list[pa.Table | Path]) -> pa.Table | None:
    """A table's staged items as one Arrow table, when there are some and none is a spilled
    file."""
    if not items or not all(isinstance(i, pa.Table) for i in items):
        return None
    return pa.concat_tables(items)  # type: ignore[arg-type]


def _insert(con: duckdb.DuckDBPyConnection, table: str, items: list[pa.Table | Path]) -> None:
    """Insert a table's staged rows in the order written: runs of Arrow tables as one
    statement, each spilled file as one. The order is explicit (``ORDER BY``): DuckLake's
    insert of a parallel scan does not keep the scan's order, and readers go by row id."""
    name = _quoted(table)
    run: list[pa.Table] = []

    def flush() -> None:
        if not run:
            return
        import numpy as np

        rows = pa.concat_tables(run)
        rows = rows.append_column(ORDER, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
        con.register("_rows", rows)
        try:
            con.execute(
                f"INSERT INTO {name} BY NAME SELECT * EXCLUDE ({ORDER}) FROM _rows ORDER BY {ORDER}"
            )
        finally:
            con.unregister("_rows")
        run.clear()

    for item in items:
        if isinstance(item, pa.Table):
            run.append(item)
            continue
        flush()
        literal = str(item).replace("'", "''")
        con.execute(
            f"INSERT INTO {name} BY NAME SELECT * EXCLUDE (file_row_number) FROM "
            f"read_parquet('{literal}', file_row_number = true) ORDER BY file_row_number"
        )
    flush()


def _translate(data: pa.Table, prefix: str, published: Location) -> pa.Table:
    """``data`` with every string cell naming a file under ``prefix`` (a transaction's
    folder of files) naming its published location instead."""
    import pyarrow.compute as pc

    for index, field in enumerate(data.schema):
        if not pa.types.is_string(field.type):
            continue
        column = data.column(index)
        if not pc.any(pc.starts_with(column, prefix)).as_py():
            continue
        values = [
            f"{published}/{v[len(prefix) :].replace(os.sep, '/')}"
            if v is not None and v.startswith(prefix)
            else v
            for v in column.to_pylist()
        ]
        data = data.set_column(index, field, pa.array(values, field.type))
    return data

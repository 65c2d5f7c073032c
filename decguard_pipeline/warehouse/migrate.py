"""``warehouse migrate``: an existing Parquet warehouse of an earlier version into the DuckLake.

The earlier layout kept every write as a file ``<root>/<table>/contract=…/target=…/<stamp>_
<run>.parquet`` and, once compacted, merged files ``…/<stamp>_~<id>.parquet`` that a table's
newest manifest ``<root>/<table>/_compaction/<activation>_<id>.parquet`` lists as ``live``
beside the files they replaced (``hidden``). The rows a reader counted are those of the writes
that manifest does not hide and of the compacted files it lists; those, and only those, are
copied, each table's files in name order (time order, so ``production_inbox`` batches keep
theirs), with any column an older version did not write left NULL.

Every table is copied in ONE transaction, and committed only when, for every table, the rows
the warehouse gained equal the rows counted in the old files; otherwise nothing is kept and
the counts are reported (exit 2). The old files are left where they are (on a local disk,
moved into ``<root>/migrated-parquet/`` once committed, so a second migration finds nothing
to copy). Files beside the tables (``report_files``) stay where they are: rows name them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.warehouse.locations import Location
from decguard_pipeline.warehouse.schema import TABLES
from decguard_pipeline.warehouse.store import Warehouse

MANIFESTS = "_compaction"
MOVED = "migrated-parquet"
_PUBLISHED = re.compile(r"^[0-9].*\.parquet$")
_SEED_FOLDER = ("contract=_", "target=_")


@dataclass
class Count:
    old_rows: int = 0
    files: int = 0
    gained: int = 0

    @property
    def equal(self) -> bool:
        return self.old_rows == self.gained


@dataclass
class Migration:
    source: str
    tables: dict[str, Count] = field(default_factory=dict)
    committed: bool = False

    @property
    def equal(self) -> bool:
        return all(c.equal for c in self.tables.values())

    def render(self) -> str:
        lines = [f"{'table':<24} {'files':>7} {'rows before':>12} {'rows after':>11}"]
        for name, c in self.tables.items():
            if c.files or c.gained:
                mark = "" if c.equal else "   <- differs"
                lines.append(f"{name:<24} {c.files:>7} {c.old_rows:>12} {c.gained:>11}{mark}")
        total_old = sum(c.old_rows for c in self.tables.values())
        total_new = sum(c.gained for c in self.tables.values())
        lines.append(f"{'all tables':<24} {'':>7} {total_old:>12} {total_new:>11}")
        return "\n".join(lines)


def left_behind(root: Location) -> bool:
    """Whether a local warehouse folder still holds results of the earlier Parquet layout
    (a table's write file) that were not migrated: the warehouse does not read them."""
    if not isinstance(root, Path):
        return False
    for table in TABLES:
        if (root / table).is_dir():
            written = (root / table).glob("contract=*/target=*/*.parquet")
            if any(_PUBLISHED.match(path.name) for path in written):
                return True
    return False


def _relative(path: str, table_dir: str) -> str:
    return path[len(table_dir) :].lstrip("/")


def counted_files(con: Any, old: Location, table: str) -> list[str]:
    """The files of ``table`` a reader of the old layout counted, in name order."""
    table_dir = f"{str(old).rstrip('/')}/{table}"
    listed = [
        r[0]
        for r in con.execute(
            "SELECT file FROM glob($pattern) ORDER BY file",
            {"pattern": f"{table_dir}/contract=*/target=*/*.parquet"},
        ).fetchall()
    ]
    files = [
        f
        for f in listed
        if _PUBLISHED.match(f.rsplit("/", 1)[-1])
        and tuple(_relative(f, table_dir).split("/")[:2]) != _SEED_FOLDER
    ]
    manifests = [
        r[0]
        for r in con.execute(
            "SELECT file FROM glob($pattern) ORDER BY file",
            {"pattern": f"{table_dir}/{MANIFESTS}/[0-9]*.parquet"},
        ).fetchall()
    ]
    live: set[str] = set()
    hidden: set[str] = set()
    if manifests:  # the newest (name order is activation order) is in effect
        rows = con.execute(
            "SELECT role, file FROM read_parquet($path)", {"path": manifests[-1]}
        ).fetchall()
        live = {f for role, f in rows if role == "live"}
        hidden = {f for role, f in rows if role == "hidden"}
    out = []
    for path in files:
        relative = _relative(path, table_dir)
        compacted = "_~" in relative.rsplit("/", 1)[-1]
        if (compacted and relative in live) or (not compacted and relative not in hidden):
            out.append(path)
    return out


def migrate(old: Location, warehouse: Warehouse, *, move_old: bool = True) -> Migration:
    """Copy the old warehouse at ``old`` into ``warehouse`` (see the module docstring)."""
    result = Migration(str(old))
    plans: dict[str, list[str]] = {}
    with warehouse.direct() as con:
        for table in TABLES:
            files = counted_files(con, old, table)
            count = result.tables[table] = Count(files=len(files))
            plans[table] = files
            if not files:
                continue
            (count.old_rows,) = con.execute(
                "SELECT coalesce(sum(num_rows), 0) FROM parquet_file_metadata($files)",
                {"files": files},
            ).fetchone()
            (before,) = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            present = {
                r[0]
                for r in con.execute(
                    "SELECT name FROM parquet_schema($files)", {"files": files}
                ).fetchall()
            }
            columns = ", ".join(f'"{f.name}"' for f in TABLES[table] if f.name in present)
            con.execute(
                f'INSERT INTO "{table}" BY NAME SELECT {columns} FROM read_parquet($files, '
                "union_by_name = true, hive_partitioning = false)",
                {"files": files},
            )
            (after,) = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            count.gained = after - before
        if not result.equal:
            raise _Unequal(result)
    result.committed = True
    if move_old and isinstance(old, Path):
        _move_aside(old)
    return result


class _Unequal(DecGuardError):
    def __init__(self, result: Migration) -> None:
        super().__init__(
            f"migration of {result.source} rolled back: rows differ\n{result.render()}"
        )
        self.result = result


def _move_aside(old: Path) -> None:
    """The old table folders into ``<old>/migrated-parquet/``, with the old catalog."""
    aside = old / MOVED
    for table in TABLES:
        if (old / table).is_dir():
            aside.mkdir(exist_ok=True)
            (old / table).rename(aside / table)
    for name in ("decguard.duckdb", "catalog.json", ".staging"):
        if (old / name).exists():
            aside.mkdir(exist_ok=True)
            (old / name).rename(aside / name)

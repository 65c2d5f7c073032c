"""The SQL views of the warehouse catalog: per table, ``<table>`` (every counted row once)
and ``latest_<table>`` (per contract and target, the rows of the newest write; of a table a
target's evaluation writes, the newest write of a run that reached its verdict:
warehouse/completion.py), plus ``latest_all_checks``. The same statements serve a local folder
and an object store.

On an object store each view costs requests when it is created (DuckDB lists its globs and
reads a file's schema to bind it), so a connection for one query creates only the views the
query names (``needed``): ``sql`` on an S3 warehouse then costs what its query reads, not
what the whole catalog holds."""

from __future__ import annotations

import re

from decguard_pipeline.warehouse.completion import gated
from decguard_pipeline.warehouse.manifest import (
    COMPACTED,
    COMPACTED_SEED,
    SEED,
    WRITES,
    sql_manifest,
)
from decguard_pipeline.warehouse.schema import TABLES, VERDICTS

ALL_CHECKS = "latest_all_checks"
# every gate of every feature in one place: golden gates plus each feature's ``<feature>_checks``
# table (same columns as gate_results)
CHECK_TABLES = ("gate_results", *(t for t in TABLES if t.endswith("_checks")))


def needed(sql: str | None) -> frozenset[str] | None:
    """The tables whose views ``sql`` names (``latest_all_checks`` brings its tables); None,
    meaning every table, when it names none (``SHOW TABLES``, ``information_schema``...)."""
    if sql is None:
        return None
    names = {t for t in TABLES if re.search(rf"\b(?:latest_)?{t}\b", sql, re.IGNORECASE)}
    if re.search(rf"\b{ALL_CHECKS}\b", sql, re.IGNORECASE):
        names |= set(CHECK_TABLES)
    return frozenset(names) or None


def _options(hive: bool) -> str:
    return (
        "hive_partitioning = true, hive_types = {'contract': 'VARCHAR', 'target': 'VARCHAR'}"
        if hive
        else "hive_partitioning = false"
    )


def statements(
    base_of: dict[str, tuple[str, str]],
    hive: bool,
    loose: frozenset[str],
    only: frozenset[str] | None = None,
) -> list[str]:
    """The catalog file's views of the tables in ``only`` (default every table),
    ``latest_all_checks`` when all its tables are there: each query lists the table's globs
    and reads the manifest in effect at its start in SQL. ``base_of[table]`` is (the table's
    folder, its seed folder) as SQL string contents; ``loose`` names the tables read with
    ``union_by_name``."""
    out = []
    done = _verdict_runs(base_of[VERDICTS][0])
    for table in TABLES:
        if only is None or table in only:
            base, seeds = base_of[table]
            options = f"filename = true, {_options(hive)}"
            options += ", union_by_name = true" if table in loose else ""
            manifest = f"WITH _manifest AS ({sql_manifest(base)}) "
            writes = (
                f"SELECT * EXCLUDE (filename) FROM read_parquet(['{seeds}/{SEED}', "
                f"'{base}/contract=*/target=*/{WRITES}'], {options}) "
                "WHERE filename NOT IN (SELECT path FROM _manifest WHERE role = 'hidden')"
            )
            compacted = (
                f"SELECT * EXCLUDE (filename) FROM read_parquet(['{seeds}/{COMPACTED_SEED}', "
                f"'{base}/contract=*/target=*/{COMPACTED}'], {options}) "
                "WHERE filename IN (SELECT path FROM _manifest WHERE role = 'live')"
            )
            latest = f"{writes} AND {_run_of('filename')} IN ({done})" if gated(table) else None
            out += table_views(table, manifest, writes, compacted, latest)
    return out + _all_checks(only)


# A write's partition folders and run part, from its path: ``contract=…/target=…/<run part>``
# (warehouse/manifest.py: ``<stamp>_<run part>.parquet``). The same for every table's writes.
_RUN_OF_FILE = r"'^.*/([^/]*/[^/]*)/[^/_]*_([^/]*)[.]parquet$', '\1/\2'"


def _run_of(column: str) -> str:
    return f"regexp_replace({column}, {_RUN_OF_FILE})"


def _verdict_runs(base: str) -> str:
    """The runs that wrote a verdict, per partition, from the names of the verdicts writes
    (listed, never opened). Writes a manifest hides count too (their rows are verdicts all the
    same); compacted files are not read: compaction never merges the verdict of a run whose
    write a ``latest_*`` view shows (warehouse/compaction.py)."""
    return f"SELECT {_run_of('file')} FROM glob('{base}/contract=*/target=*/{WRITES}')"


def files_variable(table: str, kind: str) -> str:
    """The connection variable holding the files of ``table`` a pinned view reads (``kind``:
    ``writes``, ``compacted``, or ``completed``: the writes of runs that reached their
    verdict, which ``latest_<table>`` ranks for the tables an evaluation writes)."""
    return f"decguard_{kind}_{table}"


def pinned_statements(tables: list[str], hive: bool, loose: frozenset[str]) -> list[str]:
    """Views over fixed lists of files, in the connection variables ``files_variable`` names
    (set by the caller): every file a query of these views opens is one its manifest counts,
    so no file compaction deletes after the grace period is ever opened, even listed."""
    out = []
    for table in tables:
        options = _options(hive) + (", union_by_name = true" if table in loose else "")
        writes, compacted, completed = (
            f"SELECT * FROM read_parquet(getvariable('{files_variable(table, kind)}'), {options})"
            for kind in ("writes", "compacted", "completed")
        )
        out += table_views(table, "", writes, compacted, completed if gated(table) else None)
    return out + _all_checks(frozenset(tables))


def _all_checks(only: frozenset[str] | None) -> list[str]:
    if only is not None and not set(CHECK_TABLES) <= only:
        return []
    union = " UNION ALL BY NAME ".join(f"SELECT * FROM latest_{t}" for t in CHECK_TABLES)
    return [f"CREATE OR REPLACE VIEW {ALL_CHECKS} AS {union}"]


def table_views(
    table: str, prefix: str, writes: str, compacted: str, latest: str | None = None
) -> list[str]:
    """``<table>``: the writes no compaction replaced plus the live compacted files (see
    warehouse/manifest.py for why a reader never counts a row twice or misses one).
    ``latest_<table>``: per contract and target the rows of the newest write, by
    ``recorded_at`` then ``run_id``, among ``latest`` (the writes of runs that reached their
    verdict, for the tables an evaluation writes), else among all writes; compaction never
    merges a partition's newest write nor the newest of a run that reached its verdict, so
    this view reads the writes alone and its cost stays flat as history grows. ``prefix`` (a
    ``WITH`` clause) comes before both."""
    return [
        f"CREATE OR REPLACE VIEW {table} AS {prefix}{writes} UNION ALL BY NAME {compacted}",
        f"CREATE OR REPLACE VIEW latest_{table} AS {prefix}SELECT * EXCLUDE (_rank) FROM ("
        f"SELECT *, dense_rank() OVER (PARTITION BY contract, target "
        f"ORDER BY recorded_at DESC, run_id DESC) AS _rank FROM ({latest or writes})) "
        "WHERE _rank = 1",
    ]

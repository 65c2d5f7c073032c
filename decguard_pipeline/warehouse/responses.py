"""The ``responses`` table as a response cache's store (``backends/cache.AnswerStore``).

One partition per contract and target (``<backend>@<model version>``), so a lookup reads only
the answers of the model version asked, once per run: every published file's key column and
the few columns a replay needs, indexed in a dict (100,000 answers load in a fraction of a
second), plus the answers the run itself records.

Writing, so that a killed run keeps what it was told:

* Answers are kept in memory as they pass validation and published as one Parquet file at
  least every ``publish_every_s`` seconds (and at the end of every batch) through the
  warehouse's atomic write path (``Warehouse.write``): a reader sees whole files only.
* A network run also appends every answer the moment it arrives to a *journal*,
  ``.journal-<id>.jsonl`` in the partition folder (one line per answer, one ``write`` each,
  so a kill -9 keeps every line written; outside the tables' glob, so no query reads it).
  The journal's writer holds an exclusive ``flock`` on it while alive; at the end of a batch,
  once everything is published, it deletes it.
* A journal whose lock can be taken belongs to a writer that died: the next run (or ``cache
  prune``) publishes the answers in it that no file holds yet, then deletes it. A live
  writer's journal is only read: its answers are reused, not republished.

Duplicates (an answer published and still in a journal, or asked by two parallel runs) are
harmless: a lookup keeps the newest row of a key.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.core.cache.answers import Answers, Hits
from decguard_pipeline.warehouse.locations import Location
from decguard_pipeline.warehouse.rows.cache import (
    LOOKUP_COLUMNS,
    Stored,
    answers_table,
    datetime_us,
    journal_answers,
    storable,
)
from decguard_pipeline.warehouse.storage import storage_of
from decguard_pipeline.warehouse.store import STALE_AFTER_S, Warehouse, now, published_files

try:  # POSIX; elsewhere there is no journal, only the files published every few seconds
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

TABLE = "responses"
PUBLISH_EVERY_S = 2.0
# random digests do not compress: lz4 writes and reads them several times faster than zstd,
# for files about 10% larger; a dictionary is tried only for the columns that repeat, and no
# statistics are written (a lookup reads whole partitions)
COMPRESSION = "lz4"
WRITER = {
    "use_dictionary": [
        "contract", "target", "run_id", "backend", "provider", "keyed_version", "labels",
        "model", "model_version", "metadata_json",
    ],
    "write_statistics": False,
}  # fmt: skip
JOURNAL_GLOB = ".journal-*.jsonl"
NEW_JOURNAL = ".jnew-"  # a journal being created (renamed once locked)


def _read(path: Location) -> pa.Table:
    """The lookup columns of a published file (``ParquetFile``: ``pq.read_table`` would
    import Arrow's dataset module, and pandas with it); an object is read in one GET."""
    source = path if isinstance(path, Path) else pa.BufferReader(storage_of(path).read_bytes(path))
    return pq.ParquetFile(source).read(columns=LOOKUP_COLUMNS, use_threads=False)


def _lock(fd: int, *, wait: bool) -> bool:
    """Take the exclusive lock of a journal; False when a live writer holds it."""
    if fcntl is None:  # pragma: no cover
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def read_journal(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A journal's header and answers; a line cut short by a kill is left out."""
    data = path.read_bytes()
    header: dict[str, Any] = {}
    rows = []
    for number, line in enumerate(data.split(b"\n")):
        if not line:
            continue
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if number == 0 and isinstance(item, dict) and "journal" in item:
            header = item
        elif isinstance(item, dict) and "key" in item:
            rows.append(item)
    return header, rows


@dataclass
class Recovered:
    """Answers of journals: those of dead writers were published (``published`` rows)."""

    tables: list[pa.Table]
    published: int = 0


class ResponseTable:
    """The answers of one contract and target: looked up once per run, appended to as answers
    arrive."""

    def __init__(
        self,
        warehouse: Warehouse,
        *,
        contract: str,
        target: str,
        run_id: str,
        backend: str,
        provider: str,
        version: str,
        max_age_days: float | None = None,
        publish_every_s: float = PUBLISH_EVERY_S,
    ) -> None:
        self.warehouse = warehouse
        self.contract, self.target, self.run_id = contract, target, run_id
        self.backend, self.provider, self.version = backend, provider, version
        self.max_age_days = max_age_days
        self.publish_every_s = publish_every_s
        self.directory = warehouse.partition_dir(TABLE, contract, target)
        # journals are local files under a flock: on an object store there are none, and a
        # killed run keeps the answers published up to ``publish_every_s`` before the kill
        self.journaled = fcntl is not None and isinstance(self.directory, Path)
        self.recovered = 0  # answers of dead runs' journals this store published
        self._stored: Stored | None = None  # the partition's answers, read once
        self._index: dict[bytes, int] | None = None  # key -> row of _stored
        self._recorded_at = now()
        self._pending: list[Answers] = []
        self._last_publish = time.monotonic()
        self._journal: int | None = None  # fd, locked
        self._journal_path: Path | None = None

    # -- reading -------------------------------------------------------------------------

    def _load(self) -> dict[bytes, int]:
        if self._index is not None:
            return self._index
        self._index = {}
        tables = []
        for path in published_files(self.directory):
            try:
                tables.append(_read(path))
            except FileNotFoundError:  # removed by a concurrent prune
                continue
        recovered = self._recover_journals(tables)
        self.recovered = recovered.published
        tables += recovered.tables
        if tables:
            self._stored = Stored(pa.concat_tables(tables))
            keys = self._stored.keys
            if self.max_age_days is None:
                self._index = dict(zip(keys, range(len(keys)), strict=True))
            else:
                cutoff = datetime_us(now() - timedelta(days=self.max_age_days))
                fresh = np.flatnonzero(self._stored.answered_us >= cutoff).tolist()
                self._index = {keys[i]: i for i in fresh}
        return self._index

    def _recover_journals(self, tables: list[pa.Table]) -> Recovered:
        """The answers of the partition's journals; those of dead writers that no file of
        ``tables`` holds are published, and the journal deleted."""
        out = Recovered([])
        if not self.journaled or not self.directory.is_dir():
            return out
        published: set[bytes] | None = None
        for path in sorted(self.directory.glob(JOURNAL_GLOB)):
            if path == self._journal_path:
                continue
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:  # published and deleted meanwhile
                continue
            try:
                dead = _lock(fd, wait=False)
                header, rows = read_journal(path)
                if not rows:
                    if dead:
                        path.unlink(missing_ok=True)
                    continue
                answers = journal_answers(rows)
                run_id = str(header.get("run_id") or "recovered")
                table = self._table(answers, run_id, header)
                out.tables.append(table.select(LOOKUP_COLUMNS))
                if dead:
                    if published is None:
                        published = {k for t in tables for k in t.column("key").to_pylist()}
                    fresh = [i for i, key in enumerate(answers.keys) if key not in published]
                    if fresh:
                        self.warehouse.write_built(
                            TABLE,
                            table.take(pa.array(fresh, type=pa.int64())),
                            contract=self.contract,
                            target=self.target,
                            run_id=run_id,
                            recorded_at=self._recorded_at,
                            compression=COMPRESSION,
                            **WRITER,
                        )
                        out.published += len(fresh)
                    path.unlink(missing_ok=True)
            finally:
                os.close(fd)
        return out

    def _table(
        self,
        answers: Answers,
        run_id: str,
        header: dict[str, Any] | None = None,
        *,
        at: datetime | None = None,
    ) -> pa.Table:
        header = header or {}
        self._recorded_at = at or now()
        table, _ = answers_table(
            answers,
            contract=self.contract,
            target=self.target,
            run_id=run_id,
            recorded_at=self._recorded_at,
            backend=str(header.get("backend") or self.backend),
            provider=str(header.get("provider") or self.provider),
            keyed_version=str(header.get("keyed_version", self.version)),
        )
        return table

    def lookup(self, keys: Sequence[bytes], k: int) -> Hits:
        index = self._load()
        if not index:  # a cold cache: nothing to look for
            return Hits.empty(k)
        get = index.get
        found = np.fromiter((get(key, -1) for key in keys), dtype=np.int64, count=len(keys))
        rows = np.flatnonzero(found >= 0)
        if not len(rows):
            return Hits.empty(k)
        assert self._stored is not None
        return self._stored.hits(found[rows], rows, k)

    # -- writing -------------------------------------------------------------------------

    def keep(self, answers: Answers) -> int:
        """Held until published (a run finds the answers it asked in files of earlier runs,
        not its own: it asks each request once anyway)."""
        n = storable(answers)
        if len(answers):
            self._pending.append(answers)
        if self.due():
            self.publish()
        return n

    def due(self) -> bool:
        return bool(self._pending) and (
            time.monotonic() - self._last_publish >= self.publish_every_s
        )

    def publish(self) -> None:
        """Write the kept answers as one file (atomically)."""
        if self._pending:
            # a table per batch kept, concatenated without copying
            self._recorded_at = now()
            table = pa.concat_tables([self._table(a, self.run_id, at=self._recorded_at)
                                      for a in self._pending])  # fmt: skip
            self.warehouse.write_built(
                TABLE,
                table,
                contract=self.contract,
                target=self.target,
                run_id=self.run_id,
                recorded_at=self._recorded_at,
                compression=COMPRESSION,
                **WRITER,
            )
            self._pending = []
        self._last_publish = time.monotonic()

    def journal(self, row: dict[str, Any]) -> None:
        if not self.journaled:
            return
        try:
            line = orjson.dumps(row) + b"\n"
        except (orjson.JSONEncodeError, TypeError):  # odd metadata: published with the batch
            return
        if self._journal is None:
            self._open_journal()
        assert self._journal is not None
        os.write(self._journal, line)

    def _open_journal(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl"
        fresh = self.directory / f"{NEW_JOURNAL}{name}"
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        _lock(fd, wait=True)
        header = {
            "journal": 1,
            "run_id": self.run_id,
            "backend": self.backend,
            "provider": self.provider,
            "keyed_version": self.version,
        }
        os.write(fd, orjson.dumps(header) + b"\n")
        final = self.directory / f".journal-{name}"
        os.replace(fresh, final)  # only now can a reader find it: it is already locked
        self._journal, self._journal_path = fd, final

    def flush(self) -> None:
        """Publish what is kept; the journal's answers are then all in files: delete it."""
        self.publish()
        if self._journal is not None:
            assert self._journal_path is not None
            self._journal_path.unlink(missing_ok=True)  # before the lock goes: nobody adopts it
            os.close(self._journal)
            self._journal = self._journal_path = None


def _newest_per_key(table: pa.Table) -> pa.Table:
    """One row per key: the last one (files are read oldest first)."""
    keys = table.column("key").to_pylist()
    last = {key: i for i, key in enumerate(keys)}
    if len(last) == len(keys):
        return table
    return table.take(pa.array(sorted(last.values()), type=pa.int64()))


def _sweep_new_journals(folder: Path) -> None:
    """Journals a writer died creating (before it could lock and name them)."""
    cutoff = time.time() - STALE_AFTER_S
    for path in folder.glob(f"{NEW_JOURNAL}*"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except FileNotFoundError:
            pass

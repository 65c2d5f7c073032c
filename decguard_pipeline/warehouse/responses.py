"""The ``responses`` table as a response cache's store (``backends/cache.AnswerStore``).

Per contract and target (``<backend>@<model version>``) a lookup reads the answers of the model
version asked, once per run: the key column and the few columns a replay needs, indexed in a
dict (100,000 answers load in a fraction of a second), plus the answers the run itself records.

Writing, so that a killed run keeps what it was told:

* Answers are kept in memory as they pass validation and committed to the table at least
  every ``publish_every_s`` seconds (and at the end of every batch), each time in one
  transaction of their own (``Warehouse.write``), by a writer thread: a request never waits
  for the storage. A few hundred answers are inlined in the catalog, not a file each.
* A network run on a local warehouse also appends every answer the moment it arrives to a
  *journal*, ``<root>/journals/responses/contract=…/target=…/.journal-<id>.jsonl`` (one line
  per answer, one ``write`` each, so a kill -9 keeps every line written). The journal's
  writer holds an exclusive ``flock`` on it while alive; at the end of a batch, once
  everything is committed, it deletes it.
* A journal whose lock can be taken belongs to a writer that died: the next run (or ``cache
  prune``) commits the answers in it that the table does not hold yet, then deletes it. A live
  writer's journal is only read: its answers are reused, not committed again.

Duplicates (an answer committed and still in a journal, or asked by two parallel runs) are
harmless: a lookup keeps the newest row of a key.

What goes wrong is said, once, and never stops a run (``CacheEvents``):

* a write that fails (a full disk, an unreachable bucket or catalog): the table stops writing
  for the rest of the run, and its journal is left for the next run to commit;
* a table that cannot be read: said, and its answers asked again;
* a journal line that is no answer (only the last line may be cut short by a kill; that one
  is left out silently): skipped, its answer asked again.
"""

from __future__ import annotations

import errno
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import orjson
import pyarrow as pa

from decguard_pipeline.core.cache.answers import Answers, Hits
from decguard_pipeline.warehouse.locations import Location
from decguard_pipeline.warehouse.rows.cache import (
    LOOKUP_COLUMNS,
    LOOKUP_SCHEMA,
    Stored,
    answers_table,
    datetime_us,
    journal_answers,
    journal_row_problem,
    storable,
)
from decguard_pipeline.warehouse.store import Warehouse, now

try:  # POSIX; elsewhere there is no journal, only the commits every few seconds
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

TABLE = "responses"
PUBLISH_EVERY_S = 2.0
# a journal being created that nobody locked for this long was left by a writer that died
STALE_AFTER_S = 3600.0
JOURNAL_GLOB = ".journal-*.jsonl"
NEW_JOURNAL = ".jnew-"  # a journal being created (renamed once locked)


class CacheEvents(Protocol):
    """Who hears what the table could not do (``core.cache.summary.CacheStats``)."""

    def warn(self, message: str) -> None: ...

    def not_stored(self, lost: int, message: str) -> None:
        """A write failed: ``lost`` answers kept for publication are not stored."""
        ...


class Unheard:
    """Events nobody listens to."""

    def warn(self, message: str) -> None:
        pass

    def not_stored(self, lost: int, message: str) -> None:
        pass


def _reason(exc: BaseException) -> str:
    """An error in a few words (the OS's own for an OSError)."""
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno)
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def stored_answers(
    warehouse: Warehouse, contract: str, target: str, events: CacheEvents
) -> pa.Table | None:
    """The lookup columns of a partition's answers, oldest first; None when the table
    cannot be read now (said: its answers are asked again)."""
    import duckdb

    if warehouse.place.kind == "sqlite" and not warehouse.exists():
        return LOOKUP_SCHEMA.empty_table()  # a new cache: reading creates no catalog
    try:
        found = warehouse.query(
            f"SELECT {', '.join(LOOKUP_COLUMNS)} FROM {TABLE} "
            "WHERE contract = $c AND target = $t ORDER BY rowid",
            {"c": contract, "t": target},
        )
    except (duckdb.Error, OSError) as exc:
        events.warn(
            f"the response cache's answers of {contract}/{target} in {warehouse.root} cannot "
            f"be read ({_reason(exc)}): its answers are asked again"
        )
        return None
    return pa.Table.from_arrays(
        [found.column(f.name).cast(f.type) for f in LOOKUP_SCHEMA], schema=LOOKUP_SCHEMA
    )


def _lock(fd: int, *, wait: bool) -> bool:
    """Take the exclusive lock of a journal; False when a live writer holds it."""
    if fcntl is None:  # pragma: no cover
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


@dataclass
class Journal:
    """What a journal holds: its header, its answers, and its lines that are none (line
    number, from 1, and why)."""

    header: dict[str, Any]
    rows: list[dict[str, Any]]
    bad: list[tuple[int, str]] = field(default_factory=list)

    def describe_bad(self, path: Path) -> str:
        first, why = self.bad[0]
        more = f" and {len(self.bad) - 1} more line(s)" if len(self.bad) > 1 else ""
        return (
            f"the response cache's journal {path} line {first} is not an answer ({why})"
            f"{more}: skipped; its answer is asked again"
        )


def read_journal(path: Path) -> Journal:
    """A journal's header, answers and damaged lines. The text after the last newline is a
    line a kill cut short: left out, and not damage."""
    lines = path.read_bytes().split(b"\n")
    lines.pop()  # b"" after a whole last line; else the line cut short
    out = Journal({}, [])
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            out.bad.append((number, "not JSON"))
            continue
        if number == 1 and isinstance(item, dict) and "journal" in item:
            out.header = item
            continue
        problem = journal_row_problem(item)
        if problem is None:
            out.rows.append(item)
        else:
            out.bad.append((number, problem))
    return out


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written: a write cut short by a full disk or a size
    limit is followed by one that raises the reason."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover (a regular file never returns 0 for >0 bytes)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


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
        events: CacheEvents | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.warehouse = warehouse
        self.contract, self.target, self.run_id = contract, target, run_id
        self.backend, self.provider, self.version = backend, provider, version
        self.max_age_days = max_age_days
        self.publish_every_s = publish_every_s
        self.events: CacheEvents = events or Unheard()
        self.clock = clock
        # journals are local files under a flock: on an object store there are none, and a
        # killed run keeps the answers committed up to ``publish_every_s`` before the kill
        self.directory = warehouse.journal_dir(TABLE, contract, target)
        self.journaled = fcntl is not None and self.directory is not None
        self.recovered = 0  # answers of dead runs' journals this store published
        self.broken = False  # a write failed: nothing more is written by this run
        self._why = ""  # what failed, said once
        self._said = False
        self._lost = 0  # answers counted as stored that a failed write did not store
        self._lock = threading.Lock()  # what the run's thread and the writer thread share
        self._writer: ThreadPoolExecutor | None = None
        self._writes: list[Future[None]] = []
        self._stored: Stored | None = None  # the partition's answers, read once
        self._index: dict[bytes, int] | None = None  # key -> row of _stored
        self._pending: list[Answers] = []
        self._pending_n = 0  # storable answers in _pending
        self._last_publish = clock()
        self._journal: int | None = None  # fd, locked
        self._journal_path: Path | None = None

    # -- reading -------------------------------------------------------------------------

    def _load(self) -> dict[bytes, int]:
        if self._index is not None:
            return self._index
        self._index = {}
        tables = []
        table = stored_answers(self.warehouse, self.contract, self.target, self.events)
        if table is not None and table.num_rows:
            tables.append(table)
        recovered = self._recover_journals(tables)
        self._settle()  # a journal that could not be published: said
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
        if self.directory is None or not self.journaled or not self.directory.is_dir():
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
                journal = read_journal(path)
                if journal.bad:
                    self.events.warn(journal.describe_bad(path))
                run_id = str(journal.header.get("run_id") or "recovered")
                at = now()
                fresh_tables = []
                for answers in _by_label_count(journal.rows):
                    table = self._table(answers, run_id, journal.header, at=at)
                    out.tables.append(table.select(LOOKUP_COLUMNS))
                    fresh_tables.append((answers, table))
                if not dead:
                    continue
                if published is None:
                    published = {k for t in tables for k in t.column("key").to_pylist()}
                for answers, table in fresh_tables:
                    fresh = [i for i, key in enumerate(answers.keys) if key not in published]
                    if fresh and not self._write(
                        table.take(pa.array(fresh, type=pa.int64())), run_id, at
                    ):
                        break  # cannot write: the journal stays for a run that can
                    out.published += len(fresh)
                else:
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
        table, _ = answers_table(
            answers,
            contract=self.contract,
            target=self.target,
            run_id=run_id,
            recorded_at=at or now(),
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
        self._settle()
        n = storable(answers)
        with self._lock:
            if self.broken:
                return 0
            if len(answers):
                self._pending.append(answers)
                self._pending_n += n
        if self.due():
            self.publish()
        return n

    def due_in(self) -> float:
        return self.publish_every_s - (self.clock() - self._last_publish)

    def due(self) -> bool:
        self._settle()
        return not self.broken and self.due_in() <= 0

    def publish(self) -> None:
        """Hand the kept answers to the writer thread, which writes them as one file
        (atomically): the run's requests never wait for the storage (an object store's PUT
        would count in their latencies). The interval starts again."""
        self._settle()
        with self._lock:
            self._last_publish = self.clock()
            if not self._pending or self.broken:
                return
            batch, lost = self._pending, self._pending_n
            self._pending, self._pending_n = [], 0
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="response-cache")
        self._writes.append(self._writer.submit(self._write_batch, batch, lost))

    def _write_batch(self, batch: list[Answers], lost: int) -> None:
        """(The writer thread.) One file of the batches kept, each a table, concatenated
        without copying."""
        at = now()
        table = pa.concat_tables([self._table(a, self.run_id, at=at) for a in batch])
        self._write(table, self.run_id, at, lost=lost)

    def _write(self, table: pa.Table, run_id: str, at: datetime, *, lost: int = 0) -> bool:
        """Commit ``table``; False when the storage refuses (``lost``: the answers counted
        as stored that it holds)."""
        import duckdb

        if self.broken:
            self._failed(None, None, lost)
            return False
        try:
            self.warehouse.write_built(
                TABLE, table, contract=self.contract, target=self.target, run_id=run_id,
                recorded_at=at,
            )  # fmt: skip
        except OSError as exc:
            self._failed(exc.filename or self.warehouse.root, exc, lost)
            return False
        except duckdb.Error as exc:
            self._failed(self.warehouse.root, exc, lost)
            return False
        return True

    def journal(self, row: dict[str, Any]) -> None:
        self._settle()
        if not self.journaled or self.broken:
            return
        try:
            line = orjson.dumps(row) + b"\n"
        except (orjson.JSONEncodeError, TypeError):  # odd metadata: published with the batch
            return
        try:
            if self._journal is None:
                self._open_journal()
            assert self._journal is not None
            _write_all(self._journal, line)
        except OSError as exc:
            self._failed(self._journal_path or exc.filename or self.directory, exc)
            self._settle()

    def _open_journal(self) -> None:
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl"
        fresh = self.directory / f"{NEW_JOURNAL}{name}"
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        try:
            _lock(fd, wait=True)
            header = {
                "journal": 1,
                "run_id": self.run_id,
                "backend": self.backend,
                "provider": self.provider,
                "keyed_version": self.version,
            }
            _write_all(fd, orjson.dumps(header) + b"\n")
            final = self.directory / f".journal-{name}"
            os.replace(fresh, final)  # only now can a reader find it: it is already locked
        except OSError as exc:
            os.close(fd)
            fresh.unlink(missing_ok=True)
            exc.filename = exc.filename or str(fresh)
            raise
        self._journal, self._journal_path = fd, final

    def _failed(self, where: Location | str | None, exc: Exception | None, lost: int = 0) -> None:
        """A write failed (any thread): nothing more is written in this run; the answers
        kept and not written are counted, and it is said once (:meth:`_settle`)."""
        with self._lock:
            lost += self._pending_n
            self._pending, self._pending_n = [], 0
            if exc is not None and not self.broken:
                self._why = (
                    f"the response cache cannot write {where}: {_reason(exc)}; this run goes "
                    "on without storing its answers"
                )
            self.broken = True
            self._lost += lost

    def _settle(self) -> None:
        """(The run's thread.) Say what failed, once, and close the journal as it is: its
        whole lines are answers the next run that can write publishes."""
        if not self.broken:
            return
        with self._lock:
            lost, self._lost = self._lost, 0
        if self._journal is not None:
            os.close(self._journal)  # the lock goes with it: the journal is a dead run's now
            self._journal = None
        if lost or not self._said:
            self.events.not_stored(lost, self._why)
            self._said = True

    def written(self) -> None:
        """Wait until what was published so far is written (or failed, then said)."""
        writes, self._writes = self._writes, []
        for write in writes:
            write.result()  # failures were handled; anything else is a bug: raised here
        self._settle()

    def flush(self) -> None:
        """Publish what is kept and wait until it is written; the journal's answers are then
        all in files: delete it."""
        self.publish()
        self.written()
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None
        if self._journal is not None and not self.broken:
            assert self._journal_path is not None
            self._journal_path.unlink(missing_ok=True)  # before the lock goes: nobody adopts it
            os.close(self._journal)
            self._journal = self._journal_path = None


def _by_label_count(rows: list[dict[str, Any]]) -> list[Answers]:
    """A journal's answers, one group per number of labels (one in practice)."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(len(row["labels"]), []).append(row)
    return [journal_answers(group) for group in groups.values()]


def _sweep_new_journals(folder: Path) -> None:
    """Journals a writer died creating (before it could lock and name them)."""
    cutoff = time.time() - STALE_AFTER_S
    for path in folder.glob(f"{NEW_JOURNAL}*"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except FileNotFoundError:
            pass

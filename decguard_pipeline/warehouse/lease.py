"""One compaction per warehouse at a time.

* **Local disk**: ``flock`` on ``<root>/.compaction.lock``, which the kernel releases when its
  holder exits, however it exits (kill -9 included).
* **Object store**: a **lease**, the object ``<root>/_leases/compaction/<generation>.json``
  (outside every table's folder, so no view lists it). A compaction takes generation
  *n + 1* when the newest, *n*, is released or has lapsed, by creating it only if absent
  (``If-None-Match: *`` on S3, ``ifGenerationMatch=0`` on GCS): of two compactions racing
  for it, one creates it and the other is told the warehouse is busy. The holder renews its
  lease every ``TTL / 6`` and, before each step that changes the warehouse (a compacted file,
  a manifest, a deletion), checks that it still holds it with at least half its time left
  and that nobody took a newer generation; otherwise it stops. A holder killed by kill -9
  blocks the next compaction until its lease lapses (``$DECGUARD_COMPACTION_LEASE_S``,
  default 120 s). A store that ignores conditional creates is detected (a probe object is
  created twice) and refused, unless ``DECGUARD_SINGLE_COMPACTOR=1`` says the deployment
  runs one compactor only (e.g. only the nightly Dagster job) and no lease is needed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.warehouse.locations import Location, ObjectPath, StorageError
from decguard_pipeline.warehouse.manifest import now_us
from decguard_pipeline.warehouse.storage import ObjectStorage, storage_of

LOCK = ".compaction.lock"
LEASES = "_leases/compaction"
LEASE_ENV = "DECGUARD_COMPACTION_LEASE_S"
SINGLE_ENV = "DECGUARD_SINGLE_COMPACTOR"
DEFAULT_LEASE_S = 120.0


class CompactionBusy(DecGuardError):
    """Another compaction holds the warehouse's lock or lease."""


class LeaseLost(DecGuardError):
    """This compaction no longer safely holds the warehouse's lease."""


class Lease:
    """What a compaction holds. ``check`` raises ``LeaseLost`` when it may not go on (a
    ``flock`` is never lost while its holder lives)."""

    def check(self) -> None:
        pass


def lease_seconds() -> float:
    value = os.environ.get(LEASE_ENV, "")
    try:
        seconds = float(value) if value else DEFAULT_LEASE_S
    except ValueError:
        raise DecGuardError(f"{LEASE_ENV}={value!r} is not a number of seconds") from None
    if seconds <= 0:
        raise DecGuardError(f"{LEASE_ENV} must be positive")
    return seconds


@contextlib.contextmanager
def held(root: Location) -> Iterator[Lease]:
    """Hold the compaction lock (local) or lease (object store) of the warehouse at
    ``root``; ``CompactionBusy`` when another compaction holds it."""
    if isinstance(root, Path):
        with _flocked(root):
            yield Lease()
        return
    if os.environ.get(SINGLE_ENV, "") not in ("", "0"):
        yield Lease()
        return
    storage = storage_of(root)
    assert isinstance(storage, ObjectStorage)
    lease = ObjectLease(root, storage, lease_seconds())
    lease.acquire()
    try:
        yield lease
    finally:
        lease.release()


@contextlib.contextmanager
def _flocked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise CompactionBusy(
                f"another compaction of {root} is running (pid {holder}); "
                "try again when it has finished"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


_CONDITIONAL_OK: set[str] = set()


class ObjectLease(Lease):
    def __init__(self, root: ObjectPath, storage: ObjectStorage, seconds: float) -> None:
        self.root = root
        self.storage = storage
        self.ttl_us = int(seconds * 1e6)
        self.folder = root / LEASES
        self.token = uuid.uuid4().hex
        self.holder = f"{socket.gethostname()} pid {os.getpid()}"
        self.path: ObjectPath | None = None
        self.expires_us = 0
        self.lost: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _document(self, expires_us: int, *, released: bool = False) -> bytes:
        return json.dumps(
            {
                "holder": self.holder,
                "token": self.token,
                "expires_us": expires_us,
                "released": released,
            }
        ).encode()

    def _generations(self) -> list[Location]:
        return self.storage.files(self.folder, "[0-9]*.json")

    def acquire(self) -> None:
        self._probe()
        listed = self._generations()
        generation = 0
        if listed:
            newest = listed[-1]
            generation = int(newest.name.split(".")[0])
            try:
                held_by = json.loads(self.storage.read_bytes(newest))
            except FileNotFoundError:
                held_by = {"released": True}
            if not held_by.get("released") and held_by.get("expires_us", 0) > now_us():
                until = datetime.fromtimestamp(held_by["expires_us"] / 1e6, UTC)
                raise CompactionBusy(
                    f"another compaction of {self.root} holds its lease "
                    f"({held_by.get('holder', 'unknown')}) until {until:%Y-%m-%d %H:%M:%S} UTC; "
                    "try again when it has finished (a compaction that died lets its lease "
                    "lapse then)"
                )
        path = self.folder / f"{generation + 1:012d}.json"
        expires = now_us() + self.ttl_us
        if not self.storage.create(path, self._document(expires)):
            raise CompactionBusy(
                f"another compaction of {self.root} took its lease just now; try again when "
                "it has finished"
            )
        self.path, self.expires_us = path, expires
        for older in listed:  # only the newest generation matters from now on
            self.storage.delete(older)
        self._renewer = threading.Thread(target=self._renew, name="compaction-lease", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        assert self.path is not None
        while not self._stop.wait(self.ttl_us / 6e6):
            expires = now_us() + self.ttl_us
            try:
                self.storage.write_bytes(self.path, self._document(expires))
            except Exception as exc:  # the holder stops at its next check
                self.lost = f"renewing the lease failed: {exc}"
                return
            self.expires_us = expires

    def check(self) -> None:
        if self.lost is not None:
            raise LeaseLost(f"compaction of {self.root} stopped: {self.lost}")
        if now_us() > self.expires_us - self.ttl_us // 2:
            raise LeaseLost(f"compaction of {self.root} stopped: its lease was not renewed in time")
        newest = self._generations()
        if not newest or newest[-1] != self.path:
            raise LeaseLost(f"compaction of {self.root} stopped: another compaction took the lease")

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.path is not None and self.lost is None:
            with contextlib.suppress(Exception):  # else it lapses by itself
                newest = self._generations()
                if newest and newest[-1] == self.path:
                    self.storage.write_bytes(self.path, self._document(0, released=True))

    def _probe(self) -> None:
        """Refuse a store that ignores conditional creates (two holders could both win)."""
        where = f"{self.root.scheme}://{self.root.parts[0]}"  # per bucket
        if where in _CONDITIONAL_OK:
            return
        probe = self.folder / f"probe-{uuid.uuid4().hex}"
        try:
            first = self.storage.create(probe, b"1")
            second = self.storage.create(probe, b"2")
        finally:
            self.storage.delete(probe)
        if not first or second:
            raise StorageError(
                f"{self.root}: this object store does not honour conditional creates "
                "(If-None-Match), so two compactions could both take the lease. Run one "
                f"compactor only (e.g. the nightly Dagster job) and set {SINGLE_ENV}=1"
            )
        _CONDITIONAL_OK.add(where)

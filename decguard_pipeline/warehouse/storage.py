"""Where a warehouse's files live: a folder on the local disk, or a prefix of an object store.

The store, the manifests and compaction reach their files only through this module, so a
table is laid out, published and read the same way on both (docs/warehouse.md):

* a **location** (warehouse/locations.py) is a ``pathlib.Path`` on the local disk, or an
  ``ObjectPath`` (``s3://bucket/prefix/...``, ``gs://bucket/prefix/...``);
* ``storage_of(location)`` is the storage holding it, with the operations the warehouse
  needs: list a folder, read a file, **publish** a file whole (local: written in a staging
  folder, flushed, renamed; object store: assembled in a local file, then one PUT, or a
  multipart upload that the store makes visible only once complete), delete one, create one
  only if it does not exist (the compaction lease), and let DuckDB read the files.

Object stores go through fsspec (s3fs, gcsfs): DuckDB reads an fsspec filesystem registered
on a connection with the same globs, hive partitioning and ``filename`` column as local
files, and pyarrow reads from it, so the views are the same SQL on every storage. Endpoint and
credentials come from the environment the standard way (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, a
profile or an instance role; ``GOOGLE_APPLICATION_CREDENTIALS`` for ``gs://``) and are held
by the client only: never by a location, a file the warehouse writes, or a log line.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import functools
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.warehouse.locations import (
    SCHEMES,
    Location,
    ObjectPath,
    StorageError,
)

if TYPE_CHECKING:  # imported by the reader that needs it (store.py says why)
    import duckdb

# An upload above twice this size goes in parts (a multipart upload, which the store shows
# only once complete); below, one PUT. S3's smallest part is 5 MiB.
PART_SIZE = 50 * 2**20
# A temporary file untouched for this long belongs to a writer that died (a live writer
# keeps writing to it, and publishes it within moments of the last byte).
STALE_AFTER_S = 3600.0
PARQUET_MAGIC = b"PAR1"  # the first and last four bytes of every Parquet file


def storage_of(where: Location) -> Storage:
    """The storage holding ``where`` (one client per object-store scheme and process)."""
    if isinstance(where, ObjectPath):
        return _object_storage(where.scheme, os.getpid())  # a forked child makes its own
    return LOCAL


def staging_root() -> Path:
    """Where this machine assembles files before publishing them to an object store."""
    return Path(tempfile.gettempdir()) / "decguard-staging"


def sweep_stale(paths: list[Path]) -> None:
    """Delete those of ``paths`` untouched for ``STALE_AFTER_S`` (left by dead writers)."""
    cutoff = time.time() - STALE_AFTER_S
    for path in paths:
        try:
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
        except FileNotFoundError:  # another process swept it first
            pass


def _matches(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


def _names(folder: Path, pattern: str, kind: Callable[[os.DirEntry[str]], bool]) -> list[str]:
    """Sorted names of the entries of ``folder`` matching ``pattern`` and of ``kind`` (none
    when it is missing or not a folder). The directory entry tells a file from a folder
    without a stat each: a partition folder lists every write since its last compaction,
    and the pipeline lists them before every read."""
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if _matches(e.name, pattern) and kind(e))
    except (FileNotFoundError, NotADirectoryError):
        return []


class Storage:
    """The operations the warehouse makes on its files (the local disk's, by default)."""

    remote = False

    # -- reading ---------------------------------------------------------------------

    def exists(self, where: Location) -> bool:
        assert isinstance(where, Path)
        return where.exists()

    def is_folder(self, where: Location) -> bool:
        assert isinstance(where, Path)
        return where.is_dir()

    def files(self, folder: Location, pattern: str = "*") -> list[Location]:
        """The files directly in ``folder`` whose name matches ``pattern``, in name order."""
        assert isinstance(folder, Path)
        return [folder / name for name in _names(folder, pattern, os.DirEntry.is_file)]

    def folders(self, folder: Location, pattern: str = "*") -> list[Location]:
        """The folders directly in ``folder`` whose name matches ``pattern``, in name order."""
        assert isinstance(folder, Path)
        return [folder / name for name in _names(folder, pattern, os.DirEntry.is_dir)]

    def read_bytes(self, where: Location) -> bytes:
        assert isinstance(where, Path)
        return where.read_bytes()

    def size(self, where: Location) -> int:
        assert isinstance(where, Path)
        return where.stat().st_size

    def read_table(self, where: Location, **options: Any) -> pa.Table:
        return pq.read_table(where, **options)

    def local_copy(self, where: Location) -> Path:
        """A local file with the bytes of ``where`` (a local file is its own copy), for
        readers that stream a large file from disk."""
        assert isinstance(where, Path)
        return where

    def read_schema(self, where: Location) -> pa.Schema:
        return pq.read_schema(where)

    # -- writing ---------------------------------------------------------------------

    def make_folder(self, where: Location) -> None:
        assert isinstance(where, Path)
        where.mkdir(parents=True, exist_ok=True)

    def publish(
        self,
        final: Location,
        write: Callable[[str], None],
        *,
        staging: Path,
        before: Callable[[], None] | None = None,
    ) -> None:
        """Run ``write`` on a new file in ``staging`` and publish it as ``final`` (``staged``)."""
        with self.staged(final, staging=staging, before=before) as tmp:
            write(tmp)

    @contextlib.contextmanager
    def staged(
        self, final: Location, *, staging: Path, before: Callable[[], None] | None = None
    ) -> Iterator[str]:
        """A new file in ``staging`` (a folder outside every table's glob, on the same
        filesystem), flushed to disk and renamed to ``final`` when the block ends without
        error: readers see the whole file or none, and a killed writer leaves only a staging
        file, swept later. ``before`` runs last before the rename (and may refuse it by
        raising). Deleted when the block fails."""
        assert isinstance(final, Path)
        staging.mkdir(parents=True, exist_ok=True)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = staging / f"{os.getpid()}-{uuid.uuid4().hex}{final.suffix}.tmp"
        try:
            yield str(tmp)
            _flush(tmp)
            if before is not None:
                before()
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def put_reproducible(self, files: dict[Location, bytes], *, staging: Path) -> None:
        """Publish files whose bytes can be made again (the seed files): each written in
        ``staging`` and renamed into place, so no reader sees one half-written and a killed
        writer leaves only a staging file; but not fsynced, since a file torn by a power cut
        is found by ``whole_parquet`` and made again. One fsync per file cost more than
        everything else a fresh warehouse does (~130 files)."""
        staging.mkdir(parents=True, exist_ok=True)
        for final, data in files.items():
            assert isinstance(final, Path)
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = staging / f"{os.getpid()}-{uuid.uuid4().hex}{final.suffix}.tmp"
            try:
                tmp.write_bytes(data)
                os.replace(tmp, final)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise

    def whole_parquet(self, where: Location) -> bool:
        """Whether ``where`` is a whole Parquet file by its framing (the magic bytes at both
        ends, a footer that fits): False when missing, empty or cut short."""
        assert isinstance(where, Path)
        try:
            fd = os.open(where, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            size = os.fstat(fd).st_size
            if size < 12 or os.pread(fd, 4, 0) != PARQUET_MAGIC:
                return False
            tail = os.pread(fd, 8, size - 8)
        finally:
            os.close(fd)
        footer = int.from_bytes(tail[:4], "little")
        return tail[4:] == PARQUET_MAGIC and 0 < footer <= size - 12

    def move(self, where: Location, to: Location) -> None:
        """Rename a file within its folder (FileNotFoundError when it is gone)."""
        assert isinstance(where, Path) and isinstance(to, Path)
        os.replace(where, to)

    def delete(self, where: Location) -> bool:
        """Delete a file; False when it was already gone."""
        assert isinstance(where, Path)
        try:
            where.unlink()
        except FileNotFoundError:
            return False
        return True

    # -- DuckDB ----------------------------------------------------------------------

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        """Let ``con`` read this storage's files (local files need nothing)."""


LOCAL = Storage()


class ObjectStorage(Storage):
    """An object store through its fsspec filesystem. Listings are never cached: every
    reader lists what is published now, as on a local disk."""

    remote = True

    def __init__(self, scheme: str, fs: Any) -> None:
        self.scheme = scheme
        self.fs = fs

    def exists(self, where: Location) -> bool:
        return bool(self.fs.exists(_key(where)))

    def is_folder(self, where: Location) -> bool:
        return bool(self._ls(where))

    def _ls(self, folder: Location) -> list[dict[str, Any]]:
        try:
            return list(self.fs.ls(_key(folder), detail=True))
        except FileNotFoundError:
            return []

    def files(self, folder: Location, pattern: str = "*") -> list[Location]:
        assert isinstance(folder, ObjectPath)
        names = (e["name"].rsplit("/", 1)[-1] for e in self._ls(folder) if e["type"] == "file")
        return sorted(folder / n for n in names if _matches(n, pattern))

    def folders(self, folder: Location, pattern: str = "*") -> list[Location]:
        assert isinstance(folder, ObjectPath)
        names = {
            e["name"].rstrip("/").rsplit("/", 1)[-1]
            for e in self._ls(folder)
            if e["type"] == "directory"
        }
        return sorted(folder / n for n in names if _matches(n, pattern))

    def read_bytes(self, where: Location) -> bytes:
        return bytes(self.fs.cat_file(_key(where)))

    def size(self, where: Location) -> int:
        return int(self.fs.size(_key(where)))

    def read_table(self, where: Location, **options: Any) -> pa.Table:
        # warehouse files are small and immutable: one GET, then read in memory
        return pq.read_table(pa.BufferReader(self.read_bytes(where)), **options)

    def local_copy(self, where: Location) -> Path:
        """Downloaded once per process into a folder of its own, deleted when it exits
        (warehouse files are immutable, so a copy never goes stale)."""
        key = _key(where)
        copy = _copies_folder() / f"{uuid.uuid5(uuid.NAMESPACE_URL, key).hex}{where.suffix}"
        if not copy.exists():
            partial = copy.with_name(f"{copy.name}.{uuid.uuid4().hex}.part")
            try:
                self.fs.get_file(key, str(partial))
                os.replace(partial, copy)
            finally:
                partial.unlink(missing_ok=True)
        return copy

    def read_schema(self, where: Location) -> pa.Schema:
        # one GET of the whole (small) file: s3fs's file objects read ranges whose unread
        # bodies keep pool connections busy until the pool is exhausted
        return pq.read_schema(pa.BufferReader(self.read_bytes(where)))

    def make_folder(self, where: Location) -> None:
        """Object stores have no folders: a key's prefixes exist while objects do."""

    @contextlib.contextmanager
    def staged(
        self, final: Location, *, staging: Path, before: Callable[[], None] | None = None
    ) -> Iterator[str]:
        """A local file in ``staging``, uploaded to ``final`` when the block ends without
        error, in one PUT (a multipart upload above ``2 * PART_SIZE``, which the store makes
        visible only when complete): readers list the whole object or none, and a writer
        killed during the upload leaves no object (an incomplete multipart upload is never
        listed; a bucket lifecycle rule aborts it, docs/deploy.md)."""
        staging.mkdir(parents=True, exist_ok=True)
        tmp = staging / f"{os.getpid()}-{uuid.uuid4().hex}{final.suffix}.tmp"
        try:
            yield str(tmp)
            if before is not None:
                before()
            self.upload(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)

    def put_reproducible(self, files: dict[Location, bytes], *, staging: Path) -> None:
        """One PUT per file (a PUT is whole or absent: nothing torn to find later)."""
        for final, data in files.items():
            self.write_bytes(final, data)

    def whole_parquet(self, where: Location) -> bool:
        return self.exists(where)

    def upload(self, local: Path, final: Location) -> None:
        """Copy a complete local file to ``final``: one PUT, or a multipart upload above
        ``2 * PART_SIZE`` (visible only once complete)."""
        self.fs.put_file(str(local), _key(final), chunksize=PART_SIZE)

    def create(self, where: Location, data: bytes) -> bool:
        """Create ``where`` with ``data`` only if no object has that key (``If-None-Match: *``
        on S3, ``ifGenerationMatch=0`` on GCS); False when one exists."""
        try:
            self.fs.pipe_file(_key(where), data, mode="create")
        except FileExistsError:
            return False
        return True

    def write_bytes(self, where: Location, data: bytes) -> None:
        """Replace an object (one PUT: readers get the old bytes or the new)."""
        self.fs.pipe_file(_key(where), data)

    def move(self, where: Location, to: Location) -> None:
        """A copy under the new key, then the old one deleted (object stores rename nothing)."""
        self.fs.copy(_key(where), _key(to))
        self.fs.rm_file(_key(where))

    def delete(self, where: Location) -> bool:
        key = _key(where)
        if not self.fs.exists(key):  # S3 reports success for a missing key too
            return False
        try:
            self.fs.rm_file(key)
        except FileNotFoundError:
            return False
        return True

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        con.register_filesystem(self.fs)


@functools.cache
def _copies_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"decguard-copies-{os.getpid()}-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _key(where: Location) -> str:
    assert isinstance(where, ObjectPath), where
    return where.key


@functools.cache
def _object_storage(scheme: str, pid: int) -> ObjectStorage:
    package, extra = SCHEMES[scheme]
    try:
        module = __import__(package)
    except ImportError:
        raise StorageError(
            f"a {scheme}:// warehouse needs the {package} package: "
            f"pip install 'decguard-pipeline[{extra}]'"
        ) from None
    if scheme == "s3":
        # endpoint, region and credentials: botocore's standard chain (AWS_ENDPOINT_URL, ...);
        # botocore reads the region from AWS_DEFAULT_REGION only; the AWS CLI and the other
        # SDKs read AWS_REGION first, and so do we
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        fs = module.S3FileSystem(
            use_listings_cache=False,
            skip_instance_cache=True,
            client_kwargs={"region_name": region} if region else {},
        )
    else:
        fs = module.GCSFileSystem(use_listings_cache=False, skip_instance_cache=True)
    return ObjectStorage(scheme, fs)


def _flush(path: Path) -> None:
    """Force the file's bytes to disk, so that after a power cut the renamed file is whole."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

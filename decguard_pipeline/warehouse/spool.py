"""Files beside the tables (report files, their sidecars, pictures) on an object-storage
warehouse.

The steps write those files with ordinary file functions into the folder
``Warehouse.partition_dir`` gives them (``report_files/contract=…/target=…``). On an object
store that folder is on this machine, in a **spool** that mirrors the warehouse layout (one
per process and warehouse). ``Warehouse.write`` publishes every spool file that is new or
changed to its key (one PUT each, so each object appears whole) before it publishes the
rows, and writes the files' warehouse locations (``s3://…``) into the rows in place of their
spool paths: a row never names a file that is not there, nor a path on some machine. Spool
files stay a while after their upload (the step that wrote them may still read them, e.g. the
pictures shown in Dagster), and go with the process.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from decguard_pipeline.core import processes
from decguard_pipeline.warehouse.locations import ObjectPath
from decguard_pipeline.warehouse.storage import STALE_AFTER_S, ObjectStorage, storage_of

# An uploaded spool file is deleted this long after its upload (the step is done by then).
KEEP_S = 600.0
_SPOOLS: dict[tuple[int, str], Spool] = {}


def spool_for(root: ObjectPath) -> Spool:
    """This process's spool of the warehouse at ``root``."""
    key = (os.getpid(), str(root))
    if key not in _SPOOLS:
        _SPOOLS[key] = Spool(root)
    return _SPOOLS[key]


def spools_root() -> Path:
    return Path(tempfile.gettempdir()) / "decguard-spool"


class Spool:
    def __init__(self, root: ObjectPath) -> None:
        self.root = root
        spools_root().mkdir(parents=True, exist_ok=True)
        _sweep_dead(spools_root())
        self.folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=spools_root()))
        atexit.register(shutil.rmtree, self.folder, True)
        self.prefix = str(self.folder) + os.sep
        # spool file -> (size, mtime_ns) when uploaded, and when
        self.uploaded: dict[Path, tuple[tuple[int, int], float]] = {}

    def path(self, where: ObjectPath) -> Path:
        """The spool folder or file standing for ``where`` (under the warehouse root)."""
        relative = where.key.removeprefix(self.root.key).strip("/")
        return self.folder.joinpath(*relative.split("/"))

    def location(self, path: str | Path) -> str:
        """The warehouse location of a spool path (other paths are returned as they are)."""
        text = str(path)
        if not text.startswith(self.prefix):
            return text
        return f"{self.root}/{text[len(self.prefix) :].replace(os.sep, '/')}"

    def publish(self) -> int:
        """Upload every spool file that is new or changed since its upload; returns how
        many. Forgets (deletes) files uploaded more than ``KEEP_S`` ago."""
        storage = storage_of(self.root)
        assert isinstance(storage, ObjectStorage)
        now = time.time()
        count = 0
        for path in sorted(p for p in self.folder.rglob("*") if p.is_file()):
            stat = path.stat()
            version = (stat.st_size, stat.st_mtime_ns)
            done = self.uploaded.get(path)
            if done is not None and done[0] == version:
                if now - done[1] > KEEP_S:
                    path.unlink(missing_ok=True)
                    del self.uploaded[path]
                continue
            storage.upload(path, self.root / path.relative_to(self.folder).as_posix())
            self.uploaded[path] = (version, now)
            count += 1
        return count

    def translate(self, data: pa.Table) -> pa.Table:
        """``data`` with every string cell that is a spool path replaced by the file's
        warehouse location."""
        import pyarrow.compute as pc  # imports pandas: only where a row may name a file

        for index, field in enumerate(data.schema):
            if not pa.types.is_string(field.type):
                continue
            column = data.column(index)
            if not pc.any(pc.starts_with(column, self.prefix)).as_py():
                continue
            values = [None if v is None else self.location(v) for v in column.to_pylist()]
            data = data.set_column(index, field, pa.array(values, field.type))
        return data


def _sweep_dead(folder: Path) -> None:
    """Remove the spools of processes that died without cleaning up (kill -9)."""
    cutoff = time.time() - STALE_AFTER_S
    for spool in folder.iterdir():
        pid = spool.name.split("-", 1)[0]
        try:
            if not pid.isdigit() or processes.running(int(pid)) or spool.stat().st_mtime > cutoff:
                continue
        except FileNotFoundError:
            continue
        shutil.rmtree(spool, ignore_errors=True)
    return True

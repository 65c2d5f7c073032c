"""core/report/write_behind.py: the bytes written are the chunks put, in order, whether they
went through the thread or not; a failed write surfaces in the caller."""

from __future__ import annotations

import os
import random

import pytest

from decguard_pipeline.core.report import write_behind
from decguard_pipeline.core.report.write_behind import GROUP_BYTES, WriteBehind


def _chunks(total: int, seed: int = 0) -> list[bytes | memoryview]:
    rng = random.Random(seed)
    out: list[bytes | memoryview] = []
    size = 0
    while size < total:
        n = rng.choice([0, 1, 2, 100, 70_000, 300_000])
        data = rng.randbytes(n + 8)
        out.append(memoryview(data)[4 : 4 + n] if n % 2 else data[:n])  # views too
        size += n
    return out


@pytest.mark.parametrize("total", [0, 10, GROUP_BYTES - 1, 7 * GROUP_BYTES + 123])
def test_the_file_holds_every_chunk_in_order(tmp_path, total):
    chunks = _chunks(total, seed=total)
    path = tmp_path / "out.bin"
    with path.open("wb") as out:
        out.write(b"head:")  # buffered by the stream before the writer starts
        with WriteBehind(out) as behind:
            for chunk in chunks:
                behind.put(chunk)
        out.write(b":tail")
    assert path.read_bytes() == b"head:" + b"".join(bytes(c) for c in chunks) + b":tail"


def test_small_documents_never_start_the_thread(tmp_path):
    with (tmp_path / "out.bin").open("wb") as out:
        behind = WriteBehind(out)
        behind.put(b"x" * (GROUP_BYTES - 1))
        assert behind.thread is None
        behind.close()
    assert (tmp_path / "out.bin").stat().st_size == GROUP_BYTES - 1


def test_a_failed_write_is_raised_in_the_caller(tmp_path):
    """A stream that refuses writes (as a full disk would): the writer thread's error comes
    out of put or close, never lost."""
    read_only = (tmp_path / "ro.bin").open("wb")
    fd = os.open(tmp_path / "ro.bin", os.O_RDONLY)
    os.dup2(fd, read_only.fileno())  # writes to this descriptor fail with EBADF
    os.close(fd)
    behind = WriteBehind(read_only)
    with pytest.raises(OSError):
        for _ in range(write_behind.IN_FLIGHT + 3):
            behind.put(b"y" * GROUP_BYTES)
        behind.close()
    behind._stop()
    assert behind.thread is None


def test_an_error_in_the_block_stops_the_thread_and_propagates(tmp_path):
    with (tmp_path / "out.bin").open("wb") as out:
        with pytest.raises(RuntimeError), WriteBehind(out) as behind:
            behind.put(b"z" * (2 * GROUP_BYTES))
            raise RuntimeError("encoder failed")
        assert behind.thread is None


@pytest.mark.parametrize("total", [10, 5 * GROUP_BYTES + 7])
def test_written_sees_every_chunk_in_order_after_it_is_written(tmp_path, total):
    """The hook a digest hangs on: every chunk, in file order, once it is in the file."""
    chunks = _chunks(total, seed=7)
    seen: list[bytes] = []
    path = tmp_path / "out.bin"
    with path.open("wb") as out:

        def written(chunk):
            seen.append(bytes(chunk))
            assert os.fstat(out.fileno()).st_size >= sum(map(len, seen))

        with WriteBehind(out, written) as behind:
            for chunk in chunks:
                behind.put(chunk)
    assert seen == [bytes(c) for c in chunks]
    assert b"".join(seen) == path.read_bytes()

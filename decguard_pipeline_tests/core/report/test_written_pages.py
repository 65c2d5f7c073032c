"""Big report writes hand their pages back to the kernel behind them: same bytes, and the
advice given (``posix_fadvise`` runs for real on the file)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pytest

from decguard_pipeline.core.production.report import write_with_records
from decguard_pipeline.core.report.written_pages import WrittenPages


def test_pages_given_back_past_the_window_leave_the_bytes_alone(tmp_path: Path) -> None:
    chunks = [os.urandom(3000) for _ in range(40)]
    path = tmp_path / "big.bin"
    with path.open("wb") as stream:
        pages = WrittenPages(stream, window=8192)
        for chunk in chunks:
            stream.write(chunk)
            pages.wrote(len(chunk))
    assert path.read_bytes() == b"".join(chunks)
    assert pages.end == 120_000 and pages.started == pages.end  # writeback asked for all
    assert pages.dropped == pages.end - 8192 and pages.usable


def test_a_report_written_with_a_small_window_is_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = {"check_version": "0.1", "records": None, "status": "pass"}
    texts = [pa.array([f',\n    {{"id": "r{i}-{j}"}}' for j in range(300)]) for i in range(20)]
    plain = tmp_path / "plain.json"
    digest = write_with_records(plain, document, texts)
    monkeypatch.setattr(WrittenPages.__init__, "__defaults__", (4096,))  # a 4 KB window
    dropped = tmp_path / "dropped.json"
    assert write_with_records(dropped, document, texts) == digest
    assert dropped.read_bytes() == plain.read_bytes()
    assert hashlib.sha256(plain.read_bytes()).hexdigest() == digest
    assert plain.stat().st_size > 4 * 4096

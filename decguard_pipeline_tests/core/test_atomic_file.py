"""core/atomic_file.py: a file is replaced whole or not at all; killed writers leave only a
hidden temporary file, which the next write of the same file removes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from decguard_pipeline.core.atomic_file import atomic_output, remove_leftovers
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline_tests.conftest import EXAMPLES, ROOT


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_new_bytes_replace_the_old_file_and_nothing_else_is_left(tmp_path):
    path = tmp_path / "deep" / "report.json"
    with atomic_output(path) as out:
        out.write(b"first")
    with atomic_output(path) as out:
        out.write(b"sec")
        assert path.read_bytes() == b"first"  # invisible until complete
        out.write(b"ond")
    assert path.read_bytes() == b"second"
    assert os.listdir(path.parent) == ["report.json"]


def test_an_error_in_the_block_keeps_the_old_file(tmp_path):
    path = tmp_path / "report.json"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(path) as out:
        out.write(b"half of the new")
        raise RuntimeError("encoder failed")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["report.json"]


def test_the_umask_applies_as_to_any_new_file(tmp_path):
    path = tmp_path / "report.json"
    with atomic_output(path) as out:
        out.write(b"{}")
    plain = tmp_path / "plain"
    plain.write_bytes(b"{}")
    assert path.stat().st_mode == plain.stat().st_mode


def test_a_symbolic_link_is_followed_and_kept(tmp_path):
    target = tmp_path / "store" / "report.json"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    with atomic_output(link) as out:
        out.write(b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"


def test_a_named_pipe_is_written_in_place(tmp_path):
    fifo = tmp_path / "report.pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    with atomic_output(fifo) as out:
        out.write(b"streamed")
    assert reader.communicate(timeout=10)[0] == b"streamed"
    assert sorted(os.listdir(tmp_path)) == ["report.pipe"]


def test_leftovers_of_ended_writers_go_those_of_live_ones_stay(tmp_path):
    path = tmp_path / "report.json"
    dead = tmp_path / f".report.json.{_dead_pid()}.abcdef.tmp"
    live = tmp_path / f".report.json.{os.getppid()}.abcdef.tmp"
    other = tmp_path / f".other.json.{_dead_pid()}.abcdef.tmp"
    for leftover in (dead, live, other):
        leftover.write_bytes(b"partial")
    remove_leftovers(path)
    assert not dead.exists() and live.exists() and other.exists()


@pytest.mark.slow
def test_a_report_writer_killed_mid_write_leaves_the_previous_report_whole(tmp_path):
    """kill -9 while ``test --all -o`` writes its 20 MB report: the previous report stays
    byte for byte, and the next run removes the killed run's temporary file."""
    contract = tmp_path / "decguard.yaml"
    contract.write_text((EXAMPLES / "refund" / "decguard.yaml").read_text())
    lines = (EXAMPLES / "refund" / "cases.jsonl").read_text().splitlines()
    with (tmp_path / "cases.jsonl").open("w") as out:
        for i in range(1000):
            case = json.loads(lines[i % len(lines)])
            out.write(json.dumps({**case, "id": f"c{i}"}) + "\n")
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "decguard_pipeline", "test", str(contract), "--all"]
    first = subprocess.run([*command, "-o", str(report)], cwd=ROOT, capture_output=True)
    assert first.returncode in (0, 1), first.stderr
    before = report.read_bytes()
    assert len(before) > 10_000_000

    killed = False
    for _ in range(5):  # the write is a fraction of the run: catch it in the act
        child = subprocess.Popen([*command, "-o", str(report)], cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        while child.poll() is None:
            partial = list(tmp_path.glob(".report.json.*.tmp"))
            if partial and partial[0].stat().st_size > 1_000_000:
                child.kill()
                killed = True
                break
            time.sleep(0.001)
        child.wait()
        if killed:
            break
    assert killed, "never caught the report being written"
    assert report.read_bytes() == before
    assert len(list(tmp_path.glob(".report.json.*.tmp"))) == 1

    again = subprocess.run([*command, "-o", str(report)], cwd=ROOT, capture_output=True)
    assert again.returncode == first.returncode
    assert not list(tmp_path.glob(".report.json.*.tmp"))
    whole = json.loads(report.read_bytes())  # a whole report (latencies differ, not counts)
    assert len(whole["results"]) == 1000
    assert len(whole["properties"]["pairs"]) == len(json.loads(before)["properties"]["pairs"])


def test_write_document_writes_atomically(tmp_path, monkeypatch):
    """The JSON writer goes through atomic_output: an encoder failing half way keeps the
    previous document."""
    path = tmp_path / "report.json"
    write_document(path, {"status": "pass"})
    old = path.read_bytes()

    def broken():
        yield {"id": 1}
        raise RuntimeError("a record could not be made")

    with pytest.raises(RuntimeError):
        write_document(path, {"status": "fail", "results": []}, stream_key="results",
                       items=broken)  # fmt: skip
    assert path.read_bytes() == old
    assert os.listdir(tmp_path) == ["report.json"]


def test_stdout_as_a_path_is_written_in_place():
    """``-o /dev/stdout``: a link to the output, written in place (never renamed over: as
    root, a rename in /dev would succeed and replace the link with a file)."""
    before = os.lstat("/dev/stdout")
    done = subprocess.run(
        [sys.executable, "-c",
         "from decguard_pipeline.core.report.jsonio import write_document;"
         "write_document('/dev/stdout', {'a': 1})"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{\n  "a": 1\n}\n'
    after = os.lstat("/dev/stdout")
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert not [name for name in os.listdir("/dev") if name.startswith(".stdout.")]

"""core/processes.py against real processes: this one, a child still running, a zombie
(exited, not reaped) and one that is gone."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decguard_pipeline.core import processes

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_this_process_runs_and_has_its_start_time():
    assert processes.running(os.getpid())
    fields = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()
    assert processes.start_time(os.getpid()) == fields[19]


def test_a_child_runs_then_a_zombie_then_gone():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        assert processes.running(child.pid)
        assert processes.start_time(child.pid) is not None
        child.stdin.close()  # it exits; not reaped yet, it is a zombie
        deadline = time.monotonic() + 30
        while _state(child.pid) not in ("Z", "X"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not processes.running(child.pid)
    finally:
        child.wait()
    assert not processes.running(child.pid)
    assert processes.start_time(child.pid) is None


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields(tmp_path):
    link = tmp_path / "a b) (c"
    link.symlink_to(sys.executable)
    child = subprocess.Popen([str(link), "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        fields = processes.stat_fields(child.pid)
        assert fields is not None and fields[0] in ("R", "S", "D")
        assert processes.running(child.pid)
    finally:
        child.stdin.close()
        child.wait()


def test_end_child_closes_stdin_and_kills_a_child_that_stays():
    leaves = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE)  # fmt: skip
    processes.end_child(leaves)
    assert leaves.returncode == 0  # it went by itself at the end of its stdin
    stays = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             stdin=subprocess.PIPE)  # fmt: skip
    processes.end_child(stays, wait_s=0.2)
    assert stays.returncode == -9  # killed, and reaped

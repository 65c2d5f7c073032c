"""defs/instance_logs.py: step logs still land in their files (what the UI shows), complete
marker included, but no ``tail -F`` or watcher process is started for the runs of a process
whose instance captures to files only. Dagster's own manager, the oracle, does start them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dagster as dg
import pytest

from decguard_pipeline.defs.instance_logs import capture_to_files

SEEN: list[dict[int, str]] = []


def _children() -> dict[int, str]:
    """This process's children (pid: command name), from /proc."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :]
        if int(rest.split()[1]) == os.getpid():
            found[int(stat.parent.name)] = name
    return found


@dg.asset
def talks() -> None:
    print("to stdout from the step")
    print("to stderr from the step", file=sys.stderr)
    SEEN.append(_children())


def _run(instance: dg.DagsterInstance) -> tuple[list[str], Path]:
    """The names of the children started around the step (other tests in this process may
    have children of their own), and the run's compute-log folder."""
    SEEN.clear()
    before = _children()
    result = dg.materialize([talks], instance=instance)
    assert result.success
    (folder,) = Path(instance.storage_directory(), result.run_id).glob("compute_logs")
    return [name for pid, name in SEEN[0].items() if pid not in before], folder


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def test_dagster_echoes_step_logs_through_tail_processes(tmp_path: Path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        children, _ = _run(instance)
    assert "tail" in children  # the oracle: what capture_to_files removes is really there


def test_captured_to_files_without_a_process(tmp_path: Path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        echo_back = capture_to_files(instance)
        children, folder = _run(instance)
        assert children == []
        (out,) = folder.glob("*.out")
        assert out.read_text() == "to stdout from the step\n"
        assert "to stderr from the step\n" in out.with_suffix(".err").read_text()
        assert out.with_suffix(".complete").exists()  # the UI's sign the capture ended
        echo_back()
        children, _ = _run(instance)  # Dagster's own capture again
        assert "tail" in children


def test_another_manager_is_left_alone(tmp_path: Path):
    from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

    overrides = {
        "compute_logs": {
            "module": "dagster._core.storage.noop_compute_log_manager",
            "class": "NoOpComputeLogManager",
        }
    }
    with dg.DagsterInstance.local_temp(str(tmp_path), overrides=overrides) as instance:
        assert isinstance(instance.compute_log_manager, NoOpComputeLogManager)
        capture_to_files(instance)
        assert "capture_logs" not in instance.compute_log_manager.__dict__

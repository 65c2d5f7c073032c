"""steps/pictures.py: the guard's pictures drawn by a child process are the bytes drawn here;
a job the child cannot draw, or a child that is gone, is drawn here (same bytes, same error);
the child goes with the block, and with its parent when that is killed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from decguard_pipeline.core.report import plots
from decguard_pipeline.runs.guard import run_guarded_test
from decguard_pipeline.steps import pictures
from decguard_pipeline_tests.conftest import EXAMPLES


@pytest.fixture(scope="module")
def jobs() -> list[tuple[dict, str, dict | None]]:
    """(block, title, smooth) of each suite of the injection example, as the guard step has
    them."""
    _, guarded = run_guarded_test(EXAMPLES / "injection" / "decguard.yaml")
    assert guarded is not None and len(guarded.runs) == 2
    return [
        (
            run.block,
            f"injection · {run.label}",
            run.report.extensions.get("calibration", {}).get("smooth"),
        )
        for run in guarded.runs
    ]


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":  # exited, not yet reaped
            return True
        time.sleep(0.05)
    return False


def test_the_child_draws_the_same_bytes_then_goes_with_the_block(jobs):
    here = [plots.images(block, title=title, smooth=smooth) for block, title, smooth in jobs]
    with pictures.picture_worker(True):
        child = pictures._child
        assert child is not None
        drawn = [pictures.draw(block, title=title, smooth=smooth) for block, title, smooth in jobs]
        assert child.draw(jobs[0]) == here[0]  # answered by the child, not drawn here
        assert child.process.poll() is None
    assert drawn == here and all(len(p) == 2 for p in drawn)
    assert pictures._child is None and child.process.returncode == 0


def test_not_started_when_not_needed(jobs):
    with pictures.picture_worker(False):
        assert pictures._child is None
        block, title, smooth = jobs[0]
        assert pictures.draw(block, title=title, smooth=smooth) == plots.images(
            block, title=title, smooth=smooth
        )


def test_a_job_the_child_cannot_draw_raises_what_drawing_here_raises(jobs):
    block, title, smooth = jobs[0]
    broken = {**block, "risk_coverage": {"sweep": [], "cheapest": None}}  # no "aurc"
    with pytest.raises(KeyError) as here:
        plots.images(broken, title=title, smooth=smooth)
    with pictures.picture_worker(True):
        with pytest.raises(KeyError) as there:
            pictures.draw(broken, title=title, smooth=smooth)
        # the child is still there for the next job
        assert pictures.draw(block, title=title, smooth=smooth) == plots.images(
            block, title=title, smooth=smooth
        )
    assert str(there.value) == str(here.value)


def test_a_killed_child_leaves_the_drawing_here(jobs):
    block, title, smooth = jobs[1]
    with pictures.picture_worker(True):
        child = pictures._child
        assert child is not None
        child.process.kill()
        child.process.wait()
        assert pictures.draw(block, title=title, smooth=smooth) == plots.images(
            block, title=title, smooth=smooth
        )


PARENT = """
import time
from decguard_pipeline.steps import pictures
with pictures.picture_worker(True):
    print(pictures._child.process.pid, flush=True)
    time.sleep(60)
"""


@pytest.mark.slow
def test_the_child_goes_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert not _gone(child, within=0.5)
    finally:
        parent.kill()
        parent.wait()
    assert _gone(child), "the picture child outlived its parent"

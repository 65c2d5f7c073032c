"""`evaluate --workers N` forks its workers from a fork server started early
(defs/fork_server.py): each worker must run with the evaluation's environment and working
directory, not those the fork server had when it started."""

import gc
import os
from pathlib import Path

import pytest

from decguard_pipeline.defs import fork_server, parallel

pytestmark = pytest.mark.slow


def _no_definitions(entries: list, warehouse_root: str) -> None:
    return None


def _seen(_: object) -> tuple[str | None, str, str, int, bool]:
    home, frozen = os.environ["DAGSTER_HOME"], gc.get_freeze_count() > 0
    return os.environ.get("DECGUARD_PROBE"), os.getcwd(), home, os.getppid(), frozen


@pytest.mark.skipif(not fork_server.available(), reason="no fork server on this platform")
def test_a_worker_runs_with_the_evaluations_environment(tmp_path: Path, monkeypatch):
    (tmp_path / "early").mkdir()
    (tmp_path / "late").mkdir()
    monkeypatch.setenv("DECGUARD_PROBE", "when the fork server started")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "early"))
    fork_server.start_early(2)
    try:
        monkeypatch.setenv("DECGUARD_PROBE", "when the workers started")
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "late"))
        monkeypatch.chdir(tmp_path / "late")
        with parallel._worker_pool(2, _no_definitions, [], str(tmp_path)) as pool:
            probe, cwd, home, parent, frozen = pool.submit(_seen, None).result(timeout=300)
        assert (probe, cwd, home) == (
            "when the workers started",
            str(tmp_path / "late"),
            str(tmp_path / "late"),
        )
        assert parent != os.getpid()  # forked by the fork server, not by this process
        assert frozen  # what the fork server imported is out of the worker's collections
        assert (tmp_path / "late" / "history").is_dir()  # the worker's instance is there
        assert not (tmp_path / "early" / "history").exists()
    finally:
        fork_server.stop()

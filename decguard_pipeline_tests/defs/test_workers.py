"""`evaluate --workers N`'s worker processes (defs/workers.py): forked from the evaluation
itself on Linux, before it opens anything, or from a fork server (other POSIX systems, or a
thread already running). Either way a worker runs with the evaluation's environment and
working directory, opens the instance itself, and its collections skip what it was forked
with."""

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from decguard_pipeline.defs import fork_server, workers

pytestmark = pytest.mark.slow


def _no_definitions(entries: list, warehouse_root: str) -> None:
    return None


def _seen(_: object) -> tuple[str | None, str, str, int, bool]:
    home, frozen = os.environ["DAGSTER_HOME"], gc.get_freeze_count() > 0
    return os.environ.get("DECGUARD_PROBE"), os.getcwd(), home, os.getppid(), frozen


@pytest.mark.skipif(not fork_server.available(), reason="no fork server on this platform")
def test_from_the_fork_server_a_worker_runs_with_the_evaluations_environment(
    tmp_path: Path, monkeypatch
):
    (tmp_path / "early").mkdir()
    (tmp_path / "late").mkdir()
    monkeypatch.setenv("DECGUARD_PROBE", "when the fork server started")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "early"))
    fork_server.start_early(2, method="forkserver")
    try:
        monkeypatch.setenv("DECGUARD_PROBE", "when the workers started")
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "late"))
        monkeypatch.chdir(tmp_path / "late")
        pool = workers.open_pool(2, _no_definitions, [], str(tmp_path), method="forkserver")
        with pool:
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


# An evaluation's start as `evaluate` does it: the collector paused (core/collector.held),
# the workers forked, then the instance opened here too; what each worker saw.
EVALUATION = textwrap.dedent(
    """
    import gc, json, os, sys, threading
    from decguard_pipeline.core.collector import held
    from decguard_pipeline.defs import workers
    from decguard_pipeline.defs.instance import ensure_dagster_home, open_instance

    def seen(_):
        return [os.getppid(), gc.get_freeze_count() > 0, gc.isenabled(), os.getcwd()]

    def nothing(entries, warehouse_root):
        return None

    if __name__ == "__main__":
        if sys.argv[1] == "thread":
            threading.Thread(target=threading.Event().wait, daemon=True).start()
        with held():
            ensure_dagster_home()
            with workers.open_pool(2, nothing, [], ".") as pool:
                with open_instance():
                    answers = [pool.submit(seen, None).result(timeout=300) for _ in range(4)]
        print(json.dumps({"pid": os.getpid(), "answers": answers}))
    """
)


def _evaluation(tmp_path: Path, mode: str) -> dict:
    script = tmp_path / "evaluation.py"
    script.write_text(EVALUATION)
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, str(script), mode], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    import json

    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(fork_server.start_method() != "fork", reason="workers are forked on Linux")
def test_forked_from_the_evaluation_before_it_opens_anything(tmp_path: Path):
    seen = _evaluation(tmp_path, "alone")
    for parent, frozen, collecting, cwd in seen["answers"]:
        assert parent == seen["pid"]  # forked by the evaluation: no fork server
        assert frozen and collecting  # the evaluation's paused collector runs again there
        assert cwd == str(tmp_path)
    assert (tmp_path / "home" / "history").is_dir()


@pytest.mark.skipif(fork_server.start_method() != "fork", reason="workers are forked on Linux")
def test_with_a_thread_running_the_workers_come_from_the_fork_server(tmp_path: Path):
    seen = _evaluation(tmp_path, "thread")
    for parent, frozen, collecting, _ in seen["answers"]:
        assert parent != seen["pid"]  # never forked beside a thread of this process
        assert frozen and collecting


def test_the_fork_server_is_not_started_where_workers_are_forked(monkeypatch):
    started = []
    monkeypatch.setattr(
        "multiprocessing.forkserver.ensure_running", lambda: started.append(True), raising=True
    )
    fork_server.start_early(2, method="fork")
    fork_server.start_early(1, method="forkserver")
    assert started == []


BROKEN = textwrap.dedent(
    """
    import os
    from decguard_pipeline.defs import workers
    from decguard_pipeline.defs.instance import ensure_dagster_home
    from decguard_pipeline.defs.parallel import Item, Run

    def broken(entries, warehouse_root):
        raise ValueError("no definitions today")

    if __name__ == "__main__":
        ensure_dagster_home()
        with workers.open_pool(2, broken, [], ".") as pool:
            item = Item("refund", [Run("evaluate_refund", "default@v1", {})])
            try:
                pool.submit(workers.run_item, item).result(timeout=300)
            except ValueError as exc:
                print("the item failed:", exc)
    """
)


def test_a_worker_that_cannot_start_fails_its_items_without_a_traceback(tmp_path: Path):
    script = tmp_path / "broken.py"
    script.write_text(BROKEN)
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "the item failed: no definitions today\n"
    assert "Traceback" not in done.stderr and "initializer" not in done.stderr


def test_a_pool_opened_once_the_instance_is_open_is_never_forked_from_it(tmp_path, monkeypatch):
    """A library caller of evaluate_all with workers and no pool: by then this process has
    its instance's connections open, so the workers come from the fork server (or spawn),
    and every run still completes."""
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs import parallel
    from decguard_pipeline.defs.instance import open_instance
    from decguard_pipeline.defs.main_job import evaluate_all
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline_tests.support.evaluate_places import MOCK, Place, write_contract

    place = Place(tmp_path, days=True).use(monkeypatch)
    write_contract(place.contracts / "tiny", MOCK)
    entries = discover_contracts()
    asked: list[str | None] = []
    real = parallel.open_pool

    def spy(*args, **kwargs):
        asked.append(kwargs.get("method"))
        return real(*args, **kwargs)

    monkeypatch.setattr(parallel, "open_pool", spy)
    with open_instance() as instance:
        defs = build_definitions(entries, warehouse_root=str(place.wh.root))
        result = evaluate_all(defs, entries, instance, place.wh, workers=2,
                              build=build_definitions)  # fmt: skip
    assert asked and "fork" not in asked
    assert [o.success for o in result.outcomes + result.production] == [True, True, True]

"""The local Dagster instance: its generated ``dagster.yaml``, a first opening that parallel
processes cannot corrupt, and the recovery of runs whose process died (kill -9, power loss).

Runs that ``evaluate`` executes in its own process carry the process's pid, host and start
time as one tag (``owner_tags``: one tag, so that the run's verdict tag is not lost among
them); ``fail_dead_runs`` marks any such run still in progress whose process is gone as
failed, through the instance API. It runs at the start of ``evaluate`` and
``ui``, and as the ``dead_runs`` sensor of the daemon."""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import dagster as dg
import yaml

from decguard_pipeline.core import processes
from decguard_pipeline.core.atomic_file import atomic_output
from decguard_pipeline.defs import (
    instance_config,
    instance_logs,
    instance_postgres,
    instance_sqlite,
)
from decguard_pipeline.defs.instance_config import HEADER  # noqa: F401  (re-exported)
from decguard_pipeline.steps.contracts import project_root

LOCK = ".decguard-instance.lock"

# The run tag naming the process that executes a run in-process: ``<pid>@<host>``, then
# `` started <start time>`` where the system tells it (a reused pid is another process).
PROCESS_TAG = "decguard/process"
OWNER = re.compile(r"(\d+)@(\S+?)(?: started (\S+))?")
# the three tags of older versions, still read for their unfinished runs
PID_TAG = "decguard/pid"
HOST_TAG = "decguard/host"
STARTED_TAG = "decguard/pid_started"

# Statuses of a run that has not finished; NOT_STARTED holds no slot but is as stranded.
UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def _replace_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a reader sees the old or the new file)."""
    with atomic_output(path) as out:
        out.write(text.encode("utf-8"))


def upgrade_config(config: Path, home: Path) -> bool:
    """Bring a ``dagster.yaml`` that we generated up to date (instance_config.upgraded);
    True if changed. A file not starting with our header is the user's and is left alone."""
    text = config.read_text()
    if not instance_config.is_ours(text):
        return False
    current = yaml.safe_load(text) or {}
    if not isinstance(current, dict):
        return False
    new = instance_config.upgraded(current, home)
    if new == current:
        return False
    _replace_text(config, instance_config.render(new))
    return True


def dagster_home() -> Path:
    return Path(os.environ.get("DAGSTER_HOME") or project_root() / ".dagster_home").resolve()


def ensure_dagster_home() -> Path:
    """``$DAGSTER_HOME``, defaulting to ``.dagster_home`` in the project, created with a
    ``dagster.yaml`` when missing (SQLite, or PostgreSQL when ``DAGSTER_PG_*`` say so), and
    ours brought up to date (instance_config)."""
    home = dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    with _locked(home):
        if not config.exists():
            _replace_text(config, instance_config.render(instance_config.generated(home)))
        else:
            upgrade_config(config, home)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def storage_kind(instance: dg.DagsterInstance) -> str:
    """``postgres`` or ``sqlite``: where an instance keeps its runs (never the URL)."""
    return "postgres" if "postgres" in type(instance.run_storage).__module__ else "sqlite"


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """An exclusive lock on the instance folder (advisory; a no-op where flock is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(home / LOCK, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def open_instance() -> Iterator[dg.DagsterInstance]:
    """``DagsterInstance.get()``, its storages created under a lock: processes creating a fresh
    SQLite instance at the same moment race on its schema and leave it unusable (two
    alembic heads), so the first opening of each storage is serialised. A new local SQLite
    instance is made whole aside and moved into place (a kill -9 during Dagster's creation
    left one that never opened whole), and a SQLite instance is tuned for the runs this
    process executes (defs/instance_sqlite.py)."""
    instance, untune = open_for_runs()
    try:
        with instance:
            yield instance
    finally:
        untune()


def open_for_runs() -> tuple[dg.DagsterInstance, Callable[[], None]]:
    """What :func:`open_instance` opens (for a process that executes runs until it ends: an
    ``evaluate`` worker): the instance, and what gives its storages and log capture back
    Dagster's own (closing the pooled connections)."""
    home = ensure_dagster_home()
    with _locked(home):
        text = (home / "dagster.yaml").read_text()
        config = instance_config.check_variables(text, home)
        config = config if instance_config.is_ours(text) else None
        if isinstance(config, dict):
            instance_sqlite.create_in_place(home, config)  # a new one is made whole first
        url = instance_postgres.database_url(config)  # other machines may open it now too
        with instance_sqlite.creating(), instance_postgres.creation_lock(url):
            instance = dg.DagsterInstance.get()
            try:
                instance.get_runs(limit=1)  # run storage
                instance.get_dynamic_partitions("_")  # event log storage
                instance.all_instigator_state()  # schedule storage
            except BaseException:
                instance.dispose()
                raise
    tuned = instance_sqlite.tune(instance)  # a commit per event, not a checkpoint per event
    echo_back = instance_logs.capture_to_files(instance)  # no tail processes per run

    def untune() -> None:
        echo_back()
        tuned.close()

    return instance, untune


# -- runs and the processes that execute them -------------------------------------------------


def owner_tags() -> dict[str, str]:
    """The tag naming this process, for a run it executes in-process."""
    pid = os.getpid()
    value = f"{pid}@{socket.gethostname()}"
    started = processes.start_time(pid)
    if started is not None:
        value += f" started {started}"  # tells a reused pid from the original process
    return {PROCESS_TAG: value}


def owner(tags: Mapping[str, str]) -> tuple[str, str, str | None] | None:
    """(pid, host, start time) of the process a run's tags name; None without."""
    value = tags.get(PROCESS_TAG)
    if value is not None:
        found = OWNER.fullmatch(value)
        return None if found is None else (found[1], found[2], found[3])
    if PID_TAG in tags and HOST_TAG in tags:  # written by an older version
        return tags[PID_TAG], tags[HOST_TAG], tags.get(STARTED_TAG)
    return None


def process_gone(tags: Mapping[str, str]) -> bool:
    """Whether the process named by ``owner_tags`` has ended. Only a process on this host can
    be judged; a run without the tag, or from another host, is never called gone."""
    named = owner(tags)
    if named is None or named[1] != socket.gethostname() or not named[0].isdigit():
        return False
    pid, started = int(named[0]), named[2]
    if not processes.running(pid):
        return True
    # the pid may have been reused by another process since
    return started is not None and processes.start_time(pid) not in (None, started)


def fail_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark as failed every unfinished run whose executing process is gone; their ids."""
    failed = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED)):
        if not process_gone(dict(run.tags)):
            continue
        pid, host, _ = owner(run.tags) or ("?", "?", None)
        instance.report_run_failed(
            run,
            f"The process that executed this run (pid {pid} on {host}) ended without "
            "finishing it (killed or crashed); marked as failed by decguard-pipeline.",
        )
        failed.append(run.run_id)
    return failed


def dead_runs_sensor() -> dg.SensorDefinition:
    """The daemon's side of ``fail_dead_runs``: without it, runs of a killed ``evaluate`` would
    hold the run queue's slots until the next ``evaluate`` and block every sensor's run."""

    @dg.sensor(
        name="dead_runs",
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Marks as failed the runs of `decguard-pipeline evaluate` whose process "
        "died (kill -9, crash), so they no longer count as in progress.",
    )
    def dead_runs(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        failed = fail_dead_runs(context.instance)
        return dg.SkipReason(
            f"marked {len(failed)} dead run(s) as failed: {', '.join(failed)}"
            if failed
            else "no dead run"
        )

    return dead_runs

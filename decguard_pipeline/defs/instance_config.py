"""The ``dagster.yaml`` that decguard-pipeline generates: SQLite under the instance folder by
default, PostgreSQL (run, event-log and schedule storage, dagster-postgres) when
``DAGSTER_PG_URL`` or the ``DAGSTER_PG_*`` variables are set. The file only names the
variables (Dagster's ``{env: NAME}`` form): a password is never written to it.

A file we generated (it starts with ``HEADER``) is brought up to date in place: run monitoring
and the per-server run limit are added when missing, and it moves from SQLite to PostgreSQL
when the variables appear. It never moves back on its own: a PostgreSQL instance whose
variables are unset is an error, not a silent switch to an empty local history."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.defs.limits import BACKEND_LIMIT

# The first line of every dagster.yaml we write: a file without it is the user's, never touched.
HEADER = "# Written by decguard-pipeline: a local instance inside the project."
NOTE = (
    "# Storage: SQLite in this folder, or PostgreSQL when DAGSTER_PG_URL (or DAGSTER_PG_HOST,\n"
    "# _USERNAME, _PASSWORD, _DB, _PORT) is set; values are read from the environment.\n"
    "# See docs/deploy.md."
)

URL_VAR = "DAGSTER_PG_URL"
# postgres_db field -> variable; the first three are required when this form is used
DB_VARS = {
    "username": "DAGSTER_PG_USERNAME",
    "hostname": "DAGSTER_PG_HOST",
    "db_name": "DAGSTER_PG_DB",
    "password": "DAGSTER_PG_PASSWORD",
    "port": "DAGSTER_PG_PORT",
}
REQUIRED_DB_FIELDS = ("username", "hostname", "db_name")

# Keys checked against dagster 1.13.27's instance schema (dagster/_core/instance/config.py).
# The default run launcher cannot health-check a run worker, so monitoring fails runs stuck
# STARTING or CANCELING; runs of `evaluate` whose process died are failed by fail_dead_runs;
# runs the daemon launched are failed by their code server when their process dies.
RUN_MONITORING: dict[str, Any] = {
    "enabled": True,
    "start_timeout_seconds": 180,
    "cancel_timeout_seconds": 180,
    "max_resume_run_attempts": 0,
    "poll_interval_seconds": 60,
}


# Runs print their events at INFO and above (the console shows every DEBUG event otherwise:
# step starts, resource inits, ...). Dagster's own events are stored whatever the level; only
# user log messages below INFO are neither printed nor kept.
PYTHON_LOGS: dict[str, Any] = {"python_log_level": "INFO"}


def sqlite_event_log(home: Path) -> dict[str, Any]:
    """One SQLite event log for all runs: the default keeps a database per run and reconnects
    on every event, which made each evaluation of a small contract ~3x slower."""
    return {
        "module": "dagster.core.storage.event_log",
        "class": "ConsolidatedSqliteEventLogStorage",
        "config": {"base_dir": f"{home}/history"},
    }


def postgres_storage(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The ``storage:`` section for the PostgreSQL the environment names, or None."""
    env = os.environ if env is None else env
    if env.get(URL_VAR):
        return {"postgres": {"postgres_url": {"env": URL_VAR}}}
    present = {field: var for field, var in DB_VARS.items() if env.get(var)}
    if not present:
        return None
    missing = [DB_VARS[f] for f in REQUIRED_DB_FIELDS if f not in present]
    if missing:
        raise DecGuardError(
            f"{', '.join(sorted(present.values()))} set but {', '.join(missing)} not: a "
            f"PostgreSQL instance needs {URL_VAR}, or all of "
            + ", ".join(DB_VARS[f] for f in REQUIRED_DB_FIELDS)
        )
    return {"postgres": {"postgres_db": {f: {"env": v} for f, v in present.items()}}}


def generated(home: Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The instance config of a new instance folder."""
    storage = postgres_storage(env)
    config: dict[str, Any] = (
        {"storage": storage} if storage else {"event_log_storage": sqlite_event_log(home)}
    )
    return {
        **config,
        "telemetry": {"enabled": False},
        "run_queue": {"max_concurrent_runs": 4, "tag_concurrency_limits": [BACKEND_LIMIT]},
        "run_monitoring": RUN_MONITORING,
        "python_logs": PYTHON_LOGS,
    }


def render(config: Mapping[str, Any]) -> str:
    return f"{HEADER}\n{NOTE}\n" + yaml.safe_dump(dict(config), sort_keys=False)


def is_ours(text: str) -> bool:
    return text.split("\n", 1)[0] == HEADER


def env_vars(section: Any) -> list[str]:
    """Every variable a part of an instance config reads (``{env: NAME}`` leaves)."""
    if isinstance(section, dict):
        if set(section) == {"env"} and isinstance(section["env"], str):
            return [section["env"]]
        return [name for value in section.values() for name in env_vars(value)]
    if isinstance(section, list):
        return [name for value in section for name in env_vars(value)]
    return []


def check_variables(text: str, home: Path, env: Mapping[str, str] | None = None) -> Any:
    """The instance config in ``text`` (any ``dagster.yaml``, ours or not), parsed; a
    DecGuardError naming the file and the variables it names that are not set (Dagster
    would stop on each with a config error of its own, its traceback included)."""
    env = os.environ if env is None else env
    where = f"dagster.yaml in {home}"
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DecGuardError(f"{where} is not valid YAML:\n  {exc}") from exc
    unset = list(dict.fromkeys(name for name in env_vars(config) if name not in env))
    if unset:
        which = "which is not set" if len(unset) == 1 else "which are not set"
        raise DecGuardError(
            f"{where} names {', '.join(unset)}, {which}: set "
            f"{'it' if len(unset) == 1 else 'them'}, or point DAGSTER_HOME at another folder "
            "(docs/deploy.md)"
        )
    return config


def upgraded(
    config: dict[str, Any], home: Path, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Our config brought up to date: monitoring, the run limit, INFO logs, PostgreSQL when
    asked for.
    Raises DecGuardError when it cannot follow the environment (see the module docstring)."""
    env = os.environ if env is None else env
    config = dict(config)
    config.setdefault("run_monitoring", RUN_MONITORING)
    config.setdefault("python_logs", PYTHON_LOGS)
    queue = config.get("run_queue")
    if isinstance(queue, dict) and "tag_concurrency_limits" not in queue:
        config["run_queue"] = {**queue, "tag_concurrency_limits": [BACKEND_LIMIT]}
    storage = postgres_storage(env)
    current = config.get("storage")
    if storage is None:
        unset = [name for name in env_vars(current) if not env.get(name)]
        if unset:
            raise DecGuardError(
                f"{home / 'dagster.yaml'} keeps runs in PostgreSQL from {', '.join(unset)}, "
                "which is not set: set it, or point DAGSTER_HOME at another folder for a "
                "local SQLite instance"
            )
        return config
    if current == storage:
        return config
    event_log = config.get("event_log_storage")
    theirs = [k for k in ("run_storage", "schedule_storage") if k in config]
    ours = current is None or (isinstance(current, dict) and set(current) == {"postgres"})
    if not ours or theirs or event_log not in (None, sqlite_event_log(home)):
        raise DecGuardError(
            f"PostgreSQL is asked for ({URL_VAR} or DAGSTER_PG_*) but {home / 'dagster.yaml'} "
            "has storage settings of its own: edit it (docs/deploy.md) or remove it"
        )
    config.pop("event_log_storage", None)
    return {"storage": storage, **config}

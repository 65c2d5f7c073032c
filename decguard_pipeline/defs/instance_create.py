"""A new local SQLite instance made whole before it appears.

Dagster creates an instance's databases in place, statement by statement; a kill -9 in the
middle left an instance whose next opening did not finish the job (e.g. no dynamic
partitions table: every later run failed). ``create_in_place`` has Dagster create them in a
folder of its own inside the instance folder, through the public ``DagsterInstance``, every
connection closed, then renames each database folder into place if still missing."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from decguard_pipeline.defs import instance_config

# A new local instance's databases are made in ``<home>/.creating-*`` and moved into place.
CREATING = ".creating-"
FOLDERS = ("history", "schedules")  # runs.db and event_log.db; schedules.db


def touch_storages(instance: dg.DagsterInstance) -> None:
    """Open (and, new, create) the run, event-log and schedule storages."""
    instance.get_runs(limit=1)
    instance.get_dynamic_partitions("_")
    instance.all_instigator_state()


def create_in_place(home: Path, config: dict[str, Any]) -> None:
    """The databases of a new local SQLite instance (``config``, the generated one), made
    whole before they appear (see the module). Run under the instance lock; a folder left by
    a killed creation is deleted first. A non-SQLite or hand-written config, or an instance
    whose folders exist, is left to Dagster."""
    for leftover in home.glob(f"{CREATING}*"):
        shutil.rmtree(leftover, ignore_errors=True)
    missing = [name for name in FOLDERS if not (home / name).exists()]
    if not missing or "storage" in config or "run_storage" in config:
        return
    if config.get("event_log_storage") != instance_config.sqlite_event_log(home):
        return
    staging = Path(tempfile.mkdtemp(prefix=CREATING, dir=home))
    try:
        (staging / "dagster.yaml").write_text(
            yaml.safe_dump(
                {
                    "event_log_storage": instance_config.sqlite_event_log(staging),
                    "telemetry": {"enabled": False},
                }
            )
        )
        instance = dg.DagsterInstance.from_config(str(staging))
        try:
            touch_storages(instance)
        finally:
            instance.dispose()
        for name in missing:
            os.rename(staging / name, home / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

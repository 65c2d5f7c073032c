"""Why the Overview page did not show ``evaluate``'s runs, and what puts them there.

Dagster's Overview timeline (and a job's page) groups runs by the code location and job they
were launched from — the run's *remote job origin* — and leaves out every run without one
(``useRunsForTimeline``: ``if (!run.repositoryOrigin) return``). Runs launched from the UI,
a sensor or a schedule get it from the code location; ``JobDefinition.execute_in_process``,
which ``evaluate`` runs its jobs with (in this process, milliseconds per run), records none:
its runs were on the Runs page only, "Manually launched", and the Overview said "No runs".

So each run ``evaluate`` executes is given, once finished, the origin of the code location
that ``decguard-pipeline ui`` serves (``workspace.yaml``: location
``decguard_pipeline.definitions``, repository ``__repository__``), named as Dagster names a
location it manages itself (a registered location: the name alone, which the webserver
resolves to the location it loaded). Dagster's public API has no call that sets a run's
origin: the origin is built with the public ``deserialize_value`` from its storage form (the
form every stored run is kept in, which Dagster reads back across versions) and stored with
the run storage's ``replace_job_origin``, the call ``dagster run migrate-repository`` makes.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import dagster as dg
import yaml

from decguard_pipeline.steps.contracts import project_root

REPOSITORY = "__repository__"  # the repository of a code location that is one Definitions
MODULE = "decguard_pipeline.definitions"
REPOSITORY_LABEL_TAG = ".dagster/repository"  # Dagster's tag of a run's code location


@cache
def location_name() -> str:
    """The code location's name as ``workspace.yaml`` gives it (its ``location_name``, else
    its module's name, as Dagster defaults it)."""
    try:
        workspace = yaml.safe_load((project_root() / "workspace.yaml").read_text()) or {}
        module = workspace["load_from"][0]["python_module"]
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError):
        return MODULE
    if isinstance(module, str):
        return module
    if isinstance(module, dict):
        return str(module.get("location_name") or module.get("module_name") or MODULE)
    return MODULE


def origin_of(job_name: str, location: str) -> Any:
    """The remote job origin of ``job_name`` in the registered code location ``location``."""
    stored = {
        "__class__": "ExternalPipelineOrigin",
        "external_repository_origin": {
            "__class__": "ExternalRepositoryOrigin",
            "repository_location_origin": {
                "__class__": "RegisteredRepositoryLocationOrigin",
                "location_name": location,
            },
            "repository_name": REPOSITORY,
        },
        "pipeline_name": job_name,
    }
    return dg.deserialize_value(json.dumps(stored))


def attach_to_location(instance: dg.DagsterInstance, run_id: str, job_name: str) -> bool:
    """Give a run executed in-process the origin of the project's code location (see the
    module's docstring); True when done. A run that has an origin is left alone."""
    run = instance.get_run_by_id(run_id)
    if run is None or run.remote_job_origin is not None:
        return False
    origin = origin_of(job_name, location_name())
    instance.run_storage.replace_job_origin(run, origin)
    # the same label in the run's tag rows (the Runs page filters code locations by it)
    instance.add_run_tags(run_id, {REPOSITORY_LABEL_TAG: origin.repository_origin.get_label()})
    return True

"""One run of a job in this process, and what it says: a verdict (a blocking gate failed) or
an error (the pipeline broke). Shared by the main job and its worker processes."""

from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from decguard_pipeline.defs.instance import owner_tags

# Blocked reports after a failing requirement are expected results, not errors to print.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}

# What a blocking asset check raises when a requirement gate fails: a verdict, not a crash.
GATE_FAILURE = "DagsterAssetCheckFailedError"


@dataclass
class Outcome:
    """One run of the main job. ``failed_steps``: every step that failed, a blocking gate
    included (a verdict); ``errors``: the steps that broke, with their error (the pipeline
    failed; ``evaluate`` exits 2). ``run_id`` is None when no run could be started."""

    contract: str
    target: str
    success: bool
    run_id: str | None
    failed_steps: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def broken(self) -> bool:
        return bool(self.errors) or self.run_id is None


def _error_text(error: Any) -> str:
    """The innermost cause of a step's error (the exception our code raised), one line."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    message = (error.message or "").strip().splitlines()
    text = message[0] if message else error.cls_name
    name = f"{error.cls_name}: "
    return text.split(name, 1)[1] if name in text else text


def run_job(
    job: Any, instance: dg.DagsterInstance, contract: str, key: str, tags: dict[str, str]
) -> Outcome:
    """Execute one partition of a job in this process; a step failing on a blocking gate is
    a verdict, any other failure (or no run at all) an error of the outcome."""
    try:
        result = job.execute_in_process(
            instance=instance,
            partition_key=key,
            raise_on_error=False,
            run_config=QUIET,
            tags={**tags, **owner_tags()},
        )
    except Exception as exc:  # the run could not even start (e.g. an unknown partition)
        return Outcome(contract, key, False, None, errors={"run": f"{type(exc).__name__}: {exc}"})
    failed, errors = [], {}
    for event in result.all_events:
        if not (event.is_step_failure and event.step_key):
            continue
        failed.append(event.step_key)
        error = event.step_failure_data.error
        if error is not None and error.cls_name != GATE_FAILURE:
            errors[event.step_key] = _error_text(error)
        elif error is None:
            errors[event.step_key] = "failed without an error"
    if not result.success and not failed:  # the run failed outside any step
        failure = result.get_run_failure_event()
        errors["run"] = failure.message if failure is not None else "the run failed"
    return Outcome(contract, key, result.success, result.run_id, failed, errors)

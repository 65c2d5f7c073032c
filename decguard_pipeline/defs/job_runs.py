"""One run of a job in this process, and what it says: the target's verdict (the run's
``decguard/verdict`` tag; failing gates are a verdict, the run succeeds) or an error (a step
broke, the run failed). Shared by the main job and its worker processes."""

from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from decguard_pipeline.defs.assets.evaluation import FAILED_PARTS
from decguard_pipeline.defs.assets.verdict import VERDICT_TAG
from decguard_pipeline.defs.instance import owner_tags
from decguard_pipeline.defs.run_origin import attach_to_location

# `evaluate` prints its own summary; a step's error is in it (and in the run's event log).
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass
class Outcome:
    """One run of the main job. ``failed_steps``: every step that failed; ``errors``: each
    one's error, per broken asset of a step running several (the pipeline broke; ``evaluate``
    exits 2). ``verdict``: the run's
    ``decguard/verdict`` tag (None when the run did not reach it, or has no verdict asset).
    ``run_id`` is None when no run could be started."""

    contract: str
    target: str
    success: bool
    run_id: str | None
    failed_steps: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    verdict: str | None = None

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


def _step_errors(contract: str, step: str, failure: Any) -> dict[str, str]:
    """A failed step's errors: one per broken part of a step running several assets
    (``defs/assets/evaluation.py``), keyed ``<contract>__<asset>`` like a step of its own."""
    user = failure.user_failure_data
    parts = None if user is None else user.metadata.get(FAILED_PARTS)
    if parts is not None:
        return {f"{contract}__{name}": text for name, text in parts.value.items()}
    error = failure.error
    return {step: "failed without an error" if error is None else _error_text(error)}


def run_job(
    job: Any, instance: dg.DagsterInstance, contract: str, key: str, tags: dict[str, str]
) -> Outcome:
    """Execute one partition of a job in this process; a failing step (or no run at all) is
    an error of the outcome, failing gates are its verdict."""
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
        errors.update(_step_errors(contract, event.step_key, event.step_failure_data))
    if not result.success and not failed:  # the run failed outside any step
        failure = result.get_run_failure_event()
        errors["run"] = failure.message if failure is not None else "the run failed"
    attach_to_location(instance, result.run_id, job.name)  # the Overview shows it then
    run = instance.get_run_by_id(result.run_id)
    verdict = None if run is None else run.tags.get(VERDICT_TAG)
    return Outcome(contract, key, result.success, result.run_id, failed, errors, verdict)

"""One line per broken part or step: the innermost cause of its error, the same whether read
from the live exception (the evaluation step) or from the error Dagster recorded for a failed
step (``evaluate``'s summary of a run)."""

from __future__ import annotations

import dagster as dg

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.defs.error_text import error_text

INNER = "refund: target 'default@v1' has not been evaluated yet"


def _broken() -> None:
    try:
        raise DecGuardError(INNER + "\nsecond line")
    except DecGuardError as exc:
        raise RuntimeError("while scoring") from exc


def test_a_live_exception_is_named_by_its_innermost_cause():
    try:
        _broken()
    except RuntimeError as exc:
        assert error_text(exc) == INNER
    failure = dg.Failure(description="part: broken\nmore")
    assert error_text(failure) == "part: broken"
    assert error_text(ValueError()) == "ValueError"


def test_a_recorded_step_error_reads_as_the_live_one():
    @dg.op
    def broken() -> None:
        _broken()

    @dg.job
    def job() -> None:
        broken()

    result = job.execute_in_process(raise_on_error=False)
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert error_text(failure.step_failure_data.error) == INNER

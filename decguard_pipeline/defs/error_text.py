"""The one line a broken part or step is reported by: the innermost cause of its error (the
exception our code raised, not Dagster's wrapping of it). Of a live exception (the evaluation
step, ``defs/assets/evaluation.py``) or of the error Dagster recorded for a failed step
(``defs/job_runs.py``): the same text either way."""

from typing import Any

import dagster as dg


def error_text(error: BaseException | Any) -> str:
    """The innermost cause of ``error`` in one line: an exception (its ``__cause__``, else
    its unsuppressed ``__context__``) or a recorded error (``dg.SerializableErrorInfo``: its
    ``cause``, its message without the ``<Class>: `` prefix Dagster adds)."""
    if isinstance(error, BaseException):
        while True:
            inner = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
            if inner is None:
                break
            error = inner
        text = error.description if isinstance(error, dg.Failure) else str(error)
        lines = (text or "").strip().splitlines()
        return lines[0] if lines else type(error).__name__
    while getattr(error, "cause", None) is not None:
        error = error.cause
    lines = (error.message or "").strip().splitlines()
    text = lines[0] if lines else error.cls_name
    prefix = f"{error.cls_name}: "
    return text.split(prefix, 1)[1] if prefix in text else text

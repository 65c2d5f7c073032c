"""Error hierarchy.

Every deliberate error derives from :class:`DecGuardError`; the CLI prints it as
``error: <message>`` with exit code 2. :class:`BackendError` subclasses describe one case that
could not be decided: the runner records them as typed per-case errors instead of aborting.
"""

from __future__ import annotations

from typing import Any, ClassVar

from decguard_pipeline.core.secrets import scrub_text


class DecGuardError(Exception):
    """A problem the user can fix: bad input, configuration, an unusable backend.

    Its message is scrubbed of registered secrets when the error is made, so no printer,
    log or Dagster event can show one (a message may quote a model's words)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(scrub_text(a) if isinstance(a, str) else a for a in args))


class ContractError(DecGuardError):
    """The contract (or backend configuration derived from it) is invalid."""


class DatasetError(DecGuardError):
    """A dataset or records file is missing, malformed or inconsistent with its contract."""


class ReportError(DecGuardError):
    """A stored report cannot be read, is tampered with, or does not fit a contract."""


class CalibratorError(DecGuardError):
    """A calibrator cannot be fitted, read, or applied here (another model version, other
    labels, answers without the logits it was fitted on)."""


class BackendError(DecGuardError):
    """A backend failed on one case. ``kind`` is the stable category written to reports."""

    kind: ClassVar[str] = "backend_error"


class BackendTimeout(BackendError):
    kind: ClassVar[str] = "timeout"


class BackendUnavailable(BackendError):
    kind: ClassVar[str] = "unavailable"


class InvalidResponse(BackendError):
    """The backend answered, but not with a valid probability distribution."""

    kind: ClassVar[str] = "invalid_response"


class RateLimited(BackendError):
    """The backend still refused with HTTP 429 after the last retry (an error kind of this
    project; DecGuard's reports accept any kind string)."""

    kind: ClassVar[str] = "rate_limited"


class ParaphraseError(BackendError):
    """A paraphrase provider failed for one case (fuzzing only)."""

    kind: ClassVar[str] = "paraphrase_error"


ERROR_KINDS = (
    "timeout",
    "unavailable",
    "invalid_response",
    "backend_error",
    "exception",
    "rate_limited",
    "paraphrase_error",
    "original_error",
)

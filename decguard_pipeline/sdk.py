"""The embeddable Python API: one decision from a backend, routed by the contract's policy.

    with DecGuard.from_contract("decguard.yaml") as guard:
        decision = guard.decide("The parcel never arrived")
        if decision.action == "fallback":
            ...  # ask decision.fallback_backend: the caller decides, DecGuard never does

The same surface as DecGuard 0.1's ``decguard.DecGuard``: ``decide(input_data, *, case_id)``
returns a frozen :class:`PolicyDecision` (``result``, ``action``, ``fallback_backend``,
``route_index``; ``model_dump_json()`` gives DecGuard's bytes); input that is neither text
nor an object with string keys raises pydantic's ``ValidationError``; a failing backend
raises its ``BackendError`` subclass (timeout, unavailable, invalid_response,
backend_error). The types and errors are importable from here.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from decguard_pipeline.backends import Backend
from decguard_pipeline.core.contract import LoadedContract, load_contract
from decguard_pipeline.core.decision import DecisionInput, DecisionRequest
from decguard_pipeline.core.decision_models import (
    DecisionResult,
    DecisionType,
    PolicyDecision,
    RequestCheck,
    policy_decision,
)
from decguard_pipeline.core.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    CalibratorError,
    ContractError,
    DecGuardError,
    InvalidResponse,
)
from decguard_pipeline.core.policy import apply_policy

if TYPE_CHECKING:  # calibrators are imported by the guards that use one
    from decguard_pipeline.core.calibration.artifact import LoadedCalibrator

__all__ = [
    "BackendError",
    "BackendTimeout",
    "BackendUnavailable",
    "CalibratorError",
    "ContractError",
    "DecGuard",
    "DecGuardError",
    "DecisionInput",
    "DecisionResult",
    "DecisionType",
    "InvalidResponse",
    "PolicyDecision",
]

NO_POLICY = "the contract has no 'policy' section"


class DecGuard:
    """A contract's backend plus its runtime policy (and a calibrator, when given one)."""

    _calibrator: LoadedCalibrator | None = None

    def __init__(
        self,
        loaded: LoadedContract,
        backend: Backend,
        *,
        owned_backend: bool = False,
        calibrator: LoadedCalibrator | None = None,
    ) -> None:
        if loaded.contract.policy is None:
            raise ContractError(NO_POLICY)
        self.loaded = loaded
        self.backend = _adopted(backend) or backend
        self._owned_backend = owned_backend
        if calibrator is not None:  # kept only when given: a plain guard is DecGuard's object
            from decguard_pipeline.core.calibration.artifact import check_labels

            check_labels(calibrator, loaded.contract.labels)
            self._calibrator = calibrator

    @classmethod
    def from_contract(
        cls,
        contract: LoadedContract | str | Path,
        *,
        backend: str | Backend | None = None,
        check_health: bool = False,
        calibrator: str | Path | LoadedCalibrator | None = None,
    ) -> Self:
        """Load the contract and build (or adopt) the backend; no request is sent unless
        ``check_health``. A backend passed in stays the caller's to close.

        ``calibrator`` (a ``calibrator.json`` from ``decguard-pipeline calibrate``, or one
        loaded; default: the contract's ``pipeline.calibration.apply``): every decision is
        made on calibrated probabilities, the raw ones kept in ``result.metadata
        ["calibration"]``; a decision of another model version raises ``CalibratorError``."""
        # imported here: evaluation pulls in the batch runner, which single calls never need
        from decguard_pipeline.runs.calibrator import calibrator_for
        from decguard_pipeline.runs.golden import make_backend

        loaded = contract if isinstance(contract, LoadedContract) else load_contract(contract)
        if loaded.contract.policy is None:
            raise ContractError(NO_POLICY)
        applied = (
            calibrator_for(loaded, calibrator)
            if calibrator is None or isinstance(calibrator, str | Path)
            else calibrator
        )
        adopted = _adopted(backend)
        if adopted is not None:
            instance, owned = adopted, False
        else:  # a name (or anything else: refused as DecGuard refuses it, as unknown)
            instance, owned = make_backend(loaded, backend), True  # type: ignore[arg-type]
        if check_health:
            try:
                status = instance.healthcheck()
                if status["status"] == "unhealthy":
                    raise DecGuardError(
                        f"backend {instance.name!r} is unhealthy: {status['detail']}"
                    )
            except BaseException:
                if owned:
                    instance.close()
                raise
        return cls(loaded, instance, owned_backend=owned, calibrator=applied)

    def decide(self, input_data: DecisionInput, *, case_id: str = "sdk") -> PolicyDecision:
        """Ask the backend once and route its validated result."""
        contract = self.loaded.contract
        assert contract.policy is not None
        checked = RequestCheck(case_id=case_id, input=input_data)
        request = DecisionRequest(checked.case_id, contract.spec(), checked.input)
        tolerance = contract.evaluation.probability_tolerance
        result = self.backend.decide(request, tolerance=tolerance)
        calibrator = self._calibrator
        if calibrator is None:
            return policy_decision(apply_policy(contract.policy, result), tolerance)
        from decguard_pipeline.core.calibration.applying import calibrate_result, routed

        version = result.get("model_version") or self.backend.metadata()["model_version"]
        result = calibrate_result(result, calibrator, fallback_version=version)
        document = routed(apply_policy(contract.policy, result), result, calibrator)
        return policy_decision(document, tolerance)

    def close(self) -> None:
        """Close the backend if this object built it."""
        if self._owned_backend:
            self.backend.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _adopted(backend: object) -> Backend | None:
    """Our backend as given; a backend object written for DecGuard (its ``CallableBackend``,
    say) behind our interface, so code passing one runs unchanged; None for anything else
    (a backend name)."""
    if isinstance(backend, Backend):
        return backend
    if backend is None or isinstance(backend, str):
        return None
    from decguard_pipeline.backends.registry import adopt_decguard_backend

    return adopt_decguard_backend(backend)

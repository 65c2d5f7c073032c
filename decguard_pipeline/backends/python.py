"""A plain Python function as a backend, for the SDK (and for runs started from Python).

Contracts cannot name Python code, so this provider cannot be configured from a contract;
a Python provider meant for the CLI is packaged as a ``decguard.backends`` entry point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.core.decision import DecisionRequest, Prediction

DecideFn = Callable[[DecisionRequest], Mapping[str, float] | Prediction]


class CallableBackend(Backend):
    """``fn(request)`` answers with ``{label: probability}`` or a whole :class:`Prediction`;
    the answer is validated like any backend's. ``fn`` may be called from several threads
    at once by a batch run."""

    provider = "python"

    def __init__(self, fn: DecideFn, *, name: str = "python", model: str | None = None) -> None:
        super().__init__(name=name, model=model)
        self._fn = fn

    def predict(self, request: DecisionRequest) -> Prediction:
        answer = self._fn(request)
        return answer if isinstance(answer, Prediction) else Prediction(answer)

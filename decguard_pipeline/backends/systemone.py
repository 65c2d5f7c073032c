"""The ``systemone`` provider (protocol ``typesafe.systemone/v1``): TypeSafe's Jev, directly
or through OpenRouter's Decisions API, and self-hosted Kev servers.

Each decision is one typed question about the case input:

    POST <url>  {"model", "state": <input>, "questions": {<decision>: {"type", "instructions",
                 "criteria"}}}
    200 OK      {"model": <served model>, "answers": {<decision>: {...}}, "usage"?, ...}

choice: criteria are the shown options, the answer has ``probabilities`` by option and a
``choice`` that must be the most probable one sent. noul: no labels are sent; ``noul`` is the
probability of the positive (first) label. score: criteria are the shown levels, lowest first;
``probabilities`` are keyed by level index. Answers are checked, never repaired.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Self

from decguard_pipeline.backends.base import backend_metadata, backend_settings
from decguard_pipeline.backends.http import RETRYABLE, HttpBackend, HttpSettings, Reply
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest, Prediction
from decguard_pipeline.core.errors import ContractError, InvalidResponse

PROTOCOL = "typesafe.systemone/v1"
USAGE_KEYS = ("input_tokens", "output_tokens", "cost")


class SystemOneSettings(HttpSettings):
    instructions: str | None = None  # default: the contract's decision.description


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class SystemOneBackend(HttpBackend):
    provider = "systemone"
    protocol = PROTOCOL
    # TypeSafe and OpenRouter ask clients to retry rate limits (429) and overload (529).
    retryable = RETRYABLE | {429, 529}

    def __init__(
        self,
        settings: SystemOneSettings,
        *,
        decision: DecisionSpec,
        name: str = "default",
        model: str,
    ) -> None:
        super().__init__(settings, name=name, model=model)
        instructions = settings.instructions or decision.description
        if not instructions:
            raise ContractError(
                f"systemone backend {name!r}: set decision.description or the backend's "
                "'instructions' (the question asked about every input)"
            )
        self.instructions = instructions
        self.decision = decision
        self._served: set[str] = set()
        self._upstream: set[str] = set()
        self._seen = threading.Lock()

    @classmethod
    def from_config(cls, config: BackendConfig, *, name: str, decision: DecisionSpec) -> Self:
        settings = backend_settings(SystemOneSettings, config, name=name)
        if not config.model:
            raise ContractError(f"systemone backend {name!r}: 'model' is required")
        if settings.label_map and decision.type == "noul":
            raise ContractError(
                f"systemone backend {name!r}: label_map does not apply to noul decisions "
                "(no labels are sent)"
            )
        cls.check_label_map(settings, decision, name=name)
        return cls(settings, decision=decision, name=name, model=config.model)

    def payload(self, request: DecisionRequest) -> dict[str, Any]:
        spec = request.decision
        sent = self.backend_labels(spec.labels)
        question: dict[str, Any] = {"type": spec.type, "instructions": self.instructions}
        if spec.type == "choice":
            question["criteria"] = dict.fromkeys(sent)
        elif spec.type == "score":
            question["criteria"] = sent
        return {"model": self.model, "state": request.input, "questions": {spec.name: question}}

    def parse(self, request: DecisionRequest, reply: Reply) -> Prediction:
        self.check_status(reply)
        spec = request.decision
        body = self.json_body(reply)
        if not isinstance(body, dict) or not isinstance(body.get("answers"), dict):
            raise InvalidResponse(f"backend {self.name!r} response has no 'answers' object")
        if set(body["answers"]) != {spec.name}:
            raise InvalidResponse(
                f"backend {self.name!r} must answer exactly the question {spec.name!r}, "
                f"got {sorted(map(str, body['answers']))}"
            )
        answer = body["answers"][spec.name]
        if not isinstance(answer, dict) or answer.get("type") != spec.type:
            got = answer.get("type") if isinstance(answer, dict) else type(answer).__name__
            raise InvalidResponse(f"expected a {spec.type} answer, got {got!r}")
        served = body.get("model")
        if not isinstance(served, str) or not served:
            raise InvalidResponse("'model' must be a non-empty string")
        sent = self.backend_labels(spec.labels)
        if spec.type == "choice":
            probabilities = self._choice(answer, sent)
        elif spec.type == "noul":
            probabilities = self._noul(answer, spec.labels)
        else:
            probabilities = self._score(answer, spec.labels, sent)
        return Prediction(probabilities, None, served, self._provenance(body, reply, served))

    def _choice(self, answer: dict[str, Any], sent: list[str]) -> dict[str, Any]:
        raw = answer.get("probabilities")
        if not isinstance(raw, dict):
            raise InvalidResponse("choice answer has no 'probabilities' object")
        choice = answer.get("choice")
        if not isinstance(choice, str) or choice not in sent or choice not in raw:
            raise InvalidResponse(f"choice {choice!r} is not one of the options sent")
        if all(map(_is_number, raw.values())) and raw[choice] < max(raw.values()):
            raise InvalidResponse(f"choice {choice!r} is not the most probable option")
        probabilities: dict[str, Any] = {}
        for option, value in raw.items():
            label = self.settings.label_map.get(str(option), str(option))
            if label in probabilities:
                raise InvalidResponse(f"backend {self.name!r} returned label {label!r} twice")
            probabilities[label] = value
        return probabilities

    def _noul(self, answer: dict[str, Any], shown: tuple[str, ...]) -> dict[str, Any]:
        value = answer.get("noul")
        if not _is_number(value) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise InvalidResponse(f"noul answer must be a probability in [0, 1], got {value!r}")
        positive, negative = self.decision.labels
        if set(shown) != {positive, negative}:
            positive, negative = shown  # reformatted labels keep the order: positive first
        return {positive: float(value), negative: 1.0 - float(value)}

    def _score(
        self, answer: dict[str, Any], shown: tuple[str, ...], sent: list[str]
    ) -> dict[str, Any]:
        raw = answer.get("probabilities")
        if not isinstance(raw, dict):
            raise InvalidResponse("score answer has no 'probabilities' object")
        legend = answer.get("legend")
        if legend is not None and legend != {str(i): level for i, level in enumerate(sent)}:
            raise InvalidResponse("score legend does not match the levels sent")
        probabilities: dict[str, Any] = {}
        for key, value in raw.items():
            index = int(key) if isinstance(key, str) and key.isdecimal() else -1
            if str(index) != key or index >= len(shown):
                raise InvalidResponse(f"score probabilities key {key!r} is not a level index")
            probabilities[shown[index]] = value
        return probabilities

    def _provenance(self, body: dict[str, Any], reply: Reply, served: str) -> dict[str, Any]:
        metadata: dict[str, Any] = {}
        request_id = body.get("id") or reply.headers.get("x-typesafe-request-id")
        if isinstance(request_id, str):
            metadata["request_id"] = request_id
        upstream = body.get("provider")
        if isinstance(upstream, str):
            metadata["upstream_provider"] = upstream
        usage = body.get("usage")
        if isinstance(usage, dict):
            metadata["usage"] = {k: usage[k] for k in USAGE_KEYS if _is_number(usage.get(k))}
        with self._seen:
            self._served.add(served)
            if isinstance(upstream, str):
                self._upstream.add(upstream)
        return metadata

    def note_replayed(
        self, model_versions: Sequence[str | None], metadata: Sequence[Mapping[str, Any]]
    ) -> None:
        upstream = {m.get("upstream_provider") for m in metadata if m}
        with self._seen:
            self._served.update(v for v in model_versions if v is not None)
            self._upstream.update(u for u in upstream if isinstance(u, str))

    def metadata(self) -> dict[str, Any]:
        """Provenance, including the model ids that actually answered during the run."""
        with self._seen:
            served, upstream = sorted(self._served), sorted(self._upstream)
        details: dict[str, Any] = {"url": self.metadata_url(), "protocol": self.protocol}
        if served:
            details["served_models"] = served
        if upstream:
            details["upstream_providers"] = upstream
        version = served[0] if len(served) == 1 else None
        return backend_metadata(self.name, self.provider, self.model, version, details)

    def metadata_url(self) -> str:
        return super().metadata()["details"]["url"]

"""The ``openjev`` provider: open-jev's scoring server.

    POST <url>  {"context": <prompt>, "options": [<option shown>, ...], "norm": "mean" | "sum"
                 | "pmi", "chat": false, "sep": " "}
    200 OK      {"probability": [p1, p2, ...], "model"?: ...}   (in the order of "options")

The server scores each option as a continuation of the context (``mean``: per-token
average log-probability; ``sum``: total; ``pmi``: minus the option's unconditional
log-probability) and answers the softmax. ``url`` without a path means ``<url>/score``.
"""

from __future__ import annotations

from typing import Any, Literal, Self

import httpx
from pydantic import field_validator

from decguard_pipeline.backends.base import backend_settings
from decguard_pipeline.backends.engine import Call, EngineBackend, EngineSettings, Flow
from decguard_pipeline.backends.prompts import CONTINUATION_PROMPT, render
from decguard_pipeline.backends.transport import check_url
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.core.errors import InvalidResponse

DEFAULT_PATH = "/score"


class OpenJevSettings(EngineSettings):
    url: str
    norm: Literal["mean", "sum", "pmi"] = "mean"

    _url = field_validator("url")(check_url)

    @field_validator("url")
    @classmethod
    def _default_path(cls, value: str) -> str:
        url = httpx.URL(value)
        return str(url.copy_with(path=DEFAULT_PATH)) if url.path in ("", "/") else value

    @property
    def endpoint(self) -> str:
        return self.url


class OpenJevBackend(EngineBackend):
    provider = "openjev"
    protocol = "open-jev/score"
    settings: OpenJevSettings

    def __init__(self, settings: OpenJevSettings, *, name: str, model: str | None) -> None:
        super().__init__(settings, name=name, model=model)
        self.template = settings.prompt or CONTINUATION_PROMPT

    @classmethod
    def from_config(cls, config: BackendConfig, *, name: str, decision: DecisionSpec) -> Self:
        settings = backend_settings(OpenJevSettings, config, name=name)
        return cls(settings, name=name, model=config.model)

    def flow(self, request: DecisionRequest) -> Flow:
        shown = request.decision.labels
        payload = {
            "context": render(self.template, request.decision, request.input),
            "options": list(shown),
            "norm": self.settings.norm,
            "chat": False,
            "sep": " ",
        }
        answer = yield Call(self.settings.url, payload)
        probability = answer.get("probability")
        if not isinstance(probability, list):
            raise InvalidResponse(f"backend {self.name!r} response has no 'probability' list")
        if len(probability) != len(shown):
            raise InvalidResponse(
                f"backend {self.name!r} answered {len(probability)} probabilities for "
                f"{len(shown)} options"
            )
        # numbers, signs and the sum are checked with every other backend's answers
        return probability, {}

    def details(self) -> dict[str, Any]:
        return {"norm": self.settings.norm}

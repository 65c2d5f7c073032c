"""The ``mock`` provider: deterministic, offline answers for examples, tests and CI.

First matching substring rule, else the ``default`` distribution, else a seeded hash of the
input. ``position_bias`` moves that share of probability mass to the option shown first: a
deliberate defect that makes the model sensitive to option order.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, Self

from pydantic import Field

from decguard_pipeline.backends.base import Backend, backend_metadata, backend_settings, health
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import (
    DecisionInput,
    DecisionRequest,
    Prediction,
    validate_probabilities,
)
from decguard_pipeline.core.errors import ContractError, InvalidResponse
from decguard_pipeline.core.validation import Strict


class MockRule(Strict):
    contains: str = Field(min_length=1)  # matched ignoring case and whitespace differences
    probabilities: dict[str, float]


class MockSettings(Strict):
    rules: tuple[MockRule, ...] = ()
    default: dict[str, float] | None = None
    seed: int = 0
    model_version: str | None = None
    position_bias: float = Field(default=0.0, ge=0.0, le=1.0)


def input_text(value: DecisionInput) -> str:
    """The text rules match against: the string, or an object's canonical JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


_ENUMERATOR = re.compile(r"^(?:[A-Za-z]|\d{1,3})[).:]\s+")


def semantic_label(shown: str) -> str:
    """The label behind a surface form: ``B) Refund``, ``"refund"``, ``REFUND`` and
    ``[refund]`` all read as ``refund``."""
    return _ENUMERATOR.sub("", shown.strip()).strip("\"'[]").strip().casefold()


def hashed_distribution(text: str, meanings: tuple[str, ...], seed: int) -> list[float]:
    """A fixed pseudo-random distribution per (seed, text), stable across processes."""
    weights = [
        int.from_bytes(hashlib.sha256(f"{seed}\x1f{text}\x1f{m}".encode()).digest()[:8], "big")
        / 2**64
        + 1e-3
        for m in meanings
    ]
    total = math.fsum(weights)
    return [w / total for w in weights]


MATCHED_LIMIT = 1 << 16
_UNSEEN: Any = object()


class MockBackend(Backend):
    provider = "mock"
    inline = True

    def __init__(
        self, settings: MockSettings | None = None, *, name: str = "default", model: str = "mock"
    ) -> None:
        super().__init__(name=name, model=model)
        self.settings = settings or MockSettings()
        self._rules = [(normalise(r.contains), r.probabilities) for r in self.settings.rules]
        self._default = self.settings.default
        self._version = self.settings.model_version
        # Per presentation (the shown labels): each configured answer as a finished, shared
        # (read-only) prediction, keyed by the shown labels with position_bias applied, and
        # the label meanings the hash uses. A run asks the same few questions 100k times.
        self._answers: dict[tuple[int, tuple[str, ...]], Prediction] = {}
        self._meanings: dict[tuple[str, ...], tuple[str, ...]] = {}
        # The configured answer (None: hashed) of texts seen before, up to MATCHED_LIMIT of
        # them: a property run asks about each original text again for every option order,
        # label variant and identity paraphrase.
        self._matched: dict[str, dict[str, float] | None] = {}

    @classmethod
    def from_config(cls, config: BackendConfig, *, name: str, decision: DecisionSpec) -> Self:
        settings = backend_settings(MockSettings, config, name=name)
        answers = [(f"rules[{i}]", rule.probabilities) for i, rule in enumerate(settings.rules)]
        if settings.default is not None:
            answers.append(("default", settings.default))
        for where, probabilities in answers:
            try:
                validate_probabilities(decision.labels, probabilities)
            except InvalidResponse as exc:
                raise ContractError(f"mock backend {name!r}: {where}: {exc}") from exc
        return cls(settings, name=name, model=config.model or "mock")

    def predict(self, request: DecisionRequest) -> Prediction:
        text = input_text(request.input)
        shown = request.decision.labels
        answer = self._matched.get(text, _UNSEEN)
        if answer is _UNSEEN:
            answer = self._match(text)
            if len(self._matched) < MATCHED_LIMIT:
                self._matched[text] = answer
        if answer is not None:
            key = (id(answer), shown)
            shared = self._answers.get(key)
            if shared is None:
                mapped = self._biased(_map_to_shown(answer, shown), shown)
                shared = self._answers[key] = Prediction(mapped, None, self._version)
            return shared
        meanings = self._meanings.get(shown)
        if meanings is None:
            meanings = tuple(semantic_label(label) for label in shown)
            if len(set(meanings)) != len(meanings):
                meanings = shown
            self._meanings[shown] = meanings
        values = hashed_distribution(text, meanings, self.settings.seed)
        hashed = self._biased(dict(zip(shown, values, strict=True)), shown)
        return Prediction(hashed, None, self._version)

    def _match(self, text: str) -> dict[str, float] | None:
        """The first rule matching ``text`` (ignoring case and whitespace), else the
        default: None when neither applies (the answer is then hashed)."""
        folded = normalise(text)
        for contains, probabilities in self._rules:
            if contains in folded:
                return probabilities
        return self._default

    def _biased(self, probabilities: dict[str, float], shown: tuple[str, ...]) -> dict[str, Any]:
        bias = self.settings.position_bias
        if not bias or not shown or shown[0] not in probabilities:
            return probabilities
        first = shown[0]
        return {
            label: (1.0 - bias) * p + (bias if label == first else 0.0)
            for label, p in probabilities.items()
        }

    def metadata(self) -> dict[str, Any]:
        details: dict[str, Any] = {"rules": len(self.settings.rules), "seed": self.settings.seed}
        if self.settings.position_bias:
            details["position_bias"] = self.settings.position_bias
        return backend_metadata(
            self.name, self.provider, self.model, self.settings.model_version, details
        )

    def healthcheck(self) -> dict[str, str]:
        return health("ok", "mock backend")

    def version_hint(self) -> str | None:
        return self.settings.model_version


def _map_to_shown(answer: dict[str, float], shown: tuple[str, ...]) -> dict[str, float]:
    if set(answer) == set(shown):
        return dict(answer)
    by_meaning: dict[str, str] = {}
    for label in answer:
        by_meaning.setdefault(semantic_label(label), label)
    mapped: dict[str, float] = {}
    used: set[str] = set()
    for label in shown:
        source = label if label in answer else by_meaning.get(semantic_label(label))
        if source is None or source in used:
            return dict(answer)  # cannot map: answer as configured and let validation say why
        used.add(source)
        mapped[label] = answer[source]
    return mapped

"""The ``openai`` provider: any OpenAI-compatible server (OpenAI, Azure OpenAI, vLLM,
Ollama, llama.cpp's server, LM Studio), scored one of four ways (``scoring``):

- ``logprobs``: one chat completion of one token; the softmax over the option letters'
  log-probabilities among the first token's ``top_logprobs``.
- ``completion_logprobs``: one ``/completions`` request per case with one prompt per option
  (context + " " + option), echoed; each option's own tokens' log-probabilities, summed or
  averaged per token, softmaxed over the options (lm-evaluation-harness's method).
- ``structured``: a JSON-schema answer naming one option (one-hot: no calibrated
  distribution), optionally with a stated confidence.
- ``sample``: several completions at a temperature; the distribution is the frequency of
  each answered letter, optionally smoothed.

Letters follow the order the options are shown in, so properties that reorder or reformat
options (``option_order``, ``label_format``) work unchanged.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator

from decguard_pipeline.backends.base import backend_settings
from decguard_pipeline.backends.engine import (
    Call,
    EngineBackend,
    EngineSettings,
    Flow,
    RejectedRequest,
)
from decguard_pipeline.backends.prompts import (
    CONTINUATION_PROMPT,
    LETTER_PROMPT,
    STRUCTURED_CONFIDENCE,
    STRUCTURED_PROMPT,
    letters_for,
    render,
)
from decguard_pipeline.backends.scoring import (
    answered_letter,
    choice_schema,
    continuation_scores,
    first_token_alternatives,
    frequencies,
    letter_distribution,
    message_content,
    softmax,
    structured_distribution,
)
from decguard_pipeline.backends.transport import check_url
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.core.errors import ContractError, InvalidResponse

Scoring = Literal["logprobs", "completion_logprobs", "structured", "sample"]
CHAT_METHODS = ("logprobs", "structured", "sample")
# settings that mean something for some scoring methods only: setting one for another
# method is an error, not a silent no-op
ONLY_FOR: dict[str, tuple[str, ...]] = {
    "top_logprobs": ("logprobs",),
    "normalize": ("completion_logprobs",),
    "verbalized_confidence": ("structured",),
    "samples": ("sample",),
    "smoothing": ("sample",),
    "n_supported": ("sample",),
    "max_tokens": ("structured", "sample"),
    "system_prompt": CHAT_METHODS,
}
DEFAULT_MAX_TOKENS = {"structured": 100, "sample": 3}
# a server that ignores or refuses ``n`` is told by these statuses or by fewer choices
N_REFUSED = frozenset({400, 422})


class OpenAISettings(EngineSettings):
    base_url: str
    scoring: Scoring = "logprobs"
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_logprobs: int = Field(default=20, ge=1, le=20)
    normalize: Literal["mean", "sum"] = "mean"
    verbalized_confidence: bool = False
    samples: int = Field(default=10, ge=1, le=1000)
    smoothing: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    n_supported: bool | None = None  # None: find out from the first answers
    max_tokens: int | None = Field(default=None, ge=1, le=4096)
    system_prompt: str | None = None
    seed: int | None = None

    _base = field_validator("base_url")(check_url)

    @property
    def endpoint(self) -> str:
        return self.base_url

    @field_validator(*ONLY_FOR)
    @classmethod
    def _fits_the_method(cls, value: Any, info: ValidationInfo) -> Any:
        # runs only for settings given; ``scoring`` is declared first, so it is known here
        methods, scoring = ONLY_FOR[str(info.field_name)], info.data.get("scoring")
        if scoring is not None and scoring not in methods:
            raise ValueError(f"applies to scoring {' / '.join(methods)}, not {scoring}")
        return value

    def effective_temperature(self) -> float:
        if self.temperature is not None:
            return self.temperature
        return 1.0 if self.scoring == "sample" else 0.0

    def effective_max_tokens(self) -> int:
        return self.max_tokens or DEFAULT_MAX_TOKENS.get(self.scoring, 1)

    def default_prompt(self) -> str:
        if self.scoring == "completion_logprobs":
            return CONTINUATION_PROMPT
        if self.scoring == "structured":
            return STRUCTURED_CONFIDENCE if self.verbalized_confidence else STRUCTURED_PROMPT
        return LETTER_PROMPT


class OpenAIBackend(EngineBackend):
    provider = "openai"
    protocol = "openai-compatible"
    settings: OpenAISettings

    def __init__(
        self, settings: OpenAISettings, *, decision: DecisionSpec, name: str, model: str
    ) -> None:
        super().__init__(settings, name=name, model=model)
        self.template = settings.prompt or settings.default_prompt()
        base = settings.base_url.rstrip("/")
        self.chat_url, self.completions_url = f"{base}/chat/completions", f"{base}/completions"
        self.temperature = settings.effective_temperature()
        self.max_tokens = settings.effective_max_tokens()
        self.n_supported = settings.n_supported
        self.completion_allowance = {
            "logprobs": 1,
            "completion_logprobs": len(decision.labels),
            "structured": self.max_tokens,
            "sample": self.max_tokens * settings.samples,
        }[settings.scoring]

    @classmethod
    def from_config(cls, config: BackendConfig, *, name: str, decision: DecisionSpec) -> Self:
        settings = backend_settings(OpenAISettings, config, name=name)
        if not config.model:
            raise ContractError(f"openai backend {name!r}: 'model' is required")
        if settings.scoring in ("logprobs", "sample"):
            try:
                letters_for(decision.labels)
            except ValueError as exc:
                raise ContractError(f"openai backend {name!r}: {exc}") from exc
        return cls(settings, decision=decision, name=name, model=config.model)

    # -- requests ---------------------------------------------------------------------------

    def messages(self, request: DecisionRequest) -> list[dict[str, str]]:
        prompt = render(self.template, request.decision, request.input)
        system = self.settings.system_prompt
        user = [{"role": "user", "content": prompt}]
        return [{"role": "system", "content": system}, *user] if system else user

    def chat(self, request: DecisionRequest, **extra: Any) -> dict[str, Any]:
        payload = {
            "model": self.model,
            "messages": self.messages(request),
            "temperature": self.temperature,
            **extra,
        }
        if self.settings.seed is not None:
            payload["seed"] = self.settings.seed
        return payload

    def flow(self, request: DecisionRequest) -> Flow:
        return {
            "logprobs": self.by_logprobs,
            "completion_logprobs": self.by_completion,
            "structured": self.by_structure,
            "sample": self.by_sampling,
        }[self.settings.scoring](request)

    # -- the four scoring methods --------------------------------------------------------------

    def by_logprobs(self, request: DecisionRequest) -> Flow:
        letters = letters_for(request.decision.labels)
        payload = self.chat(
            request, max_tokens=1, logprobs=True, top_logprobs=self.settings.top_logprobs
        )
        answer = yield Call(self.chat_url, payload)
        return letter_distribution(first_token_alternatives(answer), letters), {}

    def by_completion(self, request: DecisionRequest) -> Flow:
        context = render(self.template, request.decision, request.input)
        prompts = [f"{context} {label}" for label in request.decision.labels]
        # max_tokens 1, not 0: some servers refuse 0; the generated token lies past the
        # prompt's end and is dropped by its text_offset
        payload = {
            "model": self.model,
            "prompt": prompts,
            "echo": True,
            "logprobs": 1,
            "max_tokens": 1,
            "temperature": self.temperature,
        }
        answer = yield Call(self.completions_url, payload)
        scores = continuation_scores(answer, prompts, len(context), self.settings.normalize)
        return softmax(scores), {}

    def by_structure(self, request: DecisionRequest) -> Flow:
        shown = request.decision.labels
        verbalized = self.settings.verbalized_confidence
        schema = {"name": "decision", "strict": True, "schema": choice_schema(shown, verbalized)}
        payload = self.chat(
            request,
            max_tokens=self.max_tokens,
            response_format={"type": "json_schema", "json_schema": schema},
        )
        answer = yield Call(self.chat_url, payload)
        return structured_distribution(message_content(answer), shown, verbalized), {}

    def by_sampling(self, request: DecisionRequest) -> Flow:
        letters = letters_for(request.decision.labels)
        wanted = self.settings.samples
        counts, unparsed, got = [0] * len(letters), 0, 0
        while got < wanted:
            ask = wanted - got if self.n_supported is not False else 1
            extra: dict[str, Any] = {"max_tokens": self.max_tokens}
            if ask > 1:
                extra["n"] = ask
            try:
                answer = yield Call(self.chat_url, self.chat(request, **extra))
            except RejectedRequest as exc:
                if ask > 1 and self.n_supported is None and exc.status in N_REFUSED:
                    self.n_supported = False  # ask one sample per request from now on
                    continue
                raise
            choices = answer.get("choices")
            if not isinstance(choices, list) or not choices:
                raise InvalidResponse(f"backend {self.name!r} answered no choices")
            if ask > 1 and self.n_supported is None:
                self.n_supported = len(choices) >= ask
            for i in range(min(len(choices), wanted - got)):
                try:
                    letter = answered_letter(message_content(answer, i), letters)
                except InvalidResponse:
                    letter = None
                if letter is None:
                    unparsed += 1
                else:
                    counts[letter] += 1
                got += 1
        if unparsed == wanted:
            raise InvalidResponse(f"none of {wanted} samples named an option letter")
        metadata = {"unparsed_samples": unparsed} if unparsed else {}
        return frequencies(counts, self.settings.smoothing), metadata

    # -- health and provenance ------------------------------------------------------------------

    def default_health_url(self) -> str:
        return f"{self.settings.base_url.rstrip('/')}/models"

    def details(self) -> dict[str, Any]:
        settings = self.settings
        details: dict[str, Any] = {"scoring": settings.scoring, "temperature": self.temperature}
        if settings.scoring == "completion_logprobs":
            details["normalize"] = settings.normalize
        if settings.scoring == "structured":
            details["verbalized_confidence"] = settings.verbalized_confidence
        if settings.scoring == "sample":
            details["samples"] = settings.samples
            details["smoothing"] = settings.smoothing
        return details

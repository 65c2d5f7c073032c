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

What a server does not support is found from its first refusal, not assumed
(``capabilities.py``): a list of prompts falls back to one prompt per request, a
``json_schema`` response format to ``json_object`` with a schema and then to a GBNF grammar,
``n`` to one sample per request (each with its own seed). The model served is identified
beyond its echoed name with ``version_from: server | probe`` (``identity.py``).

The two log-likelihood methods also put what the distribution is the softmax of into each
result's metadata as ``logprobs`` (one number per option, in the order shown; null for a
letter absent from ``top_logprobs``): the logits a calibrator is fitted on
(``core/calibration/logits.py``).
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from decguard_pipeline.backends.base import backend_settings
from decguard_pipeline.backends.capabilities import (
    FORMAT_SHAPES,
    STRUCTURED_FORMATS,
    VERBALIZED_FORMATS,
    Capabilities,
)
from decguard_pipeline.backends.engine import (
    SHAPE_REFUSALS,
    Call,
    EngineBackend,
    EngineSettings,
    Flow,
    RejectedRequest,
)
from decguard_pipeline.backends.grammar import decision_grammar
from decguard_pipeline.backends.identity import (
    PROBE_INPUTS,
    join,
    probe_identity,
    server_identity,
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
    letter_scores,
    message_content,
    softmax,
    structured_distribution,
)
from decguard_pipeline.backends.transport import Reply, check_url
from decguard_pipeline.core.calibration.logits import KEY as LOGPROBS
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.core.engine_notes import ALIAS_PREFIX
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
    "structured_format": ("structured",),
    "system_prompt": CHAT_METHODS,
}
DEFAULT_MAX_TOKENS = {"structured": 100, "sample": 3}
# the model version is only the name asked for: the server echoes it back
ALIAS_ONLY = f"{ALIAS_PREFIX} (the server echoes it: a model swapped under it is not noticed)"
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
    structured_format: Literal["auto", "json_schema", "json_object", "grammar"] = "auto"
    # beyond EngineSettings' model / model+fingerprint: what the server says it loaded, or a
    # digest of the answers to fixed probe inputs (identity.py)
    version_from: Literal["model", "model+fingerprint", "server", "probe"] = "model"
    probe_inputs: list[str] = Field(default=list(PROBE_INPUTS), min_length=1, max_length=20)

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

    @model_validator(mode="after")
    def _probe_is_repeatable(self) -> OpenAISettings:
        if "probe_inputs" in self.model_fields_set and self.version_from != "probe":
            raise ValueError("probe_inputs applies to version_from probe")
        if self.version_from == "probe" and self.scoring == "sample" and self.seed is None:
            raise ValueError(
                "version_from probe with scoring sample needs a seed: unseeded samples "
                "differ from one probe to the next"
            )
        return self

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
        self.decision = decision
        self.template = settings.prompt or settings.default_prompt()
        base = settings.base_url
        self.chat_url, self.completions_url = (
            join(base, "chat/completions"),
            join(base, "completions"),
        )
        self.temperature = settings.effective_temperature()
        self.max_tokens = settings.effective_max_tokens()
        explicit = None if settings.structured_format == "auto" else settings.structured_format
        self.capabilities = Capabilities(n=settings.n_supported, structured_format=explicit)
        self.identity_source: str | None = None  # where the identity was read (details)
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

    def chat(
        self, request: DecisionRequest, *, seed: int | None = None, **extra: Any
    ) -> dict[str, Any]:
        payload = {
            "model": self.model,
            "messages": self.messages(request),
            "temperature": self.temperature,
            **extra,
        }
        seed = self.settings.seed if seed is None else seed
        if seed is not None:
            payload["seed"] = seed
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
        distribution, logprobs = letter_scores(first_token_alternatives(answer), letters)
        return distribution, {LOGPROBS: logprobs}

    def completion_payload(self, prompt: str | list[str]) -> dict[str, Any]:
        # max_tokens 1, not 0: some servers refuse 0; the generated token lies past the
        # prompt's end and is dropped by its text_offset
        return {
            "model": self.model,
            "prompt": prompt,
            "echo": True,
            "logprobs": 1,
            "max_tokens": 1,
            "temperature": self.temperature,
        }

    def by_completion(self, request: DecisionRequest) -> Flow:
        context = render(self.template, request.decision, request.input)
        prompts = [f"{context} {label}" for label in request.decision.labels]
        known = self.capabilities.prompt_lists
        if known is not False:
            shape = f"{len(prompts)} prompts in one /completions request"
            call = Call(
                self.completions_url, self.completion_payload(prompts), shape, known is None
            )
            try:
                answer = yield call
            except RejectedRequest as exc:
                if not call.probing or exc.status not in SHAPE_REFUSALS:
                    raise
                refusal = f"HTTP {exc.status}"
            else:
                choices = answer.get("choices")
                got = len(choices) if isinstance(choices, list) else 0
                # one choice for several prompts: the server read the first prompt only
                if not (call.probing and got == 1 < len(prompts)):
                    scores = continuation_scores(
                        answer, prompts, len(context), self.settings.normalize
                    )
                    self.capabilities.learn("prompt_lists", True)
                    return softmax(scores), {LOGPROBS: scores}
                refusal = "it answered the first prompt only"
            self.capabilities.learn(
                "prompt_lists",
                False,
                f"completion_logprobs: one prompt per request (the server refused {shape}: "
                f"{refusal})",
            )
        choices = []
        for i, prompt in enumerate(prompts):
            answer = yield Call(
                self.completions_url,
                self.completion_payload(prompt),
                "one prompt per /completions request",
            )
            choices.append({**_only_choice(answer), "index": i})
        scores = continuation_scores(
            {"choices": choices}, prompts, len(context), self.settings.normalize
        )
        return softmax(scores), {LOGPROBS: scores}

    def structured_fields(self, fmt: str, shown: tuple[str, ...]) -> dict[str, Any]:
        """The request fields that ask for a structured answer in format ``fmt``."""
        verbalized = self.settings.verbalized_confidence
        schema = choice_schema(shown, verbalized)
        if fmt == "json_schema":
            named = {"name": "decision", "strict": True, "schema": schema}
            return {"response_format": {"type": "json_schema", "json_schema": named}}
        if fmt == "json_object":
            return {"response_format": {"type": "json_object", "schema": schema}}
        return {"grammar": decision_grammar(shown, verbalized)}

    def by_structure(self, request: DecisionRequest) -> Flow:
        shown = request.decision.labels
        known = self.capabilities.structured_format
        order = VERBALIZED_FORMATS if self.settings.verbalized_confidence else STRUCTURED_FORMATS
        formats = [known] if known is not None else list(order)
        refused: list[str] = []
        for fmt in formats:
            probing = known is None and fmt != formats[-1]  # the last one is simply asked
            payload = self.chat(
                request, max_tokens=self.max_tokens, **self.structured_fields(fmt, shown)
            )
            try:
                answer = yield Call(self.chat_url, payload, FORMAT_SHAPES[fmt], probing)
            except RejectedRequest as exc:
                if probing and exc.status in SHAPE_REFUSALS:
                    refused.append(f"{FORMAT_SHAPES[fmt]} (HTTP {exc.status})")
                    continue
                if refused and exc.shape is not None:  # say every shape tried
                    tried = ", ".join([*refused, f"{exc.shape} (HTTP {exc.status})"])
                    raise RejectedRequest(
                        f"backend {self.name!r} refused every structured format: {tried}",
                        exc.status,
                        exc.shape,
                    ) from exc
                raise
            note = None
            if refused:
                note = f"structured: {FORMAT_SHAPES[fmt]} (the server refused {', '.join(refused)})"
            self.capabilities.learn("structured_format", fmt, note)
            verbalized = self.settings.verbalized_confidence
            return structured_distribution(message_content(answer), shown, verbalized), {}
        raise AssertionError("unreachable")

    def by_sampling(self, request: DecisionRequest) -> Flow:
        letters = letters_for(request.decision.labels)
        wanted = self.settings.samples
        counts, unparsed, got = [0] * len(letters), 0, 0
        capabilities = self.capabilities
        while got < wanted:
            probing = capabilities.n is None  # as it was when this request left
            ask = wanted - got if capabilities.n is not False else 1
            extra: dict[str, Any] = {"max_tokens": self.max_tokens}
            if ask > 1:
                extra["n"] = ask
            # one request per sample: sample i gets seed + i, so the samples differ (the
            # same seed in every request makes a seeded server answer the same each time)
            seed = None if self.settings.seed is None or ask > 1 else self.settings.seed + got
            try:
                answer = yield Call(self.chat_url, self.chat(request, seed=seed, **extra))
            except RejectedRequest as exc:
                if ask > 1 and probing and exc.status in N_REFUSED:
                    capabilities.learn(
                        "n",
                        False,
                        f"sample: one request per sample (the server refused n: HTTP {exc.status})",
                    )
                    continue
                raise
            choices = answer.get("choices")
            if not isinstance(choices, list) or not choices:
                raise InvalidResponse(f"backend {self.name!r} answered no choices")
            if ask > 1 and probing:
                if len(choices) >= ask:
                    capabilities.learn("n", True)
                else:
                    capabilities.learn(
                        "n",
                        False,
                        f"sample: one request per sample (the server answered "
                        f"{len(choices)} choice(s) for n={ask})",
                    )
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

    # -- model identity ---------------------------------------------------------------------------

    def get(self, url: str) -> Reply:
        """``GET url`` with the backend's headers (its body read when 2xx)."""
        return self._send_sync("GET", url)

    def identify(self) -> str | None:
        mode = self.settings.version_from
        if mode == "server":
            found = server_identity(self)
            if found is None:
                self.identity_source = "the server publishes no model metadata"
                return None
            identity, self.identity_source = found
            return identity
        if mode == "probe":
            inputs = tuple(self.settings.probe_inputs)
            identity = probe_identity(self, inputs)
            self.identity_source = f"probe ({len(inputs)} fixed inputs)"
            return identity
        return None

    # -- health and provenance ------------------------------------------------------------------

    def default_health_url(self) -> str:
        return join(self.settings.base_url, "models")

    def details(self) -> dict[str, Any]:
        settings = self.settings
        details: dict[str, Any] = {"scoring": settings.scoring, "temperature": self.temperature}
        if settings.scoring == "completion_logprobs":
            details["normalize"] = settings.normalize
        if settings.scoring == "structured":
            details["verbalized_confidence"] = settings.verbalized_confidence
            if self.capabilities.structured_format is not None:
                details["structured_format"] = self.capabilities.structured_format
        if settings.scoring == "sample":
            details["samples"] = settings.samples
            details["smoothing"] = settings.smoothing
        fallbacks = self.capabilities.fallbacks()
        if fallbacks:
            details["fallbacks"] = fallbacks
        details["model_version_from"] = self.version_origin()
        return details

    def version_origin(self) -> str:
        """What the model version rests on, in words (the report's backend details)."""
        if self._identity is not None:
            where = str(self.identity_source)
            return f"server: {where}" if self.settings.version_from == "server" else where
        served = self._served.sorted()
        if served and all(v.split("+", 1)[0] == self.model for v in served):
            if self.identity_source is not None:  # version_from: server found nothing
                return f"{ALIAS_ONLY}; {self.identity_source}"
            return ALIAS_ONLY
        return "the answer's model"

    def run_stats(self) -> dict[str, Any]:
        stats = super().run_stats()
        fallbacks = self.capabilities.fallbacks()
        return {**stats, "fallbacks": fallbacks} if fallbacks else stats


def _only_choice(answer: dict[str, Any]) -> dict[str, Any]:
    """The one choice of an answer to a single prompt."""
    choices = answer.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        got = len(choices) if isinstance(choices, list) else 0
        raise InvalidResponse(f"expected 1 choice for one prompt, got {got}")
    return choices[0]

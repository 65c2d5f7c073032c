"""The demo server as the servers teams run, one path prefix each: the same deterministic
ticket models (``llm_server.belief``) behind each server's documented request checks,
refusals and answer shapes, so the ``openai`` provider can be tested against all of them on
loopback. What each does, and where it is documented:

``/vllm/v1``
    vLLM's OpenAI server: everything the provider asks (prompt lists with ``echo``,
    ``json_schema``, ``n``, ``logprobs``); answers name the served model as asked;
    ``GET /v1/models`` gives each card's ``root``, the weights behind the served name
    (vllm/entrypoints/openai/serving_models.py, ``show_available_models``).
``/llama-cpp-python/v1``
    llama-cpp-python's server (llama_cpp/server/app.py, types.py): a ``/completions`` prompt
    list longer than one fails ``assert len(body.prompt) <= 1`` (HTTP 500, empty message);
    ``response_format`` is ``text`` or ``json_object`` with an optional ``schema`` (a
    ``json_schema`` type fails request validation, which its error handler answers with
    500); ``grammar`` (GBNF) is accepted; ``n`` is dropped (one choice); a ``seed`` makes
    the sample repeat; answers echo the model name asked; ``/v1/models`` lists its one model
    under its alias and any name asked is answered by it.
``/llama-server/v1`` (root ``/llama-server``)
    llama.cpp's own server (tools/server README, server-common.cpp): ``echo`` on
    ``/completions`` is refused ("Only no echo is supported", 400) and so is ``n`` other than
    1 ("Only one completion choice is allowed", 400); ``response_format`` ``json_schema`` or
    ``json_object`` with a ``schema``, and ``grammar``; ``GET /props`` has ``model_path``.
``/ollama/v1`` (root ``/ollama``)
    Ollama's OpenAI endpoint (openai/openai.go, docs/api/openai-compatibility.mdx): a
    ``/completions`` prompt must be a string (a list: 400, Go's unmarshal error) and has no
    ``echo``; ``n`` is not read (one choice); ``json_object`` becomes plain JSON mode (the
    schema is dropped), ``json_schema`` is honoured; answers echo the model name asked;
    ``GET /api/tags`` lists each model with its ``digest`` (docs/api.md).
``/azure/openai/deployments/<deployment>`` (and ``/azure/openai/models``)
    Azure OpenAI (REST reference): the deployment in the URL chooses the model (the body's
    ``model`` is ignored), ``api-version`` is required in the query (404 without), the key
    comes in the ``api-key`` header (401 without); a chat model's deployment refuses
    ``/completions`` (400, OperationNotSupported).
``/lmstudio/v1``
    LM Studio's OpenAI endpoints: ``json_schema`` structured output (its structured-output
    docs); ``logprobs`` answered as ``null`` (stubbed); ``n`` not honoured; ``/completions``
    answers the text without prompt log-probabilities.

A model can be swapped under its name (:meth:`Served.swap`): the name asked stays what the
echoing servers answer, while vLLM's ``root``, llama.cpp's ``model_path`` and Ollama's
``digest`` change, as they do when a server is restarted on other weights.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

AZURE_KEY_ENV = "DECGUARD_DEMO_AZURE_KEY"  # the key the Azure flavour expects, when set
AZURE_DEPLOYMENTS = {"tickets": "tickets-calibrated"}  # deployment -> model behind it
_CHOICE_RULE = re.compile(r"^choice ::= (.*)$", re.M)
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class Refusal(Exception):
    """A server refusing a request: status and the body it documents."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.status, self.body = status, body


@dataclass
class Served:
    """Which model answers under which name (a swap keeps the name), and the draws of
    unseeded samples (a server's own random state moves on with every request)."""

    swapped: dict[str, str] = field(default_factory=dict)
    draws: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def swap(self, name: str, model: str) -> None:
        """Serve ``model`` under ``name`` from now on."""
        self.swapped[name] = model

    def actual(self, name: str) -> str:
        return self.swapped.get(name, name)

    def next_draw(self) -> int:
        with self.lock:
            self.draws += 1
            return self.draws


def weights_of(model: str) -> str:
    """Where a model's weights lie (what vLLM's root and llama.cpp's model_path say)."""
    return f"/models/{model}.gguf"


def digest_of(model: str) -> str:
    return hashlib.sha256(f"weights of {model}".encode()).hexdigest()


def _openai_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def grammar_schema(grammar: str) -> dict[str, Any]:
    """The answer a GBNF grammar of ``backends.grammar`` admits, as the JSON schema the demo
    models answer (the demo has no grammar engine: it reads the choice rule back)."""
    import json

    found = _CHOICE_RULE.search(grammar)
    literals = _LITERAL.findall(found.group(1)) if found else []
    # each literal is a JSON string in GBNF quotes: undo GBNF's escapes, then JSON's
    options = [json.loads(re.sub(r"\\(.)", r"\1", lit)) for lit in literals]
    properties: dict[str, Any] = {"choice": {"type": "string", "enum": options}}
    if "confidence ::=" in grammar:
        properties["confidence"] = {"type": "number", "minimum": 0, "maximum": 1}
    return {"type": "object", "properties": properties}


class Flavours:
    """The flavoured routes of one demo server."""

    def __init__(self, served: Served, chat: Handler, completions: Handler) -> None:
        self.served, self._chat, self._completions = served, chat, completions

    # -- shared pieces ---------------------------------------------------------------------

    def answer_as(self, handler: Handler, body: dict[str, Any], name: str) -> dict[str, Any]:
        """``handler``'s answer by the model served under ``name``, naming ``name``."""
        answer = handler({**body, "model": self.served.actual(name)})
        return {**answer, "model": name}

    def _unseeded(self, body: dict[str, Any]) -> dict[str, Any]:
        """A server whose own random state moves on: an unseeded sample draws anew."""
        if body.get("seed") is None and not body.get("logprobs"):
            return {**body, "seed": f"draw-{self.served.next_draw()}"}
        return body

    # -- llama-cpp-python ------------------------------------------------------------------------

    def llama_cpp_python_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        response_format = body.get("response_format") or {}
        kind = response_format.get("type", "text")
        if kind not in ("text", "json_object"):
            raise Refusal(
                500,
                _openai_error(
                    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
                    "  Input should be 'text' or 'json_object'",
                    "internal_server_error",
                ),
            )
        body = {k: v for k, v in body.items() if k != "n"}  # n is dropped
        if kind == "json_object" and "schema" in response_format:
            body["response_format"] = {"json_schema": {"schema": response_format["schema"]}}
        elif "grammar" in body:
            body["response_format"] = {"json_schema": {"schema": grammar_schema(body["grammar"])}}
        return self.answer_as(self._chat, self._unseeded(body), str(body.get("model", "")))

    def llama_cpp_python_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            if len(prompt) > 1:  # assert len(body.prompt) <= 1
                raise Refusal(500, _openai_error("", "internal_server_error"))
            prompt = prompt[0] if prompt else ""
        answer = self.answer_as(self._completions, {**body, "prompt": prompt}, str(body["model"]))
        for choice in answer["choices"]:
            choice["logprobs"] = _sentencepiece(choice["logprobs"])
        return answer

    # -- llama.cpp's server -------------------------------------------------------------------

    def llama_server_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        if int(body.get("n") or 1) != 1:
            raise Refusal(400, _llama_error("Only one completion choice is allowed"))
        response_format = dict(body.get("response_format") or {})
        if response_format.get("type") == "json_object" and "schema" in response_format:
            body = {
                **body,
                "response_format": {"json_schema": {"schema": response_format["schema"]}},
            }
        elif "grammar" in body:
            body = {
                **body,
                "response_format": {"json_schema": {"schema": grammar_schema(body["grammar"])}},
            }
        return self.answer_as(self._chat, self._unseeded(body), str(body.get("model", "")))

    def llama_server_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("echo"):
            raise Refusal(400, _llama_error("Only no echo is supported"))
        return self.answer_as(self._completions, body, str(body.get("model", "")))

    def llama_server_props(self, name: str) -> dict[str, Any]:
        return {
            "default_generation_settings": {"n_ctx": 4096},
            "total_slots": 1,
            "model_path": weights_of(self.served.actual(name)),
            "build_info": "b0-demo",
        }

    # -- Ollama ---------------------------------------------------------------------------------

    def ollama_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        body = {k: v for k, v in body.items() if k != "n"}
        response_format = body.get("response_format") or {}
        if response_format.get("type") == "json_object":  # plain JSON mode: no schema
            body["response_format"] = None
            answer = self.answer_as(self._chat, self._unseeded(body), str(body["model"]))
            for choice in answer["choices"]:  # JSON, but not the one asked for
                choice["message"]["content"] = '{"answer": "' + choice["message"]["content"] + '"}'
            return answer
        return self.answer_as(self._chat, self._unseeded(body), str(body.get("model", "")))

    def ollama_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(body.get("prompt"), str):
            raise Refusal(
                400,
                _openai_error(
                    "json: cannot unmarshal array into Go struct field "
                    "CompletionRequest.prompt of type string"
                ),
            )
        answer = self.answer_as(self._completions, body, str(body["model"]))
        for choice in answer["choices"]:  # no echo: the generated text, no prompt logprobs
            choice["text"] = " The"
            choice["logprobs"] = None
        return answer

    def ollama_tags(self, names: list[str]) -> dict[str, Any]:
        return {
            "models": [
                {
                    "name": f"{name}:latest",
                    "model": f"{name}:latest",
                    "digest": digest_of(self.served.actual(name)),
                    "details": {"format": "gguf"},
                }
                for name in names
            ]
        }

    # -- LM Studio ------------------------------------------------------------------------------

    def lmstudio_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        body = {k: v for k, v in body.items() if k != "n"}
        answer = self.answer_as(self._chat, self._unseeded(body), str(body.get("model", "")))
        for choice in answer["choices"]:
            choice["logprobs"] = None  # stubbed
        return answer

    def lmstudio_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        first = prompt[0] if isinstance(prompt, list) and prompt else prompt
        answer = self.answer_as(self._completions, {**body, "prompt": first}, str(body["model"]))
        for choice in answer["choices"]:
            choice["logprobs"] = None
        return answer

    # -- Azure OpenAI -----------------------------------------------------------------------------

    def azure(self, request: web.Request, body: dict[str, Any], operation: str) -> dict[str, Any]:
        import os

        expected = os.environ.get(AZURE_KEY_ENV)
        if expected is not None and request.headers.get("api-key") != expected:
            raise Refusal(
                401,
                {
                    "error": {
                        "code": "401",
                        "message": "Access denied due to invalid subscription key or wrong API "
                        "endpoint. Make sure to provide a valid key for an active "
                        "subscription and use a correct regional API endpoint for your "
                        "resource.",
                    }
                },
            )
        deployment = request.match_info["deployment"]
        if "api-version" not in request.query or deployment not in AZURE_DEPLOYMENTS:
            raise Refusal(404, {"error": {"code": "404", "message": "Resource not found"}})
        model = AZURE_DEPLOYMENTS[deployment]
        if operation == "completions":
            raise Refusal(
                400,
                {
                    "error": {
                        "code": "OperationNotSupported",
                        "message": "The completion operation does not work with the specified "
                        f"model, {model}. Please choose different model and try again.",
                    }
                },
            )
        return self._chat({**body, "model": self.served.actual(model)})


def _sentencepiece(logprobs: dict[str, Any]) -> dict[str, Any]:
    """Echoed tokens as SentencePiece spells them: a dummy space before the first one (every
    ``text_offset`` after it counts that space) and a final ``:`` as a token of its own."""
    tokens, values, offsets = [], [], []
    for token, value, at in zip(
        logprobs["tokens"], logprobs["token_logprobs"], logprobs["text_offset"], strict=True
    ):
        if len(token) > 1 and token.endswith(":"):
            tokens += [token[:-1], ":"]
            values += [value, value]
            offsets += [at, at + len(token) - 1]
        else:
            tokens.append(token)
            values.append(value)
            offsets.append(at)
    tokens[0] = " " + tokens[0]
    offsets = [0] + [at + 1 for at in offsets[1:]]
    return {**logprobs, "tokens": tokens, "token_logprobs": values, "text_offset": offsets}


def _llama_error(message: str) -> dict[str, Any]:
    return {"error": {"code": 400, "message": message, "type": "invalid_request_error"}}

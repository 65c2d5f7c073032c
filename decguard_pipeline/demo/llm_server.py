"""A deterministic stand-in for a language-model server, for examples and ``make run``:
it speaks the OpenAI API (chat completions with ``logprobs``/``top_logprobs``, ``n``
sampling and ``json_schema`` output; completions with ``echo`` and ``text_offset``;
``GET /models``) and open-jev's ``POST /score``, on loopback, with no model and no network.

It routes support tickets: billing / technical / sales. The evidence is keyword counts in
the prompt (the option lines excluded); each model turns it into a distribution with its
own temperature, so the models differ exactly in calibration:

    model                   logit per keyword   what it shows
    tickets-calibrated      2.0                 the reference behaviour (see ``belief``)
    tickets-overconfident   6.0                 near-certain even on ambiguous tickets
    tickets-underconfident  0.7                 hedges even on clear tickets
    tickets-onehot          40.0                all mass on one option (a structured-output
                                                decider that states confidence 1.0)

A clear ticket has keywords of one topic, an ambiguous one of two. Datasets built for the
demo draw each ticket's label from :func:`belief` of ``tickets-calibrated``, which makes
that model calibrated by construction. Unknown model names behave as calibrated.

open-jev's ``/score`` answers with the model named in the request body, else with the one
named in the path (``POST /tickets-underconfident/score``: one server stands in for several
open-jev servers), else with ``tickets-calibrated``.

Under path prefixes the same models answer as vLLM, llama-cpp-python's server, llama.cpp's
server, Ollama, Azure OpenAI and LM Studio do, each with its documented refusals and answer
shapes (``flavours.py``); ``server.served.swap(name, model)`` serves another model under a
name, as a restarted server does.

    with serve_demo() as server:  server.base_url  # http://127.0.0.1:<port>/v1
    python -m decguard_pipeline.demo.llm_server [--port 18451] [--delay-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import random
import re
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from decguard_pipeline.demo.flavours import (
    AZURE_DEPLOYMENTS,
    Flavours,
    Refusal,
    Served,
    weights_of,
)
from decguard_pipeline.demo.threaded import serve_in_thread

TOPICS: dict[str, tuple[str, ...]] = {
    "billing": ("invoice", "refund", "charged", "payment", "receipt", "subscription fee"),
    "technical": ("error", "crash", "login", "password", "bug", "install", "slow"),
    "sales": ("pricing", "quote", "discount", "demo", "upgrade", "licence", "seats"),
}
MODELS: dict[str, float] = {
    "tickets-calibrated": 2.0,
    "tickets-overconfident": 6.0,
    "tickets-underconfident": 0.7,
    "tickets-onehot": 40.0,
}
# the port the bundled contracts name when $DECGUARD_DEMO_LLM_URL is unset (demo/autostart.py)
DEMO_PORT = 18451
SNAPSHOT = "2026-01-15"  # what the ``model`` field of an answer adds to the alias
FINGERPRINT = "fp_demo_1"
_OPTION_LINE = re.compile(r"^([A-Z])\) (.+)$", re.M)
_LISTED = re.compile(r"^Options: (.+)$", re.M)  # the continuation prompt's option list
ANSWER_CUE = "\nAnswer:"
_TOKEN = re.compile(r"\s*\S+|\s+")
LETTER_SPLIT = 0.7  # share of a letter's mass on "A"; the rest on " A" (clients must add)
FILLER = 0.02  # mass on tokens that are no letter


def topic_of(shown: str) -> str | None:
    """The topic an option names, whatever its surface form (``B) Billing``)."""
    folded = shown.casefold()
    return next((topic for topic in TOPICS if topic in folded), None)


def evidence(text: str) -> dict[str, int]:
    """Keyword hits per topic in ``text`` (case-insensitive)."""
    folded = text.casefold()
    return {topic: sum(folded.count(word) for word in words) for topic, words in TOPICS.items()}


def belief(text: str, options: list[str], model: str = "tickets-calibrated") -> list[float]:
    """The model's distribution over ``options`` (as shown) for a ticket's text."""
    weight = MODELS.get(model, MODELS["tickets-calibrated"])
    hits = evidence(text)
    logits = [weight * hits.get(topic_of(o) or "", 0) for o in options]
    top = max(logits)
    mass = [math.exp(v - top) for v in logits]
    return [m / math.fsum(mass) for m in mass]


def _seed(*parts: Any) -> random.Random:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


@dataclass
class Prompt:
    """A chat prompt read back: its lettered options and the text around them."""

    text: str
    letters: list[str]
    options: list[str]

    @classmethod
    def read(cls, body: dict[str, Any]) -> Prompt:
        messages = body.get("messages") or []
        text = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        found = _OPTION_LINE.findall(text)
        return cls(_OPTION_LINE.sub("", text), [f[0] for f in found], [f[1] for f in found])


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _answer(model: str, choices: list[dict[str, Any]], usage: dict[str, int]) -> dict[str, Any]:
    known = model in MODELS
    return {
        "id": "demo-" + hashlib.sha256(json.dumps(choices).encode()).hexdigest()[:12],
        "object": "chat.completion",
        "model": f"{model}-{SNAPSHOT}" if known else model,
        "system_fingerprint": FINGERPRINT,
        "choices": choices,
        "usage": usage,
    }


def chat(body: dict[str, Any]) -> dict[str, Any]:
    model = str(body.get("model", ""))
    prompt = Prompt.read(body)
    probs = belief(prompt.text, prompt.options, model) if prompt.options else []
    used = len(_tokens(prompt.text))
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
    if schema is not None:
        return _structured(model, prompt, probs, schema, used)
    n = int(body.get("n") or 1)
    if body.get("logprobs"):
        content, first = _first_token(prompt, probs, int(body.get("top_logprobs") or 0))
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "length",
            "logprobs": {"content": [first]},
        }
        return _answer(model, [choice], _usage(used, 1))
    rng = _seed(model, prompt.text, prompt.options, body.get("seed"), n)
    letters = prompt.letters or ["?"]
    weights = probs or [1.0]
    answers = rng.choices(letters, weights=weights, k=n)
    choices = [
        {"index": i, "message": {"role": "assistant", "content": a}, "finish_reason": "stop"}
        for i, a in enumerate(answers)
    ]
    return _answer(model, choices, _usage(used, n))


def _first_token(prompt: Prompt, probs: list[float], top: int) -> tuple[str, dict[str, Any]]:
    """The first generated token and its alternatives: each letter split over two tokens
    (``A``, `` A``), a little mass on words that are no letter."""
    alternatives: list[tuple[str, float]] = []
    for letter, p in zip(prompt.letters, probs, strict=True):
        for token, share in ((letter, LETTER_SPLIT), (f" {letter}", 1.0 - LETTER_SPLIT)):
            mass = p * share * (1.0 - FILLER)
            alternatives.append((token, math.log(mass) if mass > 0 else -9999.0))
    alternatives += [("The", math.log(FILLER * 0.6)), ("I", math.log(FILLER * 0.4))]
    alternatives.sort(key=lambda pair: -pair[1])
    chosen = alternatives[0]
    entries = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alternatives]
    return chosen[0], {**entries[0], "top_logprobs": entries[: max(top, 0)]}


def _structured(
    model: str, prompt: Prompt, probs: list[float], schema: dict[str, Any], used: int
) -> dict[str, Any]:
    enum = schema.get("properties", {}).get("choice", {}).get("enum", [])
    shown = list(enum) or prompt.options
    beliefs = belief(prompt.text, shown, model) if shown else []
    best = max(range(len(shown)), key=lambda i: beliefs[i]) if shown else None
    answer: dict[str, Any] = {"choice": shown[best] if best is not None else ""}
    if "confidence" in schema.get("properties", {}):
        stated = 1.0 if model == "tickets-onehot" else beliefs[best] if best is not None else 0
        answer["confidence"] = round(stated, 4)
    content = json.dumps(answer)
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
    }
    return _answer(model, [choice], _usage(used, len(_tokens(content))))


def completions(body: dict[str, Any]) -> dict[str, Any]:
    """Each prompt echoed as tokens with offsets; an option's tokens get ``log p - 0.5``
    each (so the per-token mean reproduces the model's belief) and one generated token."""
    model = str(body.get("model", ""))
    prompts = body.get("prompt")
    prompts = [prompts] if isinstance(prompts, str) else list(prompts or [])
    shared = len(_common_prefix(prompts)) if len(prompts) > 1 else 0
    cut = prompts[0].rfind(" ", 0, shared + 1) if prompts else 0
    if len(prompts) == 1:  # one prompt per request: the option follows the last "Answer:"
        cut = prompts[0].rfind(ANSWER_CUE) + len(ANSWER_CUE) if ANSWER_CUE in prompts[0] else 0
    context = prompts[0][:cut] if cut > 0 else ""
    options = [p[len(context) + 1 :] for p in prompts]
    listed = _LISTED.findall(context)
    shown = listed[-1].split(", ") if listed and len(prompts) == 1 else options
    beliefs = belief(context, shown, model) if context else []
    probs = [beliefs[shown.index(o)] if o in shown else 1.0 / len(prompts) for o in options]
    choices, used = [], 0
    for i, (prompt, p) in enumerate(zip(prompts, probs, strict=True)):
        tokens, logprobs, offsets, at = [], [], [], 0
        for token in _tokens(prompt):
            tokens.append(token)
            offsets.append(at)
            own = math.log(max(p, 1e-300)) - 0.5
            logprobs.append(None if at == 0 else (own if at >= cut else -1.5))
            at += len(token)
        tokens.append(" The")
        offsets.append(at)
        logprobs.append(-0.7)
        used += len(tokens) - 1
        choices.append(
            {
                "index": i,
                "text": prompt + " The",
                "finish_reason": "length",
                "logprobs": {
                    "tokens": tokens,
                    "token_logprobs": logprobs,
                    "text_offset": offsets,
                    "top_logprobs": None,
                },
            }
        )
    return _answer(model, choices, _usage(used, len(prompts)))


def _common_prefix(texts: list[str]) -> str:
    first, last = min(texts), max(texts)
    n = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))
    return first[:n]


def score(body: dict[str, Any], model: str = "tickets-calibrated") -> dict[str, Any]:
    """open-jev: the model's belief (``norm`` does not change it here); the body's ``model``
    wins over ``model``."""
    options = [str(o) for o in body.get("options") or []]
    model = str(body.get("model") or model)
    return {
        "probability": belief(str(body.get("context", "")), options, model),
        "model": f"{model}-{SNAPSHOT}",
    }


def make_app(delay_s: float = 0.0, served: Served | None = None) -> web.Application:
    served = served or Served()
    flavours = Flavours(served, chat, completions)

    def route(answer: Any) -> Any:
        async def handle(request: web.Request) -> web.Response:
            try:
                body = await request.json()
            except ValueError:
                return web.json_response({"error": {"message": "invalid JSON"}}, status=400)
            if delay_s:
                await asyncio.sleep(delay_s)
            try:
                return web.json_response(answer(body, **request.match_info))
            except Refusal as refusal:
                return web.json_response(refusal.body, status=refusal.status)

        return handle

    def listing(card: Any) -> Any:
        async def handle(request: web.Request) -> web.Response:
            data = [{"object": "model", **card(name)} for name in MODELS]
            return web.json_response({"object": "list", "data": data})

        return handle

    async def azure(request: web.Request) -> web.Response:
        body = await request.json()
        try:
            answer = flavours.azure(request, body, request.match_info["operation"])
        except Refusal as refusal:
            return web.json_response(refusal.body, status=refusal.status)
        return web.json_response(answer)

    async def azure_models(request: web.Request) -> web.Response:
        if "api-version" not in request.query:
            return web.json_response({"error": {"code": "404", "message": "Resource not found"}},
                                     status=404)  # fmt: skip
        data = [{"id": model, "object": "model"} for model in AZURE_DEPLOYMENTS.values()]
        return web.json_response({"object": "list", "data": data})

    async def props(request: web.Request) -> web.Response:
        return web.json_response(flavours.llama_server_props(next(iter(MODELS))))

    async def tags(request: web.Request) -> web.Response:
        return web.json_response(flavours.ollama_tags(list(MODELS)))

    owned = {"owned_by": "demo"}
    app = web.Application()
    for prefix in ("", "/v1"):
        app.router.add_post(f"{prefix}/chat/completions", route(chat))
        app.router.add_post(f"{prefix}/completions", route(completions))
        app.router.add_get(f"{prefix}/models", listing(lambda name: {"id": name, **owned}))
    app.router.add_post("/score", route(score))
    app.router.add_post("/{model}/score", route(score))
    flavoured: dict[str, tuple[Any, Any, Any]] = {
        "vllm": (
            lambda b: flavours.answer_as(chat, b, str(b.get("model", ""))),
            lambda b: flavours.answer_as(completions, b, str(b.get("model", ""))),
            lambda name: {"id": name, "owned_by": "vllm", "root": weights_of(served.actual(name))},
        ),
        "llama-cpp-python": (
            flavours.llama_cpp_python_chat,
            flavours.llama_cpp_python_completions,
            lambda name: {"id": name, "owned_by": "me", "permissions": []},
        ),
        "llama-server": (
            flavours.llama_server_chat,
            flavours.llama_server_completions,
            lambda name: {"id": name, "owned_by": "llamacpp", "meta": {"n_vocab": 32000}},
        ),
        "ollama": (
            flavours.ollama_chat,
            flavours.ollama_completions,
            lambda name: {"id": f"{name}:latest", "owned_by": "library"},
        ),
        "lmstudio": (
            flavours.lmstudio_chat,
            flavours.lmstudio_completions,
            lambda name: {"id": name, "owned_by": "organization_owner"},
        ),
    }
    for flavour, (chat_of, completions_of, card) in flavoured.items():
        app.router.add_post(f"/{flavour}/v1/chat/completions", route(chat_of))
        app.router.add_post(f"/{flavour}/v1/completions", route(completions_of))
        app.router.add_get(f"/{flavour}/v1/models", listing(card))
    app.router.add_get("/llama-server/props", props)
    app.router.add_get("/ollama/api/tags", tags)
    app.router.add_post(
        "/azure/openai/deployments/{deployment}/{operation:chat/completions|completions}", azure
    )
    app.router.add_get("/azure/openai/models", azure_models)
    app.served = served  # type: ignore[attr-defined]
    return app


@dataclass
class DemoServer:
    url: str  # http://127.0.0.1:<port>
    served: Served = field(default_factory=Served)  # swap models under a name here

    def flavour(self, name: str) -> str:
        """The base URL of a flavour (``vllm``, ``llama-cpp-python``, ``llama-server``,
        ``ollama``, ``lmstudio``)."""
        return f"{self.url}/{name}/v1"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


@contextmanager
def serve_demo(port: int = 0, *, delay_ms: float = 0.0) -> Iterator[DemoServer]:
    """Run the server on 127.0.0.1 in a background thread (port 0: any free port)."""
    served = Served()
    app = make_app(delay_ms / 1000.0, served)
    with serve_in_thread(app, port=port, name="demo-llm-server") as bound:
        yield DemoServer(f"http://127.0.0.1:{bound}", served)


def _exit_when_stdin_closes() -> None:
    """Exit as soon as stdin reaches end of file: the parent closed the pipe or died
    (demo/process.py). Nothing is left to flush; requests in flight are the parent's own."""

    def watch() -> None:
        sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A deterministic demo LLM server (loopback).")
    parser.add_argument("--port", type=int, default=DEMO_PORT)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="answer after this delay")
    # a listening socket inherited from the parent, serving until stdin closes (process.py)
    parser.add_argument("--listen-fd", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.listen_fd is not None:
        _exit_when_stdin_closes()
        web.run_app(
            make_app(args.delay_ms / 1000.0),
            sock=socket.socket(fileno=args.listen_fd),
            access_log=None,
            print=None,
        )
        return
    print(f"demo LLM server on http://127.0.0.1:{args.port}/v1", flush=True)
    web.run_app(
        make_app(args.delay_ms / 1000.0),
        host="127.0.0.1",
        port=args.port,
        access_log=None,
        print=None,
    )


if __name__ == "__main__":
    main()

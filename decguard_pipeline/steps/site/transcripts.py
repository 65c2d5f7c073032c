"""What a language-model backend was sent for a case: the first request of its flow, made
again from the contract's backend settings and the case's input (nothing is sent). The
warehouse keeps the validated answer, its tokens and metadata, not the request; the request is
deterministic, so it is rebuilt here. Secrets are redacted (``core.secrets``); credentials
travel in headers, which are not shown. No Dagster here."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

from decguard_pipeline.backends.engine import Call, EngineBackend
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.core.secrets import scrub, scrub_text
from decguard_pipeline.runs.golden import make_backend
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.targets import backend_of

Rebuild = Callable[[str, str | None], dict[str, Any] | None]


def request_builder(entry: ContractEntry | None, target: str) -> tuple[Rebuild | None, str]:
    """A function ``(case_id, input_json) -> {"kind", "text"}`` giving a case's request, and
    why there is none (a backend that is not a language model, a contract not found)."""
    if entry is None or entry.loaded is None:
        return None, "the contract file was not found: requests cannot be rebuilt"
    loaded = entry.loaded
    try:
        backend = make_backend(loaded, backend_of(target))
    except Exception as exc:  # a setting that no longer loads: say so, show the rest
        return None, f"requests not rebuilt: {scrub_text(str(exc))}"
    if not isinstance(backend, EngineBackend):
        return None, ""
    spec = loaded.contract.spec()

    def rebuild(case_id: str, input_json: str | None) -> dict[str, Any] | None:
        if input_json is None:
            return None
        value = json.loads(input_json)
        flow = backend.flow(DecisionRequest(case_id, spec, value))
        try:
            call = next(flow)
        except StopIteration:
            return None
        finally:
            flow.close()
        if not isinstance(call, Call):
            return None
        path = call.url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
        payload = scrub(call.payload)
        body = orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode()
        return {"kind": f"POST /{scrub_text(path)}", "text": body, "prompt": prompt_of(payload)}

    return rebuild, ""


def prompt_of(payload: dict[str, Any]) -> str | None:
    """The text the model reads: the chat messages (``role: content``), or the completion
    prompt(s), as plain text."""
    messages = payload.get("messages")
    if isinstance(messages, list):
        return "\n\n".join(
            f"[{m.get('role')}]\n{m.get('content')}" for m in messages if isinstance(m, dict)
        )
    prompt = payload.get("prompt")
    if isinstance(prompt, list):
        return "\n---\n".join(str(p) for p in prompt)
    return prompt if isinstance(prompt, str) else None

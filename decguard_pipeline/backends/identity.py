"""Which model an OpenAI-compatible server really serves, when its answers only echo the name
asked for (llama.cpp's servers, Ollama's OpenAI endpoint, vLLM and many proxies do): a model
swapped under the same name would otherwise be the same model version, and its answers
would be served from the response cache.

``version_from: server`` reads what the server publishes about the model it loaded:

- vLLM: ``GET /v1/models``, the ``root`` of the card named like the model (the weights'
  path or hub name behind ``--served-model-name``);
- llama.cpp's server: ``GET /props``, ``model_path`` (the file given with ``-m``);
- Ollama: ``GET /api/tags``, the ``digest`` of the model of that name (``/api/show`` has
  no digest field);
- llama-cpp-python's server: ``GET /v1/models`` when it lists exactly one model under
  another name than the one asked (it answers every name with that model).

``version_from: probe`` asks the backend's own scoring on fixed inputs and digests the
distributions (rounded to 1e-3, so the last bits of a server's arithmetic do not change it):
any other model answers them differently.

Values a server sends are untrusted: one that is long or not plain printable text is
replaced by a digest of it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Protocol

import httpx
import orjson

from decguard_pipeline.backends.engine import Ledger, RejectedRequest
from decguard_pipeline.backends.transport import Reply
from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.core.errors import BackendError, InvalidResponse


class OpenAIBackend(Protocol):
    """What identification needs of the ``openai`` provider's backend."""

    model: str | None
    decision: DecisionSpec
    settings: Any

    def get(self, url: str) -> Reply: ...

    def drive(
        self, request: DecisionRequest, ledger: Ledger
    ) -> tuple[list[float], dict[str, Any]]: ...


# the probe's default inputs: short, fixed, plain requests any decider can be asked (a
# contract sets its own with ``probe_inputs``, e.g. typical cases of its domain)
PROBE_INPUTS = (
    "Hello, I have a question.",
    "Something stopped working this morning and I do not know why.",
    "Can you tell me more about what you offer?",
)
PROBE_DECIMALS = 3
_PLAIN = re.compile(r"[A-Za-z0-9._:/@+=-]{1,96}")


def plain(value: str) -> str:
    """``value`` when it is short plain text, else a digest of it."""
    if _PLAIN.fullmatch(value):
        return value
    return "sha256-" + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:16]


def api_root(base_url: str) -> str:
    """The server's root: the base URL without its query and a final ``/v1``."""
    url = httpx.URL(base_url)
    path = url.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return str(url.copy_with(path=path or "/", query=None, fragment=None)).rstrip("/")


def join(base_url: str, path: str) -> str:
    """``base_url`` + ``/path``, keeping the base's query (Azure's ``api-version``)."""
    url = httpx.URL(base_url)
    return str(url.copy_with(path=url.path.rstrip("/") + "/" + path))


def _get_json(backend: OpenAIBackend, url: str) -> Any:
    """The JSON of a 2xx answer to ``GET url``; None for any other answer (BackendError when
    the server cannot be reached)."""
    reply = backend.get(url)
    if not reply.ok:
        return None
    try:
        return orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        return None


def _card(listing: Any, model: str | None) -> dict[str, Any] | None:
    data = listing.get("data") if isinstance(listing, dict) else None
    cards = [c for c in data if isinstance(c, dict)] if isinstance(data, list) else []
    named = [c for c in cards if c.get("id") == model]
    if named:
        return named[0]
    # llama-cpp-python answers every model name with its one model
    if len(cards) == 1 and isinstance(cards[0].get("id"), str) and cards[0]["id"]:
        return {"id": cards[0]["id"], "only": True}
    return None


def server_identity(backend: OpenAIBackend) -> tuple[str, str] | None:
    """(identity, where it was read) from the server's published metadata; None when it
    publishes none the model can be told by."""
    base, root, model = (
        backend.settings.base_url,
        api_root(backend.settings.base_url),
        backend.model,
    )
    card = _card(_get_json(backend, join(base, "models")), model)
    if card is not None and isinstance(card.get("root"), str) and card["root"]:
        return f"root:{plain(card['root'])}", "/v1/models root"
    props = _get_json(backend, f"{root}/props")
    if isinstance(props, dict) and isinstance(props.get("model_path"), str) and props["model_path"]:
        return f"path:{plain(props['model_path'])}", "/props model_path"
    tags = _get_json(backend, f"{root}/api/tags")
    listed = tags.get("models") if isinstance(tags, dict) else None
    names = {model, f"{model}:latest"}
    for entry in listed if isinstance(listed, list) else []:
        if isinstance(entry, dict) and (entry.get("name") in names or entry.get("model") in names):
            digest = entry.get("digest")
            if isinstance(digest, str) and digest:
                return f"digest:{plain(digest)[:24]}", "/api/tags digest"
    if card is not None and card.get("only") and card["id"] != model:
        return f"id:{plain(card['id'])}", "/v1/models id"
    return None


def probe_identity(backend: OpenAIBackend, inputs: tuple[Any, ...] = PROBE_INPUTS) -> str:
    """A digest of the backend's answers to ``inputs`` (its own scoring method; an answer it
    cannot read counts as that, a refusal as its status)."""
    rows: list[Any] = []
    for i, text in enumerate(inputs):
        request = DecisionRequest(f"probe-{i}", backend.decision, text)
        try:
            values, _ = backend.drive(request, Ledger(stamp=False))
        except InvalidResponse:
            rows.append("invalid_response")
        except RejectedRequest as exc:
            rows.append(f"HTTP {exc.status}")
        except BackendError:
            raise  # unreachable, out of time, rate limited: nothing is known yet
        else:
            rows.append([round(float(v), PROBE_DECIMALS) + 0.0 for v in values])
    digest = hashlib.blake2b(json.dumps(rows).encode(), digest_size=6).hexdigest()
    return f"probe:{digest}"

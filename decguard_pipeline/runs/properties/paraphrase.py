"""Paraphrase sources of the ``paraphrase`` property (DecGuard §9.8).

* ``identity``: the text itself; checks that a model answers the same input the same way.
* ``file``: curated paraphrases from a JSONL file next to the contract (reviewable, exact).
* ``openai``: any OpenAI-compatible chat-completions endpoint; the key comes from an
  environment variable and never reaches a report. Answers are read within
  ``max_response_bytes`` (a pipeline extension, as for the http backend).
* plugins: :class:`Paraphraser` subclasses in the ``decguard.paraphrasers`` entry-point group.

Building a paraphraser does no network I/O, so ``validate`` stays offline. Every paraphrase
and provenance a paraphraser hands out is scrubbed of registered secrets (``core.secrets``):
a paraphrase becomes a model input and is stored in reports.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import BaseModel, Field, ValidationError, field_validator

from decguard_pipeline.backends.body import (
    ACCEPT_ENCODING,
    DEFAULT_MAX_RESPONSE_BYTES,
    TooLarge,
    read_within,
)
from decguard_pipeline.core.contract.properties import ParaphraseSource
from decguard_pipeline.core.errors import (
    BackendTimeout,
    BackendUnavailable,
    ContractError,
    ParaphraseError,
)
from decguard_pipeline.core.product import __version__
from decguard_pipeline.core.secrets import register_env_secrets, register_secret, scrub
from decguard_pipeline.core.validation import Strict, format_errors, unique_pairs

if TYPE_CHECKING:  # httpx (and the HTTP backend) are imported by the openai provider only
    import httpx

ENTRY_POINT_GROUP = "decguard.paraphrasers"


class Paraphraser(ABC):
    """A paraphrase source. ``paraphrase`` raises ``BackendError`` subclasses (usually
    :class:`ParaphraseError`) for one case; they become errored pairs, never dropped cases."""

    provider: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("paraphrase", "provenance"):
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "_scrubbed", False):
                setattr(cls, name, _scrubbing(method))

    @classmethod
    def from_config(cls, source: ParaphraseSource, *, base_dir: Path) -> Self:
        """Build from ``properties.paraphrase.source`` (paths relative to ``base_dir``, the
        contract's directory). Must not call remote services."""
        raise ContractError(f"paraphraser {cls.provider!r} cannot be configured from a contract")

    @abstractmethod
    def paraphrase(self, text: str, *, case_id: str, n: int, seed: int) -> list[str]:
        """Up to ``n`` paraphrases of ``text``."""

    def provenance(self) -> dict[str, Any]:
        """Recorded with every generated pair; never a secret."""
        return {"provider": self.provider}

    def close(self) -> None:
        """Release connections (optional)."""


def _scrubbing(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def scrubbed(self: Paraphraser, *args: Any, **kwargs: Any) -> Any:
        return scrub(method(self, *args, **kwargs))

    scrubbed._scrubbed = True  # type: ignore[attr-defined]
    return scrubbed


def provider_settings(model: type[BaseModel], source: ParaphraseSource) -> Any:
    try:
        return model.model_validate(source.settings)
    except ValidationError as exc:
        raise ContractError(
            f"invalid settings for paraphraser {source.provider!r}:\n"
            + format_errors(exc, prefix="properties.paraphrase.source")
        ) from exc


class _NoSettings(Strict):
    pass


class IdentityParaphraser(Paraphraser):
    provider = "identity"

    @classmethod
    def from_config(cls, source: ParaphraseSource, *, base_dir: Path) -> Self:
        provider_settings(_NoSettings, source)
        return cls()

    def paraphrase(self, text: str, *, case_id: str, n: int, seed: int) -> list[str]:
        return [text]


class FileSettings(Strict):
    path: str = Field(min_length=1)


class FileParaphraser(Paraphraser):
    """JSONL rows ``{"id": <case id>, "paraphrases": [...]}`` or ``{"input": <text>,
    "paraphrases": [...]}``; looked up by case id first, then by exact text."""

    provider = "file"

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ContractError(f"{path}: cannot read paraphrases: {exc.strerror or exc}") from exc
        self.hash = "sha256:" + hashlib.sha256(raw).hexdigest()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ContractError(f"{path}: paraphrases are not valid UTF-8: {exc}") from exc
        self.by_id: dict[str, list[str]] = {}
        self.by_text: dict[str, list[str]] = {}
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                self._add(lineno, line)

    def _add(self, lineno: int, line: str) -> None:
        where = f"{self.path}: line {lineno}"
        try:
            row = json.loads(line, object_pairs_hook=unique_pairs)
        except ValueError as exc:
            raise ContractError(f"{where}: invalid JSON: {exc}") from exc
        found = row.get("paraphrases") if isinstance(row, dict) else None
        if not isinstance(found, list) or not all(isinstance(p, str) and p for p in found):
            raise ContractError(f"{where}: 'paraphrases' must be a list of non-empty strings")
        if isinstance(row.get("id"), str):
            self.by_id[row["id"]] = found
        elif isinstance(row.get("input"), str):
            self.by_text[row["input"]] = found
        else:
            raise ContractError(f"{where}: needs a string 'id' or 'input'")

    @classmethod
    def from_config(cls, source: ParaphraseSource, *, base_dir: Path) -> Self:
        settings: FileSettings = provider_settings(FileSettings, source)
        return cls(base_dir / settings.path)

    def paraphrase(self, text: str, *, case_id: str, n: int, seed: int) -> list[str]:
        return self.by_id.get(case_id, self.by_text.get(text, []))[:n]

    def provenance(self) -> dict[str, Any]:
        return {"provider": self.provider, "path": str(self.path), "hash": self.hash}


DEFAULT_INSTRUCTIONS = (
    "Paraphrase the user's text {n} times. Keep every fact, name, number, negation and the "
    "meaning exactly the same; change only the wording. Answer with a JSON array of {n} "
    "strings and nothing else."
)


class OpenAISettings(Strict):
    model: str = Field(min_length=1)
    url: str = "https://api.openai.com/v1"  # "/chat/completions" is appended
    api_key_env: str | None = "OPENAI_API_KEY"  # null: a local server without auth
    timeout_s: float = Field(default=60.0, gt=0.0, le=600.0)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    instructions: str = DEFAULT_INSTRUCTIONS
    # pipeline extension (docs/contracts.md#backend-limits)
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, ge=1, le=1 << 30)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str | None:
        from decguard_pipeline.backends.http import check_url

        return check_url(value)


class OpenAIParaphraser(Paraphraser):
    provider = "openai"

    def __init__(self, settings: OpenAISettings) -> None:
        self.settings = settings
        self._client: httpx.Client | None = None
        self._served: dict[str, str] = {}  # model / system_fingerprint of the last answer

    @classmethod
    def from_config(cls, source: ParaphraseSource, *, base_dir: Path) -> Self:
        return cls(provider_settings(OpenAISettings, source))

    def _http(self) -> httpx.Client:
        if self._client is None:
            from decguard_pipeline.backends.deadline import deadline_client
            from decguard_pipeline.backends.transport import tls_context

            headers = {
                "User-Agent": f"decguard-pipeline/{__version__}",
                "Accept-Encoding": ACCEPT_ENCODING,
            }
            variable = self.settings.api_key_env
            if variable is not None:
                key = os.environ.get(variable)
                if not key:  # read at the first call, so validate works without it
                    raise ContractError(
                        f"paraphraser 'openai': environment variable {variable} is not set"
                    )
                register_secret(key)
                headers["Authorization"] = f"Bearer {key}"
            self._client = deadline_client(
                tls_context(), headers=headers, timeout=self.settings.timeout_s
            )
        return self._client

    def paraphrase(self, text: str, *, case_id: str, n: int, seed: int) -> list[str]:
        body = {
            "model": self.settings.model,
            "temperature": self.settings.temperature,
            "seed": seed,
            "messages": [
                {"role": "system", "content": self.settings.instructions.format(n=n)},
                {"role": "user", "content": text},
            ],
        }
        url = self.settings.url.rstrip("/") + "/chat/completions"
        import httpx

        from decguard_pipeline.backends.deadline import deadline

        client = self._http()
        try:  # the whole exchange, head and body, within timeout_s
            with (
                deadline(self.settings.timeout_s),
                client.stream("POST", url, json=body) as response,
            ):
                if not response.is_success:  # the body may echo the prompt or a key: never read
                    raise ParaphraseError(f"paraphraser returned HTTP {response.status_code}")
                raw = self._read(response)
        except httpx.TimeoutException as exc:
            raise self._timeout() from exc
        except httpx.TransportError as exc:
            raise BackendUnavailable(f"paraphraser unreachable: {type(exc).__name__}") from exc
        try:
            answer = json.loads(raw)
            content = answer["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ParaphraseError("paraphraser response has no message content") from exc
        self._served = {
            key: answer[key]
            for key in ("model", "system_fingerprint")
            if isinstance(answer.get(key), str)
        }
        return parse_paraphrases(content)[:n]

    def _read(self, response: httpx.Response) -> bytes:
        """The body within max_response_bytes."""
        limit = self.settings.max_response_bytes
        try:
            return read_within(response, limit)
        except TooLarge:
            raise ParaphraseError(
                f"paraphraser answered more than {limit} bytes (max_response_bytes)"
            ) from None

    def _timeout(self) -> BackendTimeout:
        return BackendTimeout(f"paraphraser timed out after {self.settings.timeout_s:g}s")

    def provenance(self) -> dict[str, Any]:
        from decguard_pipeline.backends.http import public_url

        return {
            "provider": self.provider,
            "model": self.settings.model,
            "url": public_url(self.settings.url),
            "temperature": self.settings.temperature,
            **{f"response_{key}": value for key, value in self._served.items()},
        }

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def parse_paraphrases(content: Any) -> list[str]:
    """A JSON array of non-blank strings, possibly inside a ```json fence; items stripped."""
    if not isinstance(content, str):
        raise ParaphraseError("paraphraser message content is not text")
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise ParaphraseError("paraphraser did not answer with a JSON array") from exc
    if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
        raise ParaphraseError("paraphraser did not answer with a JSON array of strings")
    return [item.strip() for item in items]


BUILTIN: dict[str, type[Paraphraser]] = {
    cls.provider: cls for cls in (IdentityParaphraser, FileParaphraser, OpenAIParaphraser)
}


def paraphraser_class(provider: str) -> type[Paraphraser]:
    if provider in BUILTIN:
        return BUILTIN[provider]
    found = tuple(entry_points(group=ENTRY_POINT_GROUP, name=provider))
    if not found:
        plugins = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
        available = ", ".join(sorted(set(BUILTIN) | plugins))
        raise ContractError(f"unknown paraphrase provider {provider!r}; available: {available}")
    entry_point = found[0]
    try:
        loaded = entry_point.load()
    except Exception as exc:
        raise ContractError(f"cannot load paraphraser {provider!r}: {exc}") from exc
    if not (isinstance(loaded, type) and issubclass(loaded, Paraphraser)):
        raise ContractError(f"paraphraser {provider!r} ({entry_point.value}) is not a Paraphraser")
    return loaded


def create_paraphraser(source: ParaphraseSource, *, base_dir: Path) -> Paraphraser:
    register_env_secrets(source.settings)  # a plugin's credentials, by DecGuard's convention
    return paraphraser_class(source.provider).from_config(source, base_dir=base_dir)

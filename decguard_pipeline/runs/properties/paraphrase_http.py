"""The ``openai`` paraphraser's HTTP client: the backends' own (``backends/transport.py``),
so a paraphraser's requests get what every backend's get: the TLS context, the proxy from
the environment, credentials read at the first request and registered as secrets, a
deadline over the whole exchange, a bounded body never read unless 2xx. Imported only when
a paraphraser calls a model (a mock ``test --all`` imports no HTTP client)."""

from __future__ import annotations

from dataclasses import dataclass, field

from decguard_pipeline.backends.transport import HttpTransport, Reply
from decguard_pipeline.core.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    ContractError,
    ParaphraseError,
)

WHO = "paraphraser"  # what its errors say


@dataclass(frozen=True)
class TransportSettings:
    """What the transport reads of a backend's settings, from the paraphraser's."""

    url: str
    timeout_s: float
    max_response_bytes: int
    api_key_env: str | None
    max_retries: int = 0
    retry_backoff_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    max_metadata_bytes: int = 0  # no answer of a paraphraser is a decision's metadata


class ParaphraseTransport(HttpTransport):
    """One OpenAI-compatible chat endpoint; its errors name the paraphraser."""

    provider = "openai"

    def __init__(self, settings: TransportSettings) -> None:
        super().__init__(settings, name=WHO)

    def credential_sources(self) -> dict[str, tuple[str, str]]:
        variable = self.settings.api_key_env
        return {} if variable is None else {"Authorization": (variable, "Bearer ")}

    def missing_variable(self, variable: str) -> ContractError:
        return ContractError(f"paraphraser 'openai': environment variable {variable} is not set")

    def post(self, url: str, body: bytes) -> Reply:
        """One POST, no retries; a non-2xx answer is a ``ParaphraseError`` (its body, which
        may echo the prompt or a key, is never read)."""
        reply = self._send_sync("POST", url, body)
        if not reply.ok:
            raise ParaphraseError(f"paraphraser returned HTTP {reply.status}")
        return reply

    def _connect_error(self, what: str) -> BackendError:
        return self._timeout() if what == "ConnectTimeout" else self._transport_error(what)

    def _timeout(self) -> BackendError:
        return BackendTimeout(f"paraphraser timed out after {self.settings.timeout_s:g}s")

    def _transport_error(self, what: str) -> BackendError:
        return BackendUnavailable(f"paraphraser unreachable: {what}")

    def _too_large(self) -> BackendError:
        limit = self.settings.max_response_bytes
        return ParaphraseError(f"paraphraser answered more than {limit} bytes (max_response_bytes)")

"""What identifies an answer: everything that determines it, and nothing secret.

A cache key is a 128-bit BLAKE2b digest (16 bytes) over

* the backend's identity (:class:`Identity`): provider, configured model, its settings with
  secrets removed and with the settings that only change how a server is reached or waited
  for left out, the model version it reports, the contract's decision (canonical labels);
* the request: case id, the decision as shown (name, type, description, labels in the order
  shown: a ``label_format`` or ``option_order`` presentation is a different request), and the
  exact input (a string as is, an object as canonical JSON);
* for nondeterministic scoring (``scoring: sample`` or a temperature above 0), the sample
  index: the same request asked twice in one run is two draws, kept apart.

The digests never contain a setting's value in the clear, and secrets are removed before
hashing anyway (``core.secrets`` registry and DecGuard's secret key names), so no stored key
can be compared against a guessed credential either.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput, DecisionRequest
from decguard_pipeline.core.secrets import is_secret_name, redact

# Bump when the meaning of a key changes (what is hashed, or how a provider renders requests
# from the same settings): every earlier answer then stops matching.
KEY_VERSION = 1
DIGEST_BYTES = 16
# the sidecar section recording the fingerprint of the backend that answered a report
ANSWERED_WITH = "answered_with"
# Settings that change how a server is reached, waited for or priced, never what it answers.
# (Limits on answer size are rechecked when an answer is replayed, so they are left out too.)
NOT_IN_KEY = frozenset(
    {
        "timeout_s",
        "max_retries",
        "retry_backoff_s",
        "max_retry_wait_s",
        "max_pacing_wait_s",
        "requests_per_minute",
        "tokens_per_minute",
        "pricing",
        "health_url",
        "max_response_bytes",
        "max_metadata_bytes",
    }
)


def key_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` as they enter a key: without :data:`NOT_IN_KEY`, values under
    secret-looking names replaced, every registered secret value replaced. Names of
    environment variables (``api_key_env: OPENAI_API_KEY``) stay: they are not secrets.

    A text setting that held a registered secret (a URL expanded from a declared
    variable) keeps a digest of its value beside the mark: two servers behind the same
    variable are two keys, and the value itself is never stored."""
    kept = {name: value for name, value in settings.items() if name not in NOT_IN_KEY}
    keyed = redact(kept)
    for name, value in kept.items():
        if isinstance(value, str) and not is_secret_name(name) and keyed[name] != value:
            keyed[name] = f"{keyed[name]}#{hashlib.sha256(value.encode()).hexdigest()[:16]}"
    return keyed


def nondeterministic(settings: Mapping[str, Any]) -> bool:
    """Whether the same request may get another answer: sampled scoring, or a temperature
    above 0 (a provider setting by that name)."""
    if settings.get("scoring") == "sample":
        return True
    temperature = settings.get("temperature")
    return (
        isinstance(temperature, int | float)
        and not isinstance(temperature, bool)
        and (temperature > 0)
    )


def _canonical(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, UTF-8, no spaces); plain ``json`` for what orjson
    refuses (integers beyond 64 bits)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Identity:
    """A backend as a cache sees it. ``version`` is the model version it reports ("" when it
    reports none: its answers are then reused until they expire or the settings change)."""

    provider: str
    model: str | None
    settings: Mapping[str, Any]  # already passed through key_settings
    version: str
    decision: DecisionSpec  # the contract's, canonical label order

    @property
    def nondeterministic(self) -> bool:
        return nondeterministic(self.settings)

    def parts(self) -> dict[str, Any]:
        """What identifies the backend's answers, part by part (what :meth:`digest` hashes)."""
        spec = self.decision
        return {
            "key_version": KEY_VERSION,
            "provider": self.provider,
            "model": self.model,
            "settings": self.settings,
            "version": self.version,
            "decision": [spec.name, spec.type, list(spec.labels), spec.description],
        }

    def digest(self) -> bytes:
        return hashlib.blake2b(_canonical(self.parts()), digest_size=DIGEST_BYTES).digest()

    def fingerprint(self) -> dict[str, Any]:
        """The parts of the key but the model version, each as a short digest (``settings``
        setting by setting): what a report records of the backend that answered it, so that
        a later run can tell which part changed without any value being written."""
        parts = self.parts()
        del parts["version"]  # learnt from the answers; a report keeps it per result
        out: dict[str, Any] = {"key_version": parts.pop("key_version")}
        for name, value in parts.items():
            if name == "settings":
                out[name] = {k: _short(v) for k, v in sorted(value.items())}
            else:
                out[name] = _short(value)
        return out


def _short(value: Any) -> str:
    return hashlib.blake2b(_canonical(value), digest_size=8).hexdigest()


def fingerprint_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The parts two fingerprints differ in (``settings.<name>`` for a setting); a fingerprint
    of another key version differs in ``key_version`` alone (its parts are not comparable)."""
    if recorded.get("key_version") != current["key_version"]:
        return ["key_version"]
    names = [
        part for part in ("provider", "model", "decision") if recorded.get(part) != current[part]
    ]
    old, new = recorded.get("settings"), current["settings"]
    old = old if isinstance(old, Mapping) else {}
    names += [
        f"settings.{name}" for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)
    ]
    return names


def input_bytes(value: DecisionInput) -> bytes:
    """The input exactly as identified: a string's UTF-8, an object's canonical JSON (tagged,
    so that the string ``"{}"`` and the object ``{}`` differ)."""
    if isinstance(value, str):
        return b"s" + value.encode("utf-8", "surrogatepass")
    return b"j" + _canonical(value)


def _shown(spec: DecisionSpec) -> bytes:
    return _canonical([spec.name, spec.type, list(spec.labels), spec.description])


def request_keys(
    prefix: bytes, requests: Sequence[DecisionRequest], *, sample: int | None = None
) -> list[bytes]:
    """One key per request under ``prefix`` (an identity's digest, or any other namespace).

    ``sample`` (nondeterministic scoring): the index of the first draw; a request repeated
    within ``requests`` gets the next indices, in order, so each repetition is its own
    answer."""
    blake = hashlib.blake2b
    heads: dict[int, tuple[DecisionSpec, Any]] = {}  # a run shows a few decisions, often
    last: DecisionSpec | None = None
    head: Any = None
    tail = "" if sample is None else f"#{sample}"
    keys = []
    append = keys.append
    for case_id, decision, value in requests:
        if decision is not last:
            found = heads.get(id(decision))
            if found is None or found[0] is not decision:
                state = blake(prefix + _shown(decision), digest_size=DIGEST_BYTES)
                found = heads[id(decision)] = (decision, state)
            last, head = decision, found[1]
        h = head.copy()  # cheaper than hashing the prefix again
        # the case id's length in characters makes the concatenation unambiguous
        if type(value) is str:
            h.update(f"{len(case_id)}:{case_id}s{value}{tail}".encode("utf-8", "surrogatepass"))
        else:
            h.update(f"{len(case_id)}:{case_id}".encode("utf-8", "surrogatepass"))
            h.update(input_bytes(value) + tail.encode())
        append(h.digest())
    if sample is not None and len(set(keys)) != len(keys):
        seen: Counter[bytes] = Counter()
        for i, key in enumerate(keys):
            seen[key] += 1
            if seen[key] > 1:  # the n-th repetition: a draw of its own
                keys[i] = blake(
                    key + b"#" + str(seen[key] - 1).encode(), digest_size=DIGEST_BYTES
                ).digest()
    return keys

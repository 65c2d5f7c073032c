"""Secret values, redacted by value wherever they would be stored or printed.

DecGuard redacts metadata by key name (:func:`redact`, which also scrubs); a model can still echo a
credential it was sent under an innocent key, in its model name or in an error. So every
credential a backend or paraphraser reads from the environment is registered here at the
moment it is read, before any request carries it, and :func:`scrub` replaces every
occurrence of a registered value (also inside a longer string, also as a dict key) with
``[REDACTED]``. The places where data leaves a backend or the runner call it: result
metadata, model names and versions, error messages, health details, backend details,
paraphrases. With nothing registered (mock runs, models without credentials) everything is
returned unchanged, so reports stay bit-identical to DecGuard's.

The registry belongs to the process: a value read by any backend is never printed by any
part of it. Plugins that read their own credentials call :func:`register_secret`.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

_lock = threading.Lock()
_values: frozenset[str] = frozenset()
# One alternation, longest value first, so that a replacement is never scanned again and a
# secret containing another is replaced whole. None while nothing is registered.
_pattern: re.Pattern[str] | None = None


def register_secret(value: str | None) -> None:
    """Treat ``value`` (and its whitespace-stripped form) as a secret from now on. Blank
    values are not secrets (redacting every space would make all output unreadable)."""
    global _values, _pattern
    if not isinstance(value, str) or not value.strip():
        return
    forms = {value, value.strip()}
    if forms <= _values:
        return
    with _lock:
        values = _values | forms
        ordered = sorted(values, key=lambda v: (-len(v), v))
        _pattern = re.compile("|".join(map(re.escape, ordered)))
        _values = values


def register_env_secrets(settings: Mapping[str, Any]) -> None:
    """Register the environment values a provider's settings point at, by DecGuard's naming
    convention: ``<x>_env: VARIABLE`` (``bearer_token_env``, ``api_key_env``) and
    ``<x>_from_env: {name: VARIABLE}`` (``headers_from_env``), and the pipeline's lists
    ``<x>_env: [VARIABLE, ...]`` (``url_env``: what URL placeholders may read). Unset
    variables are skipped (the provider reports them when it needs them)."""
    for key, value in settings.items():
        if not isinstance(key, str):
            continue
        if key.endswith("_env") and isinstance(value, str):
            register_secret(os.environ.get(value))
        elif key.endswith("_env") and isinstance(value, list):
            for variable in value:
                if isinstance(variable, str):
                    register_secret(os.environ.get(variable))
        elif key.endswith("_from_env") and isinstance(value, Mapping):
            for variable in value.values():
                if isinstance(variable, str):
                    register_secret(os.environ.get(variable))


def has_secrets() -> bool:
    return _pattern is not None


def forget_secrets() -> None:
    """Empty the registry (tests, which register throwaway values)."""
    global _values, _pattern
    with _lock:
        _values, _pattern = frozenset(), None


def scrub_text(text: str) -> str:
    """``text`` with every registered secret replaced."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(REDACTED, text)


def scrub_optional(text: str | None) -> str | None:
    return text if text is None or _pattern is None else scrub_text(text)


def scrub(value: Any) -> Any:
    """A copy of ``value`` with every registered secret replaced in its strings, at any depth
    (dict keys included); ``value`` itself when nothing needed replacing."""
    pattern = _pattern
    if pattern is None:
        return value
    return _scrub(value, pattern)


def _scrub(value: Any, pattern: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(REDACTED, value) if pattern.search(value) else value
    if isinstance(value, dict):
        out = {}
        changed = False
        for key, item in value.items():
            new_key = _scrub(key, pattern) if isinstance(key, str) else key
            new_item = _scrub(item, pattern)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if isinstance(value, list | tuple):
        items = [_scrub(item, pattern) for item in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


# Metadata keys whose values never reach a report (compared lowercased, '-' read as '_').
SECRET_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "authorization",
        "access_token",
        "refresh_token",
        "token",
        "password",
        "secret",
        "client_secret",
        "cookie",
        "set_cookie",
    }
)


def redact(value: Any) -> Any:
    """Copy of ``value`` with values under secret-looking keys replaced, at any depth
    (DecGuard's rule), and every registered secret value replaced wherever it appears."""
    return scrub(_redact_keys(value))


def is_secret_name(key: Any) -> bool:
    """Whether a value under ``key`` is redacted for its name (DecGuard's rule)."""
    return isinstance(key, str) and key.lower().replace("-", "_") in SECRET_KEYS


def _redact_keys(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out[key] = REDACTED if is_secret_name(key) else _redact_keys(item)
        return out
    if isinstance(value, list):
        return [_redact_keys(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_redact_keys(item) for item in value)
    return value

"""The cache key (issue 13): everything that determines an answer changes it, nothing else does,
and no secret enters it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from decguard_pipeline.core.cache.key import (
    Identity,
    input_bytes,
    key_settings,
    nondeterministic,
    request_keys,
)
from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.core.secrets import forget_secrets, register_secret

SPEC = DecisionSpec("refund_request", "choice", ("refund", "reject", "review"))
SETTINGS = {"base_url": "http://127.0.0.1:9/v1", "scoring": "logprobs", "api_key_env": "KEY"}


def identity(**changes) -> Identity:
    base = Identity("openai", "gpt-x", key_settings(SETTINGS), "gpt-x-2026-01-01", SPEC)
    return replace(base, **changes)


def key(ident: Identity | None = None, request: DecisionRequest | None = None, **kw) -> str:
    ident = ident or identity()
    request = request or DecisionRequest("c1", SPEC, "where is my money")
    return request_keys(ident.digest(), [request], **kw)[0]


def test_every_part_of_the_identity_changes_the_key():
    base = key()
    changed = [
        identity(provider="openjev"),
        identity(model="gpt-y"),
        identity(version="gpt-x-2026-02-01"),
        identity(version=""),
        identity(settings=key_settings({**SETTINGS, "scoring": "structured"})),
        identity(settings=key_settings({**SETTINGS, "prompt": "{input}"})),
        identity(decision=DecisionSpec("refund_request", "choice", ("refund", "reject"))),
        identity(decision=DecisionSpec("refund_request", "choice", SPEC.labels, "Refund?")),
    ]
    keys = [key(ident) for ident in changed]
    assert base not in keys and len(set(keys)) == len(keys)


def test_every_part_of_the_request_changes_the_key():
    base = key()
    shown = SPEC.with_labels(("review", "refund", "reject"))  # option_order
    formatted = SPEC.with_labels(("A) refund", "B) reject", "C) review"))  # label_format
    requests = [
        DecisionRequest("c2", SPEC, "where is my money"),
        DecisionRequest("c1", SPEC, "where is my money!"),
        DecisionRequest("c1", SPEC, {"text": "where is my money"}),
        DecisionRequest("c1", shown, "where is my money"),
        DecisionRequest("c1", formatted, "where is my money"),
    ]
    keys = [key(request=r) for r in requests]
    assert base not in keys and len(set(keys)) == len(keys)


def test_objects_are_keyed_by_content_not_by_key_order():
    a = DecisionRequest("c1", SPEC, {"a": 1, "b": [1.5, "x"]})
    b = DecisionRequest("c1", SPEC, {"b": [1.5, "x"], "a": 1})
    assert key(request=a) == key(request=b)
    assert input_bytes("{}") != input_bytes({})


def test_settings_that_only_change_waiting_or_pricing_are_not_in_the_key():
    calmer = {
        **SETTINGS,
        "timeout_s": 5,
        "max_retries": 0,
        "retry_backoff_s": 2,
        "requests_per_minute": 60,
        "tokens_per_minute": 1000,
        "pricing": {"input_per_million": 1.0, "output_per_million": 2.0},
        "health_url": "http://127.0.0.1:9/health",
    }
    assert key(identity(settings=key_settings(calmer))) == key()


def test_no_secret_value_enters_the_key_but_variable_names_do():
    forget_secrets()
    try:
        register_secret("sk-live-123456")
        echoed = key_settings({**SETTINGS, "headers": {"X-Team": "sk-live-123456"}})
        assert "sk-live-123456" not in repr(echoed)
        named = key_settings({**SETTINGS, "token": "hunter2", "api_key": "abc"})
        assert "hunter2" not in repr(named) and "abc" not in repr(named)
        assert named["api_key_env"] == "KEY"  # a variable name is not a secret
        # two different credentials are the same request: the answer does not depend on them
        other = key_settings({**SETTINGS, "token": "another", "api_key": "xyz"})
        assert key(identity(settings=named)) == key(identity(settings=other))
        # another variable name is another configuration
        renamed = key_settings({**SETTINGS, "api_key_env": "OTHER_KEY"})
        assert key(identity(settings=renamed)) != key()
    finally:
        forget_secrets()


def test_two_servers_behind_one_declared_variable_are_two_keys():
    """A URL expanded from a declared variable is redacted in the key, but the key still
    tells two servers apart (a digest of the value, never the value)."""
    forget_secrets()
    try:
        keys = []
        for host in ("http://prod.internal:8000", "http://staging.internal:8000"):
            register_secret(host)
            settings = key_settings({**SETTINGS, "base_url": f"{host}/v1"})
            assert host not in repr(settings) and "[REDACTED]" in settings["base_url"]
            keys.append(key(identity(settings=settings)))
        assert keys[0] != keys[1]
        same = key_settings({**SETTINGS, "base_url": "http://prod.internal:8000/v1"})
        assert key(identity(settings=same)) == keys[0]
    finally:
        forget_secrets()


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"scoring": "sample"}, True),
        ({"scoring": "logprobs", "temperature": 0.7}, True),
        ({"scoring": "logprobs", "temperature": 0}, False),
        ({"scoring": "structured"}, False),
        ({"rules": []}, False),
    ],
)
def test_nondeterministic_scoring(settings, expected):
    assert nondeterministic(settings) is expected


def test_sample_index_separates_draws_and_repetitions():
    request = DecisionRequest("c1", SPEC, "where is my money")
    prefix = identity().digest()
    first = request_keys(prefix, [request], sample=0)[0]
    assert first == request_keys(prefix, [request], sample=0)[0]
    assert first != request_keys(prefix, [request], sample=1)[0]
    assert first != request_keys(prefix, [request])[0]
    # the same request twice in one batch: two draws, each with its own key, stable
    twice = request_keys(prefix, [request, request], sample=0)
    assert twice[0] == first and twice[1] != first
    assert twice == request_keys(prefix, [request, request], sample=0)
    # a deterministic backend answers the same request once
    assert len(set(request_keys(prefix, [request, request]))) == 1

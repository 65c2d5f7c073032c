"""Redaction by value (core.secrets): the registry, the scrubber and the places that apply it
without a network (errors, backend self-descriptions, DecGuard's key rule kept as it is)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from decguard_pipeline.core import secrets
from decguard_pipeline.core.secrets import REDACTED, register_secret, scrub, scrub_text

TOKEN = "tok-5ecret-aa11"


def test_nothing_registered_returns_the_same_objects():
    value = {"a": ["x", {"b": TOKEN}], "n": float("nan")}
    assert scrub(value) is value
    assert scrub_text(TOKEN) == TOKEN


def test_values_are_replaced_everywhere_also_inside_strings_and_keys():
    register_secret(TOKEN)
    register_secret("key-22")
    value = {
        "trace": f"Bearer {TOKEN}; key-22.",
        TOKEN: 1,
        "nested": [{"deep": (TOKEN, "fine")}],
        "number": 1.5,
        "nan": float("nan"),
    }
    out = scrub(value)
    assert out["trace"] == f"Bearer {REDACTED}; {REDACTED}."
    assert out[REDACTED] == 1 and TOKEN not in out
    assert out["nested"] == [{"deep": (REDACTED, "fine")}]
    assert out["number"] == 1.5 and math.isnan(out["nan"])
    assert value["trace"].endswith("key-22.")  # the input is not changed


def test_longest_secret_wins_and_replacements_are_not_rescanned():
    register_secret("abc")
    register_secret("abcdef")
    register_secret("RED")  # a substring of the replacement itself
    assert scrub_text("xabcdefy abc RED") == f"x{REDACTED}y {REDACTED} {REDACTED}"


def test_stripped_form_is_registered_too():
    register_secret("  padded-value\n")
    assert scrub_text("got 'padded-value\\n'") == f"got '{REDACTED}\\n'"


def test_env_settings_by_convention(monkeypatch):
    monkeypatch.setenv("DG_T1", "value-one")
    monkeypatch.setenv("DG_T2", "value-two")
    secrets.register_env_secrets(
        {
            "api_key_env": "DG_T1",
            "headers_from_env": {"X-A": "DG_T2", "X-B": "DG_UNSET_ANYWHERE"},
            "url_env_like": 3,
            "plain": "DG_T1",
        }
    )
    assert scrub_text("value-one value-two") == f"{REDACTED} {REDACTED}"


def test_empty_and_non_strings_are_ignored():
    register_secret("")
    register_secret(None)
    register_secret("   ")
    assert not secrets.has_secrets()


def test_errors_are_scrubbed_when_made():
    from decguard_pipeline.core.errors import BackendError, ContractError

    register_secret(TOKEN)
    assert str(BackendError(f"model said {TOKEN}")) == f"model said {REDACTED}"
    assert BackendError("x").kind == "backend_error"
    assert str(ContractError(f"{TOKEN}")) == REDACTED


def test_decguard_key_rule_is_unchanged_by_value_redaction():
    """redact() is DecGuard's rule (secret-looking keys) plus registered values; with nothing
    registered it gives what DecGuard's own redaction gives."""
    from decguard.decisions.result import redact_sensitive_values

    from decguard_pipeline.core.secrets import redact

    value: dict[str, Any] = {
        "Api-Key": "k",
        "token": {"nested": 1},
        "list": [{"PASSWORD": "p"}, {"fine": TOKEN}],
        "cookie": None,
        "ok": "yes",
    }
    assert redact(value) == redact_sensitive_values(value)
    register_secret(TOKEN)
    assert redact(value)["list"] == [{"PASSWORD": REDACTED}, {"fine": REDACTED}]


def test_backend_self_descriptions_are_scrubbed_whoever_implements_them():
    """metadata(), healthcheck() and version_hint() of any Backend subclass (a plugin too)."""
    from decguard_pipeline.backends.base import Backend, backend_metadata, health

    class Leaky(Backend):
        provider = "leaky"

        def metadata(self) -> dict[str, Any]:
            about = backend_metadata(self.name, self.provider, self.model)
            return {**about, "model": f"m-{TOKEN}", "details": {"echo": [TOKEN]}}

        def healthcheck(self) -> dict[str, str]:
            return health("ok", f"serving with {TOKEN}")

        def version_hint(self) -> str | None:
            return f"v-{TOKEN}"

    class LeakierStill(Leaky):
        def version_hint(self) -> str | None:
            return f"{super().version_hint()}-2"

    register_secret(TOKEN)
    backend = LeakierStill(name="b", model="m")
    assert backend.metadata()["model"] == f"m-{REDACTED}"
    assert backend.metadata()["details"] == {"echo": [REDACTED]}
    assert backend.healthcheck() == {"status": "ok", "detail": f"serving with {REDACTED}"}
    assert backend.version_hint() == f"v-{REDACTED}-2"


@pytest.mark.parametrize("provider", ["http", "openai", "openjev"])
def test_network_providers_register_their_secrets_when_they_read_them(monkeypatch, provider):
    """The shared transport registers every credential it reads (``api_key_env`` /
    ``bearer_token_env`` and ``headers_from_env``: what ``secret_values()`` lists), also for a
    backend built without ``create_backend`` (which registers them by naming convention)."""
    from decguard_pipeline.backends.registry import backend_class
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec

    monkeypatch.setenv("DG_T_KEY", "sk-live-0042")
    monkeypatch.setenv("DG_T_ORG", "org-secret-77")
    key_setting = "bearer_token_env" if provider == "http" else "api_key_env"
    settings = {
        "provider": provider,
        "model": "m",
        key_setting: "DG_T_KEY",
        "headers_from_env": {"X-Org": "DG_T_ORG"},
        {"http": "url", "openai": "base_url", "openjev": "url"}[provider]: "http://127.0.0.1:9",
    }
    decision = DecisionSpec("q", "choice", ("yes", "no"))
    config = BackendConfig.model_validate(settings)
    backend = backend_class(provider).from_config(config, name="b", decision=decision)
    assert not secrets.has_secrets()  # nothing is read before the first request
    headers = backend.request_headers()
    assert headers["Authorization"] == "Bearer sk-live-0042"
    assert set(backend.secret_values()) == {"sk-live-0042", "org-secret-77"}
    echoed = "model sk-live-0042 for org-secret-77"
    assert scrub_text(echoed) == f"model {REDACTED} for {REDACTED}"


@pytest.mark.parametrize("provider", ["http", "openai", "openjev"])
def test_proxy_passwords_from_the_environment_are_secrets(monkeypatch, provider):
    """Both HTTP clients send the credentials of the proxy the environment names: they are
    registered with the backend's own, when the first request reads them."""
    from decguard_pipeline.backends.registry import backend_class
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec

    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://proxyuser:proxy-pw-31@127.0.0.1:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://other:proxy-pw-47@127.0.0.1:3129")
    url = {"http": "url", "openai": "base_url", "openjev": "url"}[provider]
    config = BackendConfig.model_validate(
        {"provider": provider, "model": "m", url: "http://model.invalid:9"}
    )
    decision = DecisionSpec("q", "choice", ("yes", "no"))
    backend = backend_class(provider).from_config(config, name="b", decision=decision)
    assert not secrets.has_secrets()
    backend.request_headers()
    assert scrub_text("via proxy-pw-31 and proxy-pw-47") == f"via {REDACTED} and {REDACTED}"
    assert scrub_text("proxyuser") == "proxyuser"  # a user name is not a secret


def test_scrub_is_thread_safe_while_registering():
    import threading

    stop = threading.Event()
    seen: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            seen.append(scrub_text("alpha-secret-0 beta"))

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(200):
        register_secret(f"alpha-secret-{i}")
    stop.set()
    thread.join()
    assert scrub_text("alpha-secret-0 beta") == f"{REDACTED} beta"
    assert all(text in ("alpha-secret-0 beta", f"{REDACTED} beta") for text in seen)


@pytest.mark.parametrize("count", [1, 50])
def test_many_secrets(count):
    for i in range(count):
        register_secret(f"s{i:03d}-value")
    text = " ".join(f"s{i:03d}-value" for i in range(count))
    assert scrub_text(text) == " ".join([REDACTED] * count)


@pytest.mark.parametrize("debug", ["", "1"])
def test_internal_errors_and_tracebacks_are_scrubbed(capsys, monkeypatch, debug):
    """Any exception text may quote a model; the CLI prints it scrubbed, traceback too."""
    from decguard_pipeline.cli.errors import handled

    monkeypatch.setenv("DECGUARD_DEBUG", debug)
    register_secret(TOKEN)
    with pytest.raises(SystemExit) as exit_info, handled():
        raise RuntimeError(f"plugin failed with {TOKEN}")
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"internal error: RuntimeError: plugin failed with {REDACTED}" in err
    assert TOKEN not in err
    assert ("Traceback (most recent call last)" in err) == bool(debug)

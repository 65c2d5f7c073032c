"""``${NAME}`` and ``${NAME:-default}`` placeholders (core/env_placeholders.py): expanded for
declared variables only, and every value read registered as a secret."""

from __future__ import annotations

import pytest

from decguard_pipeline.core.env_placeholders import expand, placeholder_names, undeclared
from decguard_pipeline.core.secrets import scrub_text


def test_placeholders_expand_from_the_environment():
    env = {"HOST": "http://10.0.0.7:8000", "EMPTY": ""}
    declared = ["HOST", "NOPE", "EMPTY"]
    assert expand("${HOST}/v1", declared, env) == "http://10.0.0.7:8000/v1"
    assert expand("${NOPE:-http://127.0.0.1:1}/v1", declared, env) == "http://127.0.0.1:1/v1"
    assert expand("${EMPTY:-fallback}", declared, env) == "fallback"  # empty counts as unset
    assert expand("$HOST and ${ not one} and $", (), env) == "$HOST and ${ not one} and $"
    assert placeholder_names("${A}/${B:-x}/$C") == ["A", "B"]
    with pytest.raises(ValueError, match="environment variable NOPE is not set"):
        expand("${NOPE}/v1", declared, env)


def test_only_declared_variables_expand_and_their_values_become_secrets():
    env = {"HOST": "http://10.0.0.7:8000", "AWS_SECRET_ACCESS_KEY": "wJalr-not-for-urls"}
    text = "http://x/${AWS_SECRET_ACCESS_KEY:-none}/v1"
    assert undeclared(text, ["HOST"]) == ["AWS_SECRET_ACCESS_KEY"]
    with pytest.raises(
        ValueError, match=r"^\$\{AWS_SECRET_ACCESS_KEY\} is not declared in url_env"
    ):
        expand(text, ["HOST"], env)  # not even its default: the contract asked for the variable
    assert scrub_text("wJalr-not-for-urls") == "wJalr-not-for-urls"  # never read
    assert expand("${HOST}/v1", ["HOST"], env) == "http://10.0.0.7:8000/v1"
    assert scrub_text("at http://10.0.0.7:8000/v1") == "at [REDACTED]/v1"

"""``${NAME}`` and ``${NAME:-default}`` placeholders (core/env_placeholders.py)."""

from __future__ import annotations

import pytest

from decguard_pipeline.core.env_placeholders import expand, placeholder_names


def test_placeholders_expand_from_the_environment():
    env = {"HOST": "http://10.0.0.7:8000", "EMPTY": ""}
    assert expand("${HOST}/v1", env) == "http://10.0.0.7:8000/v1"
    assert expand("${NOPE:-http://127.0.0.1:1}/v1", env) == "http://127.0.0.1:1/v1"
    assert expand("${EMPTY:-fallback}", env) == "fallback"  # empty counts as unset
    assert expand("$HOST and ${ not one} and $", env) == "$HOST and ${ not one} and $"
    assert placeholder_names("${A}/${B:-x}/$C") == ["A", "B"]
    with pytest.raises(ValueError, match="environment variable NOPE is not set"):
        expand("${NOPE}/v1", env)

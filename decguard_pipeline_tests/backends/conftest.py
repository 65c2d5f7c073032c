"""Fixtures of the backend tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(params=["lean", "aiohttp"])
def batch_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test once through each batch HTTP client: the lean client that plain http://
    URLs get (backends/plain_http.py) and aiohttp (https, proxies, and
    ``DECGUARD_HTTP_CLIENT=aiohttp``), which must behave alike."""
    if request.param == "aiohttp":
        monkeypatch.setenv("DECGUARD_HTTP_CLIENT", "aiohttp")
    else:
        monkeypatch.delenv("DECGUARD_HTTP_CLIENT", raising=False)
    yield request.param

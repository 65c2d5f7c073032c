"""A warehouse catalog in PostgreSQL, as a team shares one: a fresh database of the session's
server (support/postgres.py), named by ``DECGUARD_CATALOG`` without its password, which libpq
takes from ``PGPASSWORD``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from decguard_pipeline_tests.support.postgres import Server


def catalog_env(server: Server, url: str) -> dict[str, str]:
    """The variables that make a warehouse's catalog the database ``url`` names."""
    return {
        "DECGUARD_CATALOG": url.replace(f":{server.password}@", "@"),
        "PGPASSWORD": server.password,
    }


@pytest.fixture
def pg_catalog(postgres_server: Server, pg_url: str) -> Iterator[dict[str, str]]:
    """A fresh PostgreSQL catalog, its variables set for the test (and its children)."""
    env = catalog_env(postgres_server, pg_url)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        yield env

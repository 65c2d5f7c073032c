"""A PostgreSQL instance's first opening, serialised across machines.

Dagster creates a PostgreSQL instance's tables when a process first opens it and retries
only a duplicate *table*. Two machines opening a fresh database at the same moment also race
on the row types PostgreSQL makes with each table (``type "run_tags" already exists``,
``DuplicateObject``), and one of them fails. Opening is therefore done under a PostgreSQL
advisory lock, the same on every machine sharing the database: what the instance folder's
lock (``instance._locked``) does for the processes of one machine. Once the tables exist it
costs one connection per opening.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

# pg_advisory_lock's key: "decguard" as a 64-bit integer, one lock per database
LOCK_KEY = int.from_bytes(b"decguard", "big") - (1 << 63)
WAIT_S = 120.0  # then the opening goes ahead unlocked (a creation takes well under a second)


def _resolved(value: Any) -> Any:
    """A config value with Dagster's ``{env: NAME}`` forms read from the environment (None
    where a variable is unset)."""
    if isinstance(value, Mapping):
        if set(value) == {"env"}:
            return os.environ.get(str(value["env"]))
        return {key: _resolved(item) for key, item in value.items()}
    return value


def database_url(config: Any) -> str | None:
    """The URL of the database an instance config's ``storage: postgres`` names (its
    variables read from the environment); None for any other storage, or when it cannot
    be made (Dagster then says why, when it opens the instance)."""
    storage = config.get("storage") if isinstance(config, Mapping) else None
    section = storage.get("postgres") if isinstance(storage, Mapping) else None
    if not isinstance(section, Mapping):
        return None
    resolved = _resolved(section)
    try:
        from dagster_postgres.utils import pg_url_from_config

        db = resolved.get("postgres_db")
        if isinstance(db, Mapping):
            resolved["postgres_db"] = {k: v for k, v in db.items() if v is not None}
        url = pg_url_from_config(resolved)
    except Exception:  # an incomplete config, or dagster-postgres not installed
        return None
    if not isinstance(url, str) or not url:
        return None
    # SQLAlchemy's driver suffix (postgresql+psycopg2://, docs/deploy.md) is not libpq's
    return re.sub(r"^(postgres(?:ql)?)\+[A-Za-z0-9_]+://", r"\1://", url)


@contextlib.contextmanager
def creation_lock(url: str | None) -> Iterator[None]:
    """Hold the database's advisory lock for the block (``url`` None: no lock), waiting at most
    :data:`WAIT_S` for it. A database that cannot be reached is left to Dagster, which
    reports it when it opens the instance."""
    connection = None
    if url is not None:
        try:
            import psycopg2

            connection = psycopg2.connect(url, connect_timeout=30)
        except Exception:
            connection = None
    if connection is None:
        yield
        return
    try:
        connection.autocommit = True
        deadline = time.monotonic() + WAIT_S
        with connection.cursor() as cursor:
            while True:  # a holder that hangs delays the others by WAIT_S, never forever
                cursor.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,))
                if cursor.fetchone()[0] or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        yield
    finally:
        connection.close()  # the session ends, and its advisory lock with it

"""A throwaway PostgreSQL server for the tests and benchmarks.

Debian's server binaries (``apt-get install postgresql``: /usr/lib/postgresql/<ver>/bin), a
temporary data directory, a free loopback port, password authentication, no Unix socket.
PostgreSQL refuses to run as root, so when the tests run as root (CI does) the server runs as
the unprivileged ``nobody`` user (``DECGUARD_PG_USER`` names another one), in a data directory
under the system temp folder that this user owns; as any other user it runs as that user.

    server = start()                 # raises Unavailable with the reason
    url = server.create_database()   # a fresh, empty database: postgresql://...
    server.stop()
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

USER = "decguard"  # the database superuser initdb creates
PG_BIN_ENV = "DECGUARD_PG_BIN"  # a bin folder holding initdb and postgres, if not Debian's
PG_USER_ENV = "DECGUARD_PG_USER"


class Unavailable(RuntimeError):
    """No server could be started here (binaries missing, no user to run it, ...)."""


def bin_dir() -> Path:
    """The folder of ``initdb`` and ``postgres``: $DECGUARD_PG_BIN, else the newest
    /usr/lib/postgresql/<version>/bin."""
    if os.environ.get(PG_BIN_ENV):
        return Path(os.environ[PG_BIN_ENV])
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda p: [int(n) for n in re.findall(r"\d+", p.parent.parent.name)],
    )
    if not found:
        raise Unavailable(
            "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin "
            f"(apt-get install postgresql, or set {PG_BIN_ENV})"
        )
    return found[-1].parent


def server_user() -> pwd.struct_passwd | None:
    """The account the server runs as: None for the current one; ``nobody`` (or
    $DECGUARD_PG_USER) when we are root, which PostgreSQL refuses."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get(PG_USER_ENV, "nobody")
    try:
        return pwd.getpwnam(name)
    except KeyError as exc:
        raise Unavailable(
            f"running as root and there is no user {name!r} to run the server"
        ) from exc


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    port: int
    password: str
    data: Path
    process: subprocess.Popen[bytes]
    databases: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{self.password}@{self.host}:{self.port}/{database}"

    def env(self, database: str) -> dict[str, str]:
        """The ``DAGSTER_PG_*`` variables naming one database (the alternative to the URL)."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USERNAME": USER,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": database,
        }

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; its URL."""
        import psycopg2

        name = name or f"t_{uuid.uuid4().hex[:12]}"
        connection = psycopg2.connect(self.url())
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        self.databases.append(name)
        return self.url(name)

    def query(self, database: str, sql: str) -> list[tuple]:
        import psycopg2

        connection = psycopg2.connect(self.url(database))
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql)
                return cursor.fetchall()
        finally:
            connection.close()

    def log(self) -> str:
        path = self.data / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown: ends sessions, no wait
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.data.parent, ignore_errors=True)


def _as(user: pwd.struct_passwd | None) -> dict[str, object]:
    """Popen arguments that run a child as ``user`` (nothing when None)."""
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def start(*, durable: bool = False, auth: str = "scram-sha-256", timeout_s: float = 60.0) -> Server:
    """Initialise and start a server. ``durable``: PostgreSQL's default fsync and commit
    settings (what a benchmark must measure); otherwise both off, which tests do not need.
    ``auth``: the method of TCP connections (``trust`` lets a benchmark show what password
    authentication costs per connection)."""
    binaries = bin_dir()
    user = server_user()
    root = Path(tempfile.mkdtemp(prefix="decguard-pg-"))
    data = root / "data"
    password = secrets.token_hex(12)
    (root / "pwfile").write_text(password + "\n")
    if user is not None:  # the server's user owns the folder; /tmp itself is world-traversable
        os.chmod(root, 0o700)
        for path in (root, root / "pwfile"):
            os.chown(path, user.pw_uid, user.pw_gid)
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
    done = subprocess.run(
        [str(binaries / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={root / 'pwfile'}",
         f"--auth-host={auth}", "--auth-local=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
        cwd=root, env=env, capture_output=True, text=True, **_as(user),
    )  # fmt: skip
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise Unavailable(f"initdb failed: {(done.stderr or done.stdout).strip()[-500:]}")
    settings = [] if durable else ["-c", "fsync=off", "-c", "synchronous_commit=off",
                                   "-c", "full_page_writes=off"]  # fmt: skip
    for _ in range(5):  # the port is free when chosen; another process may take it first
        port = free_port()
        with open(data / "server.log", "ab") as log:
            process = subprocess.Popen(
                [str(binaries / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1",
                 "-k", "", "-c", "max_connections=200", *settings],
                cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, **_as(user),
            )  # fmt: skip
        server = Server(port, password, data, process)
        if _wait_ready(server, timeout_s):
            return server
        if process.poll() is None:
            process.kill()
            process.wait()
        if "could not bind" not in server.log():
            break
    log_text = server.log()
    shutil.rmtree(root, ignore_errors=True)
    raise Unavailable(f"the server did not start: {log_text.strip()[-800:]}")


def _wait_ready(server: Server, timeout_s: float) -> bool:
    import psycopg2

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            psycopg2.connect(server.url(), connect_timeout=2).close()
            return True
        except psycopg2.OperationalError:
            time.sleep(0.1)
    return False


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """One server for the session; the tests that need it skip with the reason when it cannot
    be started, except in CI (``CI`` set), where PostgreSQL is installed by .ci/run."""
    try:
        server = start()
    except (Unavailable, ImportError, OSError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI and could not be started: {exc}")
        pytest.skip(f"no PostgreSQL server could be started here: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(postgres_server: Server) -> str:
    """The URL of a fresh database on the session's server (one per test)."""
    return postgres_server.create_database()

"""A real S3 endpoint on loopback for the tests: moto's standalone server (``moto[server]``,
the test extra) in a child process on a free port, answering the S3 REST API over HTTP as
AWS does (conditional creates included). Each test gets a fresh bucket.

    server = start()                  # raises Unavailable with the reason
    bucket = server.create_bucket()
    server.env()                      # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ... for it
    server.objects(bucket)            # every object: key -> bytes
    server.stop()

The access key and secret are random per server, so a test can look for them in everything
the pipeline wrote and be sure any hit came from the pipeline.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from decguard_pipeline_tests.support.postgres import free_port


class Unavailable(RuntimeError):
    """No S3 server could be started here."""


@dataclass
class S3Server:
    port: int
    process: subprocess.Popen[bytes]
    key_id: str = field(default_factory=lambda: "AKIA" + secrets.token_hex(8).upper())
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(30))
    buckets: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The standard AWS variables pointing at this server (nothing else is needed)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",  # never ask for an instance role
        }

    def client(self) -> Any:  # boto3 ships no types
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
            region_name="us-east-1",
        )

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"b-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        self.buckets.append(name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        client, keys, token = self.client(), [], None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = client.list_objects_v2(Bucket=bucket, Prefix=prefix, **extra)
            keys += [o["Key"] for o in page.get("Contents", [])]
            token = page.get("NextContinuationToken")
            if not token:
                return keys

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        client = self.client()
        return {
            k: client.get_object(Bucket=bucket, Key=k)["Body"].read()
            for k in self.keys(bucket, prefix)
        }

    def incomplete_uploads(self, bucket: str) -> list[str]:
        page = self.client().list_multipart_uploads(Bucket=bucket)
        return [u["Key"] for u in page.get("Uploads", [])]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(timeout_s: float = 60.0) -> S3Server:
    try:
        import moto.server  # noqa: F401
    except ImportError as exc:
        raise Unavailable(f"moto[server] is not installed ({exc})") from exc
    import httpx

    reason = ""
    for _ in range(5):  # the port is free when chosen; another process may take it first
        port = free_port()
        # the server logs every request: to a file, never to a pipe nobody reads (a full
        # pipe blocks the server mid-request)
        log = tempfile.TemporaryFile()  # noqa: SIM115 (the server writes it after we return)
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process.poll() is None:
            try:
                httpx.get(f"http://127.0.0.1:{port}/moto-api/", timeout=2)
                log.close()
                return S3Server(port, process)
            except httpx.HTTPError:
                time.sleep(0.1)
        if process.poll() is None:
            process.kill()
        process.wait()
        log.seek(0)
        reason = log.read().decode(errors="replace").strip()[-500:]
        log.close()
        if "in use" not in reason:
            break
    raise Unavailable(f"moto's S3 server did not start: {reason or 'no answer'}")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One S3 server for the session, its variables set for the whole session (the
    warehouse's S3 client is made once per process, from the environment). Tests needing it
    skip with the reason when it cannot start, except in CI (``CI`` set), where moto is
    installed by the test extra."""
    try:
        server = start()
    except Unavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the S3 server (moto) is required in CI and did not start: {exc}")
        pytest.skip(f"no S3 server could be started here: {exc}")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in server.env().items():
            patch.setenv(name, value)
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A fresh bucket on the session's S3 server."""
    return s3_server.create_bucket()

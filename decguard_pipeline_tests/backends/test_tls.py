"""HTTPS backends share one certificate-verifying context per process (backends/transport.py
``tls_context``), made for the trust settings in the environment. Checked against a real
loopback HTTPS server whose self-signed certificate only ``SSL_CERT_FILE`` makes trusted."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from decguard_pipeline.backends.http import HttpBackend, HttpSettings
from decguard_pipeline.backends.transport import tls_context

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"model_version": "tls-v1"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTPS server; its URL and its self-signed certificate's file."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


def _backend(url: str) -> HttpBackend:
    return HttpBackend(HttpSettings(url=f"{url}/decide", health_url=f"{url}/health"))


def test_one_context_per_trust_setting(monkeypatch, tmp_path: Path):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first = tls_context()
    assert tls_context() is first
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    assert tls_context() is not first


def test_a_certificate_trusted_through_the_environment(https_server, monkeypatch):
    url, cert = https_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    backends = [_backend(url), _backend(url)]
    assert [b.healthcheck()["status"] for b in backends] == ["ok", "ok"]
    assert backends[0].version_hint() == "tls-v1"


def test_an_untrusted_certificate_is_refused(https_server, monkeypatch):
    url, _ = https_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    health = _backend(url).healthcheck()
    # the same server answers once its certificate is trusted (the test above): refused here
    # at the handshake, reported as DecGuard reports a connection it could not make
    assert health == {
        "status": "unhealthy",
        "detail": "cannot connect to backend 'default': ConnectError",
    }

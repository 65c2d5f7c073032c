"""The report-files server of ``decguard-pipeline ui``: serves the files under the folder,
no listing, nothing outside it, loopback only; and the links the assets show point into it."""

from __future__ import annotations

import http.client
import os
import socket
from pathlib import Path

import pytest

from decguard_pipeline.cli.report_server import serve_reports
from decguard_pipeline.defs.report_links import file_links, report_url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_serves_report_files_only(tmp_path, monkeypatch):
    folder = tmp_path / "wh" / "report_files"
    page = folder / "contract=refund" / "target=default@v1" / "x.html"
    page.parent.mkdir(parents=True)
    page.write_text("<p>report</p>")
    (tmp_path / "wh" / "secret.txt").write_text("not served")
    port = free_port()
    server = serve_reports(folder, port)
    try:
        assert server.server_address[0] == "127.0.0.1"
        monkeypatch.setenv("DECGUARD_REPORTS_URL", f"http://127.0.0.1:{port}/")
        url = report_url(page)
        assert url == f"http://127.0.0.1:{port}/contract=refund/target=default@v1/x.html"
        assert get(port, url.split(str(port), 1)[1]) == (200, b"<p>report</p>")
        assert get(port, "/contract=refund/")[0] == 404  # no listing
        assert get(port, "/../secret.txt")[0] == 404
        assert get(port, "/%2e%2e/secret.txt")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("base", ["", None])
def test_links_without_a_server_are_paths_only(tmp_path, monkeypatch, base):
    page = tmp_path / "report_files" / "c" / "x.html"
    if base is None:  # the default: the server `ui` starts
        monkeypatch.delenv("DECGUARD_REPORTS_URL", raising=False)
        links = file_links("report_html", page)
        assert links["report_html"].value == "http://localhost:3001/c/x.html"
    else:
        monkeypatch.setenv("DECGUARD_REPORTS_URL", base)
        links = file_links("report_html", page)
        assert list(links) == ["report_html_path"]
    assert links["report_html_path"].value == str(page)
    assert report_url(tmp_path / "elsewhere.html") is None  # not under report_files


def test_nothing_outside_the_folder_through_links_dotfiles_or_special_files(tmp_path):
    """Real symbolic links, hidden files, a FIFO and a device, fetched over real HTTP: only
    regular files that resolve inside the folder are served."""
    folder = tmp_path / "report_files"
    page = folder / "contract=c" / "target=t" / "x.html"
    page.parent.mkdir(parents=True)
    page.write_text("<p>report</p>")
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    (folder / ".env").write_text("TOKEN=1")
    (folder / "contract=c" / ".hidden").mkdir()
    (folder / "contract=c" / ".hidden" / "y.html").write_text("hidden")
    links = {
        "passwd.html": Path("/etc/passwd"),
        "secret.html": secret,
        "up": tmp_path,  # a folder link out
        "zero.html": Path("/dev/zero"),
        "env.html": folder / ".env",  # inside, but a dotfile
        "loop.html": folder / "loop.html",
        "same.html": page,  # inside: served
    }
    for name, target in links.items():
        (folder / name).symlink_to(target)
    os.mkfifo(folder / "fifo.html")
    port = free_port()
    server = serve_reports(folder, port)
    try:
        assert get(port, "/contract=c/target=t/x.html") == (200, b"<p>report</p>")
        assert get(port, "/same.html") == (200, b"<p>report</p>")
        for path in (
            "/passwd.html", "/secret.html", "/up/secret.txt", "/zero.html", "/env.html",
            "/.env", "/%2eenv", "/contract=c/.hidden/y.html", "/loop.html", "/fifo.html",
            "/contract=c/target=t/",
        ):  # fmt: skip
            status, body = get(port, path)
            assert status == 404, (path, status, body[:80])
            assert b"outside" not in body and b"root:" not in body and b"TOKEN" not in body
    finally:
        server.shutdown()
        server.server_close()


def test_a_served_file_is_sent_as_long_as_announced(tmp_path):
    folder = tmp_path / "report_files"
    folder.mkdir()
    (folder / "big.json").write_bytes(b"x" * 300_000)
    port = free_port()
    server = serve_reports(folder, port)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("HEAD", "/big.json")
        response = connection.getresponse()
        assert response.status == 200 and response.getheader("Content-Length") == "300000"
        assert response.read() == b""
        connection.close()
        assert get(port, "/big.json") == (200, b"x" * 300_000)
    finally:
        server.shutdown()
        server.server_close()

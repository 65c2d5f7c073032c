"""The report-files server of ``decguard-pipeline ui``: serves the files under the folder,
no listing, nothing outside it, loopback only; and the links the assets show point into it."""

from __future__ import annotations

import http.client
import socket

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

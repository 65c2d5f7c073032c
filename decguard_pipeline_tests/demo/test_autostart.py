"""The demo server started for a command whose contract names it (demo/autostart.py), and the
per-model open-jev path it serves."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.demo.autostart import (
    DEMO_URL_VARIABLE,
    demo_server_for,
    names_demo_server,
)
from decguard_pipeline.demo.llm_server import belief, serve_demo
from decguard_pipeline_tests.conftest import EXAMPLE_NAMES, EXAMPLES

TICKETS = EXAMPLES / "tickets" / "decguard.yaml"
OPTIONS = ["billing", "technical", "sales"]
TEXT = "I was charged twice, and the app shows an error."


@pytest.fixture(autouse=True)
def _unset(monkeypatch):
    monkeypatch.delenv(DEMO_URL_VARIABLE, raising=False)


def test_only_the_tickets_example_names_the_demo_server():
    assert names_demo_server(load_contract(TICKETS).contract)
    for name in (*EXAMPLE_NAMES, "injection"):
        assert not names_demo_server(load_contract(EXAMPLES / name / "decguard.yaml").contract)


def test_started_for_the_block_then_stopped():
    contract = load_contract(TICKETS).contract
    with demo_server_for([contract]) as url:
        assert url is not None and url.startswith("http://127.0.0.1:")
        assert os.environ[DEMO_URL_VARIABLE] == url
        models = httpx.get(f"{url}/v1/models").json()["data"]
        assert "tickets-calibrated" in [m["id"] for m in models]
    assert DEMO_URL_VARIABLE not in os.environ
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/v1/models")


def test_not_started_when_not_named_or_already_given(monkeypatch):
    refund = load_contract(EXAMPLES / "refund" / "decguard.yaml").contract
    with demo_server_for([refund]) as url:
        assert url is None and DEMO_URL_VARIABLE not in os.environ
    monkeypatch.setenv(DEMO_URL_VARIABLE, "http://127.0.0.1:9")  # someone's own server
    with demo_server_for([load_contract(TICKETS).contract]) as url:
        assert url is None and os.environ[DEMO_URL_VARIABLE] == "http://127.0.0.1:9"
    assert os.environ[DEMO_URL_VARIABLE] == "http://127.0.0.1:9"


def test_openjev_answers_with_the_model_in_the_path_unless_the_body_names_one():
    body = {"context": TEXT, "options": OPTIONS, "norm": "mean", "chat": False, "sep": " "}
    with serve_demo() as server:
        default = httpx.post(f"{server.url}/score", json=body).json()
        under = httpx.post(f"{server.url}/tickets-underconfident/score", json=body).json()
        named = httpx.post(
            f"{server.url}/tickets-underconfident/score",
            json={**body, "model": "tickets-overconfident"},
        ).json()
    assert default["probability"] == belief(TEXT, OPTIONS, "tickets-calibrated")
    assert under["probability"] == belief(TEXT, OPTIONS, "tickets-underconfident")
    assert under["model"] == "tickets-underconfident-2026-01-15"
    assert named["probability"] == belief(TEXT, OPTIONS, "tickets-overconfident")
    assert max(under["probability"]) < max(default["probability"])


def test_in_its_own_process_started_for_the_block_then_stopped():
    contract = load_contract(TICKETS).contract
    with demo_server_for([contract], own_process=True) as url:
        assert url is not None and os.environ[DEMO_URL_VARIABLE] == url
        body = {"context": TEXT, "options": OPTIONS}
        answer = httpx.post(f"{url}/tickets-underconfident/score", json=body, timeout=30).json()
        assert answer["probability"] == belief(TEXT, OPTIONS, "tickets-underconfident")
    assert DEMO_URL_VARIABLE not in os.environ
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/v1/models")


PARENT = """
import os, sys, time
from decguard_pipeline.demo.process import serve_demo_process
with serve_demo_process() as url:
    children = open(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read().split()
    print(url, *children, flush=True)
    time.sleep(60)
"""


@pytest.mark.slow
def test_its_own_process_goes_when_the_parent_is_killed():
    """kill -9 of the command: the server's stdin reaches end of file and it exits, leaving
    no process and no listening port behind."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        url, child = parent.stdout.readline().split()
        # the first request may arrive before the child serves: it waits in the backlog
        assert httpx.get(f"{url}/v1/models", timeout=30).status_code == 200
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{child}/stat").read_text(errors="replace")
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # exited, not yet reaped by init
            break
        time.sleep(0.05)
    else:
        assert not Path(f"/proc/{child}").exists(), "the demo server outlived its parent"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/v1/models")

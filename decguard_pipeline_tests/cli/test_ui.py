"""``decguard-pipeline ui`` starts the bundled demo LLM server, as ``evaluate`` does, when a
contract names it: ``dagster dev`` (here a stand-in executable next to the interpreter, which
records what it was given) and every process under it — the code server, the daemon's
sensors, the runs the UI launches — get its address, and it answers while the UI runs. Without
it the sensor could not reach the tickets example's backends (``ConnectError`` every tick)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import httpx

from decguard_pipeline.demo.autostart import DEMO_URL_VARIABLE
from decguard_pipeline_tests.conftest import EXAMPLES

# the stand-in for `dagster dev`: what it saw, and whether the demo server answered it
STAND_IN = """#!{python}
import json, os, sys, urllib.request
url = os.environ.get("{variable}")
seen = {{"argv": sys.argv[1:], "url": url, "models": None}}
if url:
    with urllib.request.urlopen(url + "/v1/models", timeout=30) as answer:
        seen["models"] = [m["id"] for m in json.load(answer)["data"]]
open({out!r}, "w").write(json.dumps(seen))
"""


def _ui(tmp_path: Path, monkeypatch, ours, contracts: Path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    out = tmp_path / "seen.json"
    stand_in = bin_dir / "dagster"
    stand_in.write_text(
        STAND_IN.format(python=sys.executable, variable=DEMO_URL_VARIABLE, out=str(out))
    )
    stand_in.chmod(0o755)
    # `ui` runs the `dagster` next to the interpreter (the demo server runs the interpreter)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DECGUARD_CONTRACTS", str(contracts))
    monkeypatch.setenv("DECGUARD_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.setenv("DECGUARD_REPORTS_URL", "")  # served elsewhere: no port taken here
    monkeypatch.delenv(DEMO_URL_VARIABLE, raising=False)
    ran = ours("ui", "--port", "3999")
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    return {**json.loads(out.read_text()), "stderr": ran.stderr}


def test_ui_serves_the_demo_server_to_dagster_dev(tmp_path, monkeypatch, ours):
    contracts = tmp_path / "contracts"
    shutil.copytree(EXAMPLES / "tickets", contracts / "tickets")
    seen = _ui(tmp_path, monkeypatch, ours, contracts)
    assert seen["argv"][:2] == ["dev", "-w"] and "3999" in seen["argv"]
    url = seen["url"]
    assert url is not None and url.startswith("http://127.0.0.1:")
    assert "tickets-calibrated" in seen["models"]  # it answered dagster dev's process
    assert f"demo LLM server on {url}/" in seen["stderr"]
    # stopped with the UI, and the variable is this command's only
    try:
        httpx.get(url + "/v1/models", timeout=5)
        raise AssertionError("the demo server outlived the UI")
    except httpx.ConnectError:
        pass
    assert DEMO_URL_VARIABLE not in __import__("os").environ


def test_no_demo_server_when_no_contract_names_it(tmp_path, monkeypatch, ours):
    contracts = tmp_path / "contracts"
    shutil.copytree(EXAMPLES / "spam", contracts / "spam")
    seen = _ui(tmp_path, monkeypatch, ours, contracts)
    assert seen["url"] is None and "demo LLM server" not in seen["stderr"]

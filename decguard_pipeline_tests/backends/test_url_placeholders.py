"""The language-model providers' URLs take ``${NAME}`` placeholders for the variables the
backend declares in ``url_env``, expanded from the environment when the settings load; the
contract (and its hash) keeps them, and an expanded value is redacted like a key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decguard_pipeline.backends.registry import create_backend
from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline_tests.support.llm_servers import chat_answer, llm_server

CONTRACT = """\
schema_version: "0.1"
decision: {name: q, type: choice, options: [a, b]}
backend:
  provider: openai
  model: m
  base_url: "${DG_TEST_LLM:-http://127.0.0.1:9}/v1"
  url_env: [DG_TEST_LLM]
backends:
  jev:
    provider: openjev
    url: ${DG_TEST_LLM}/m/score
    url_env: [DG_TEST_LLM]
"""


def test_engine_urls_expand_when_the_settings_load(tmp_path, monkeypatch):
    contract = tmp_path / "decguard.yaml"
    contract.write_text(CONTRACT)
    monkeypatch.delenv("DG_TEST_LLM", raising=False)
    loaded = load_contract(contract)
    spec = loaded.contract.spec()
    assert create_backend(loaded.contract.backend, decision=spec).settings.base_url == (
        "http://127.0.0.1:9/v1"
    )
    with pytest.raises(ContractError, match=r"backend\.url: environment variable DG_TEST_LLM"):
        create_backend(loaded.contract.backends["jev"], decision=spec)
    monkeypatch.setenv("DG_TEST_LLM", "http://127.0.0.1:4567")
    jev = create_backend(loaded.contract.backends["jev"], decision=spec)
    assert jev.settings.url == "http://127.0.0.1:4567/m/score"
    assert load_contract(contract).hash == loaded.hash  # the contract keeps the placeholder
    monkeypatch.setenv("DG_TEST_LLM", "http://user:pw@127.0.0.1:4567")
    with pytest.raises(ContractError, match="must not embed credentials"):
        create_backend(loaded.contract.backends["jev"], decision=spec)


SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY"


def leaky(url: str, extra: str = "") -> str:
    return (
        'schema_version: "0.1"\n'
        'decision: {name: q, type: choice, options: ["yes", "no"]}\n'
        "backend:\n"
        "  provider: openai\n"
        "  model: m\n"
        f'  base_url: "{url}"\n' + extra + "dataset: cases.jsonl\n"
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/${AWS_SECRET_ACCESS_KEY:-none}/v1",
        "http://127.0.0.1:9/${AWS_SECRET_ACCESS_KEY}/v1",
    ],
)
def test_a_placeholder_for_an_undeclared_variable_is_a_contract_error(
    tmp_path, monkeypatch, ours, url
):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.chdir(tmp_path)
    Path("cases.jsonl").write_text('{"id": "a", "input": "x", "expected": "yes"}\n')
    Path("c.yaml").write_text(leaky(url))
    ran = [ours("validate", "c.yaml"), ours("test", "c.yaml")]
    for result in ran:
        assert result.exit_code == 2
        assert (
            "backend.base_url: ${AWS_SECRET_ACCESS_KEY} is not declared in url_env" in result.stderr
        )
        assert SECRET not in result.stdout + result.stderr
    # a variable declared for another purpose is not declared for this one
    Path("c.yaml").write_text(leaky(url, "  url_env: [DG_TEST_LLM]\n"))
    assert ours("validate", "c.yaml").exit_code == 2


def test_a_declared_variables_value_is_sent_but_stored_and_printed_redacted(
    tmp_path, monkeypatch, ours
):
    """The value reaches the server (it is the URL), and no report, sidecar, output, diff or
    warehouse row: there it is redacted like a key."""
    from decguard_pipeline.runs.golden import run_test

    monkeypatch.chdir(tmp_path)
    Path("cases.jsonl").write_text('{"id": "a", "input": "x", "expected": "yes"}\n')
    answer = chat_answer("A", top_logprobs=[("A", -0.2), ("B", -1.8)])
    with llm_server(lambda seen: (200, answer, {})) as server:
        monkeypatch.setenv("DG_PATH_TOKEN", SECRET)
        url = f"{server.url}/${{DG_PATH_TOKEN}}/v1"
        Path("c.yaml").write_text(leaky(url, "  url_env: [DG_PATH_TOKEN]\n"))
        ran = ours("test", "c.yaml", "-o", "r.json")
        diffed = ours("diff", "r.json", "r.json", "-o", "d.json")
        report = run_test("c.yaml")
        paths = {seen.path for seen in server.seen}
    assert ran.exit_code == 0, ran.stderr
    assert f"/{SECRET}/v1/chat/completions" in paths  # sent: it is the address
    document = json.loads(Path("r.json").read_text())
    assert document["backend"]["details"]["url"] == f"{server.url}/[REDACTED]/v1"
    written = {
        "report": Path("r.json").read_text(),
        "sidecar": Path("r.pipeline.json").read_text() if Path("r.pipeline.json").exists() else "",
        "diff": Path("d.json").read_text(),
        "stdout": ran.stdout + ran.stderr + diffed.stdout + diffed.stderr,
        # what the runs table takes from a run: the backend's metadata
        "backend": json.dumps(report.document["backend"]),
    }
    assert {name: SECRET in text for name, text in written.items()} == dict.fromkeys(written, False)


@pytest.mark.slow
def test_evaluate_stores_no_declared_value_anywhere(tmp_path):
    """`evaluate` with a declared variable in the URL: the runs table (its backend details),
    every warehouse file and the Dagster instance hold no trace of the value."""
    import os
    import subprocess
    import sys

    from decguard_pipeline.warehouse import Warehouse

    folder = tmp_path / "contracts" / "leaky"
    folder.mkdir(parents=True)
    (folder / "cases.jsonl").write_text('{"id": "a", "input": "x", "expected": "yes"}\n')
    home, warehouse = tmp_path / "home", tmp_path / "warehouse"
    env = {**os.environ, "DAGSTER_HOME": str(home), "DG_PATH_TOKEN": SECRET}
    answer = chat_answer("A", top_logprobs=[("A", -0.2), ("B", -1.8)])
    with llm_server(lambda seen: (200, answer, {})) as server:
        url = f"{server.url}/${{DG_PATH_TOKEN}}/v1"
        (folder / "decguard.yaml").write_text(leaky(url, "  url_env: [DG_PATH_TOKEN]\n"))
        ran = subprocess.run(
            [str(Path(sys.executable).parent / "decguard-pipeline"), "evaluate", "--contracts",
             str(tmp_path / "contracts"), "--warehouse", str(warehouse)],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        asked = {seen.path for seen in server.seen}
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"/{SECRET}/v1/chat/completions" in asked
    with Warehouse(warehouse).connect() as con:
        (details,) = con.sql("SELECT backend_details_json FROM runs").fetchall()[0]
    assert json.loads(details)["url"] == f"{server.url}/[REDACTED]/v1"
    assert SECRET not in ran.stdout + ran.stderr
    assert [str(p) for p in (*warehouse.rglob("*"), *home.rglob("*")) if holds_secret(p)] == []


def holds_secret(path: Path) -> bool:
    """The secret in a file's name or bytes, or in a Parquet file's decoded values."""
    import pyarrow.parquet as pq

    if SECRET in str(path):
        return True
    if not path.is_file():
        return False
    if SECRET.encode() in path.read_bytes():
        return True
    return path.suffix == ".parquet" and SECRET in json.dumps(
        pq.read_table(path).to_pylist(), default=str
    )

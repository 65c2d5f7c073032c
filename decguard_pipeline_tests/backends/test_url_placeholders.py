"""The language-model providers' URLs take ``${NAME}`` placeholders, expanded from the
environment when the settings load; the contract (and its hash) keeps them."""

from __future__ import annotations

import pytest

from decguard_pipeline.backends.registry import create_backend
from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.errors import ContractError

CONTRACT = """\
schema_version: "0.1"
decision: {name: q, type: choice, options: [a, b]}
backend:
  provider: openai
  model: m
  base_url: "${DG_TEST_LLM:-http://127.0.0.1:9}/v1"
backends:
  jev:
    provider: openjev
    url: ${DG_TEST_LLM}/m/score
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

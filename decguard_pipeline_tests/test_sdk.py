"""The Python SDK (``DecGuard.from_contract(...).decide(...)``) against decguard 0.1.1's SDK
and against our own ``run``: same routes, results and errors; it closes only backends it
built."""

from __future__ import annotations

import json
import textwrap

import pytest

from decguard_pipeline.backends.mock import MockBackend
from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.errors import BackendError, ContractError, DecGuardError
from decguard_pipeline.sdk import DecGuard
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.test_policy import HTTP_CONTRACT, RULES

REFUND = EXAMPLES / "refund" / "decguard.yaml"
INPUTS = ["The blender arrived damaged", "The parcel never arrived", "Can someone call me?",
          {"text": "used it for a week", "order": 12}]  # fmt: skip


def _comparable(decision: dict) -> dict:
    result = {k: v for k, v in decision["result"].items() if k != "latency_ms"}
    return {**decision, "result": result}


@pytest.mark.parametrize("backend", [None, "order_sensitive", "strong_model"])
def test_decisions_match_reference_sdk(backend):
    from decguard.sdk import DecGuard as RefGuard

    with DecGuard.from_contract(REFUND, backend=backend) as mine, RefGuard.from_contract(
        REFUND, backend=backend
    ) as theirs:  # fmt: skip
        for value in INPUTS:
            a = mine.decide(value, case_id="c1")
            b = json.loads(theirs.decide(value, case_id="c1").model_dump_json())
            assert _comparable(a) == _comparable(b)


def test_sdk_and_cli_agree(ours):
    with DecGuard.from_contract(load_contract(REFUND), check_health=True) as guard:
        for text in INPUTS[:3]:
            sdk = guard.decide(text, case_id="runtime")
            cli = json.loads(ours("run", REFUND, text, "-f", "json").stdout)
            assert _comparable(sdk) == _comparable(cli)


def test_default_case_id_and_lazy_package_attribute():
    import decguard_pipeline

    assert decguard_pipeline.DecGuard is DecGuard
    with DecGuard.from_contract(REFUND) as guard:
        assert guard.decide("hello")["result"]["case_id"] == "sdk"


class CountingMock(MockBackend):
    """A real mock backend that remembers being closed."""

    closed = 0

    def close(self) -> None:
        CountingMock.closed += 1


def test_closes_only_backends_it_built():
    loaded = load_contract(REFUND)
    config = loaded.contract.backend_config("strong_model")
    mine = CountingMock.from_config(config, name="strong_model", decision=loaded.contract.spec())
    CountingMock.closed = 0
    with DecGuard.from_contract(loaded, backend=mine) as guard:
        assert guard.decide("x")["result"]["model"] == "refund-strong-v1"
    assert CountingMock.closed == 0
    guard = DecGuard.from_contract(loaded)
    assert guard._owned and not DecGuard(loaded, mine)._owned


def test_errors(write):
    plain = write(
        "plain.yaml",
        """
        schema_version: "0.1"
        decision: {name: spam, type: noul, labels: [spam, ham]}
        backend: {provider: mock}
        """,
    )
    with pytest.raises(ContractError, match=r"^the contract has no 'policy' section$"):
        DecGuard.from_contract(plain)
    with pytest.raises(ContractError, match="unknown backend 'nope'"):
        DecGuard.from_contract(REFUND, backend="nope")


def test_http_backend_failures_raise_typed_errors(loopback, write):
    server = loopback(RULES, labels=("refund", "reject", "review"))
    text = textwrap.dedent(HTTP_CONTRACT).replace("HEALTH", server.health_url)
    contract = write("http.yaml", text.replace("URL", server.url))
    with DecGuard.from_contract(contract, check_health=True) as guard:
        assert guard.decide("the mug arrived damaged")["action"] == "accept"
        with pytest.raises(BackendError) as caught:
            guard.decide("x", case_id="status=503")
        assert caught.value.kind == "unavailable"
        with pytest.raises(BackendError) as caught:
            guard.decide("x", case_id="garbage")
        assert caught.value.kind == "invalid_response"
    assert guard.backend._client is None  # built by the SDK, so closed by it
    server.behaviour.healthy = False
    with pytest.raises(DecGuardError, match=r"backend 'default' is unhealthy: HTTP 503"):
        DecGuard.from_contract(contract, check_health=True)

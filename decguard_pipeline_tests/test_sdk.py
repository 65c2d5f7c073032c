"""The Python SDK against decguard 0.1.1's, differentially: code written for
``decguard.DecGuard`` must run unchanged on ours. Same signatures, same PolicyDecision and
DecisionResult (fields, order, types, schema, repr, ``model_dump``/``model_dump_json`` bytes),
same routes, same exceptions (type name and message) for the same failures, over mock and
loopback HTTP backends; and the SDK agrees with our ``run`` command. (DecGuard 0.1.1 has no
async SDK, so neither do we.)"""

from __future__ import annotations

import inspect
import json
import random
import textwrap
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from pydantic import ValidationError

from decguard_pipeline.backends.mock import MockBackend
from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.sdk import (
    BackendError,
    ContractError,
    DecGuard,
    DecGuardError,
    DecisionResult,
    DecisionType,
    PolicyDecision,
)
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.policy_contracts import HTTP_CONTRACT, RULES

REFUND = EXAMPLES / "refund" / "decguard.yaml"
INPUTS = ["The blender arrived damaged", "The parcel never arrived", "Can someone call me?",
          "I changed my mind", {"text": "used it for a week", "order": 12}, "",
          {}, b"bytes are text to pydantic", "ünïcode never arrived 🚚"]  # fmt: skip
BAD_INPUTS: list[tuple[Any, dict[str, Any]]] = [
    (123, {}), (None, {}), (["a list"], {}), ({1: "int key"}, {}), (4.5, {}),
    ("x", {"case_id": 5}), ("x", {"case_id": None}), (None, {"case_id": 7}),
]  # fmt: skip


def _ref_guard() -> type:
    from decguard import DecGuard as RefGuard

    return RefGuard


def _fixed(decision: Any) -> Any:
    """The decision with its measured latency replaced, so two runs can be compared whole."""
    result = decision.result.model_copy(update={"latency_ms": 1.25})
    return decision.model_copy(update={"result": result})


@contextmanager
def both(contract: Any, **kwargs: Any) -> Iterator[tuple[Any, Any]]:
    with ExitStack() as stack:
        mine = stack.enter_context(DecGuard.from_contract(contract, **kwargs))
        theirs = stack.enter_context(_ref_guard().from_contract(contract, **kwargs))
        yield mine, theirs


def _outcome(call: Any) -> tuple[str, str]:
    """What a call produced: ``ok`` and the decision's JSON, or the exception's type and text."""
    try:
        made = call()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "ok", _fixed(made).model_dump_json() if hasattr(made, "result") else type(made).__name__


def _public_signature(function: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def _no_descriptions(schema: Any) -> Any:
    # the docstrings are our own words; everything else of the schema must match
    if isinstance(schema, dict):
        return {k: _no_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_no_descriptions(v) for v in schema]
    return schema


def test_same_signatures_and_models():
    from decguard.decisions import DecisionResult as RefResult
    from decguard.decisions import DecisionType as RefType
    from decguard.policy import PolicyDecision as RefDecision

    RefGuard = _ref_guard()
    # one documented extension: a keyword-only calibrator, last, defaulting to none
    extension = ("calibrator", inspect.Parameter.KEYWORD_ONLY, None)
    for name in ("__init__", "from_contract", "decide", "close", "__enter__", "__exit__"):
        ours = _public_signature(getattr(DecGuard, name))
        if name in ("__init__", "from_contract"):
            assert ours[-1] == extension, name
            ours = ours[:-1]
        assert ours == _public_signature(getattr(RefGuard, name)), name
    public = {name for name in dir(RefGuard) if not name.startswith("_")}
    assert public == {name for name in dir(DecGuard) if not name.startswith("_")}
    for ours, theirs in ((PolicyDecision, RefDecision), (DecisionResult, RefResult)):
        assert list(ours.model_fields) == list(theirs.model_fields)
        assert ours.model_config["frozen"] and ours.model_config["extra"] == "forbid"
        assert _no_descriptions(ours.model_json_schema()) == _no_descriptions(
            theirs.model_json_schema()
        )
    assert [(m.name, m.value) for m in DecisionType] == [(m.name, m.value) for m in RefType]


@pytest.mark.parametrize("backend", [None, "order_sensitive", "strong_model"])
def test_decisions_equal_the_reference(backend):
    with both(REFUND, backend=backend) as (mine, theirs):
        assert vars(mine).keys() == vars(theirs).keys()  # loaded, backend, _owned_backend
        for value in INPUTS:
            a, b = mine.decide(value, case_id="c1"), theirs.decide(input_data=value, case_id="c1")
            assert isinstance(a, PolicyDecision) and isinstance(a.result, DecisionResult)
            assert isinstance(a.result.decision_type, DecisionType)
            assert type(a.result.labels) is tuple and type(a.result.latency_ms) is float
            assert a.result.latency_ms >= 0.0
            a, b = _fixed(a), _fixed(b)
            assert a.model_dump() == b.model_dump()
            assert a.model_dump_json() == b.model_dump_json()
            assert a.model_dump_json(indent=2) == b.model_dump_json(indent=2)
            assert a.model_dump(mode="json") == b.model_dump(mode="json")
            assert repr(a) == repr(b)
            assert (a.action, a.fallback_backend, a.route_index) == (
                b.action, b.fallback_backend, b.route_index,
            )  # fmt: skip
            assert a.result.probabilities == b.result.probabilities
            assert list(a.result.probabilities) == list(a.result.labels)


def test_routing_equals_the_reference_on_random_answers(write):
    """Random distributions (a mock rule per input), including ties and the thresholds
    themselves: every route, action, fallback and result is the reference's."""
    rng = random.Random(10)
    rules = []
    for i in range(60):
        top = rng.choice([0.95, 0.75, rng.random(), 1 / 3, 0.5])
        second = (1.0 - top) / 2
        probabilities = {"refund": top, "reject": second, "review": 1.0 - top - second}
        rules.append({"contains": f"case{i:02d}!", "probabilities": probabilities})
    contract = {
        "schema_version": "0.1",
        "decision": {"name": "refund_request", "type": "choice",
                     "options": ["refund", "reject", "review"]},
        "backend": {"provider": "mock", "rules": rules},
        "backends": {"strong_model": {"provider": "mock"}},
        "policy": {"routes": [
            {"when": {"confidence_gte": 0.95}, "action": "accept"},
            {"when": {"confidence_gte": 0.75}, "action": "fallback", "backend": "strong_model"},
            {"when": {"confidence_gte": 0.4}, "action": "abstain"},
            {"action": "human_review"},
        ]},
    }  # fmt: skip
    path = write("random.yaml", json.dumps(contract))
    routes = set()
    with both(path) as (mine, theirs):
        for rule in rules:
            a, b = mine.decide(rule["contains"]), theirs.decide(rule["contains"])
            assert _fixed(a).model_dump_json() == _fixed(b).model_dump_json()
            routes.add(a.route_index)
    assert routes == {0, 1, 2, 3}


@pytest.mark.parametrize(("value", "kwargs"), BAD_INPUTS)
def test_bad_input_raises_the_same_validation_error(value, kwargs):
    with both(REFUND) as (mine, theirs):
        with pytest.raises(ValidationError) as ours_error:
            mine.decide(value, **kwargs)
        with pytest.raises(ValidationError) as ref_error:
            theirs.decide(value, **kwargs)
    assert str(ours_error.value) == str(ref_error.value)
    assert ours_error.value.errors() == ref_error.value.errors()


def test_construction_errors_equal_the_reference(write, tmp_path):
    plain = write(
        "plain.yaml",
        """
        schema_version: "0.1"
        decision: {name: spam, type: noul, labels: [spam, ham]}
        backend: {provider: mock}
        """,
    )
    broken = write("broken.yaml", "decision: [unclosed\n")
    calls = [
        ((plain,), {}),  # no policy section
        ((REFUND,), {"backend": "nope"}),
        ((tmp_path / "missing.yaml",), {}),
        ((broken,), {}),
        ((REFUND,), {"backend": "staging"}),  # its token is not set
        ((REFUND,), {"backend": 5}),  # neither a name nor a backend
    ]
    RefGuard = _ref_guard()
    for args, kwargs in calls:
        ours = _outcome(lambda a=args, k=kwargs: DecGuard.from_contract(*a, **k).decide("x"))
        ref = _outcome(lambda a=args, k=kwargs: RefGuard.from_contract(*a, **k).decide("x"))
        assert ours == ref
        assert ours[0] != "ok"
    with pytest.raises(ContractError, match=r"^the contract has no 'policy' section$"):
        DecGuard.from_contract(plain)


ANSWER = {"refund": 0.8, "reject": 0.15, "review": 0.05}


def _callables(kind: str) -> tuple[Any, Any]:
    """The same Python function behind our CallableBackend and behind DecGuard's."""
    from decguard.backends import CallableBackend as RefCallable
    from decguard.decisions import Prediction as RefPrediction
    from decguard.errors import InvalidResponse as RefInvalid

    from decguard_pipeline.backends import CallableBackend
    from decguard_pipeline.core.decision import Prediction
    from decguard_pipeline.sdk import InvalidResponse

    def make(prediction: type, invalid: type) -> Any:
        def decide(request: Any) -> Any:
            assert request.decision.labels == ("refund", "reject", "review")
            assert request.decision.type == "choice" and request.case_id == "py-1"
            if kind == "mapping":
                return {label: ANSWER[label] for label in reversed(request.decision.labels)}
            if kind == "prediction":
                return prediction(ANSWER, model="fn-v2", model_version="7",
                                  metadata={"input": request.input, "token": "hidden"})  # fmt: skip
            if kind == "bad sum":
                return {**ANSWER, "review": 0.5}
            if kind == "typed error":
                raise invalid("the model said nothing useful")
            raise ValueError("a bug in the caller's function")

        return decide

    return (
        CallableBackend(make(Prediction, InvalidResponse), model="fn-v1"),
        RefCallable(make(RefPrediction, RefInvalid), model="fn-v1"),
    )


@pytest.mark.parametrize("kind", ["mapping", "prediction", "bad sum", "typed error", "bug"])
def test_callable_backends_equal_the_reference(kind):
    """DecGuard's documented in-process provider: ``from_contract(..., backend=
    CallableBackend(fn))``, with our CallableBackend and with DecGuard's own one."""
    from decguard_pipeline.backends import CallableBackend

    RefGuard = _ref_guard()
    assert _public_signature(CallableBackend) == _public_signature(_callables(kind)[1].__class__)
    mine, theirs = _callables(kind)
    ours = _outcome(
        lambda: DecGuard.from_contract(REFUND, backend=mine).decide("x", case_id="py-1")
    )
    ref = _outcome(
        lambda: RefGuard.from_contract(REFUND, backend=theirs).decide("x", case_id="py-1")
    )
    assert ours == ref
    assert (ours[0] == "ok") is (kind in ("mapping", "prediction"))
    # DecGuard's own CallableBackend passed to our SDK: the same decision, or the same
    # failure (DecGuard's per-case error keeps its kind and message as our BackendError)
    _, foreign = _callables(kind)
    with DecGuard.from_contract(REFUND, backend=foreign) as guard:
        adopted = _outcome(lambda: guard.decide("x", case_id="py-1"))
    if kind == "typed error":
        assert adopted == ("BackendError", ref[1])
    else:
        assert adopted == ref


def test_decisions_are_frozen_comparable_and_revalidated():
    with both(REFUND) as (mine, theirs):
        a, b = mine.decide("The parcel never arrived"), theirs.decide("The parcel never arrived")
    for decision, model in ((a, PolicyDecision), (b, type(b))):
        with pytest.raises(ValidationError, match="Instance is frozen"):
            decision.action = "accept"
        assert _fixed(decision) == _fixed(decision.model_copy())
        assert decision != decision.model_copy(update={"route_index": 0})
        # a stored decision loads back, and a tampered one is refused with the same words
        assert model.model_validate_json(decision.model_dump_json()) == decision
    stored = json.loads(_fixed(b).model_dump_json())
    assert PolicyDecision.model_validate(stored) == _fixed(a)
    for change in ({"selected": "review"}, {"confidence": 0.5}, {"labels": ["refund", "reject"]},
                   {"probabilities": {"refund": 0.9, "reject": 0.2, "review": 0.08}},
                   {"decision_type": "binary"}, {"surprise": 1}):  # fmt: skip
        tampered = {**stored, "result": {**stored["result"], **change}}
        with pytest.raises(ValidationError) as ours_error:
            PolicyDecision.model_validate(tampered)
        with pytest.raises(ValidationError) as ref_error:
            type(b).model_validate(tampered)
        assert str(ours_error.value) == str(ref_error.value)


def test_tolerance_comes_from_the_contract(write):
    """A sum 0.0005 off passes the default tolerance (1e-3) and fails a contract allowing
    1e-4, in both; the result is checked with the contract's tolerance, not the default."""
    off = {"refund": 0.9, "reject": 0.05, "review": 0.0505}
    text = REFUND.read_text().replace("{refund: 0.98, reject: 0.01, review: 0.01}", json.dumps(off))
    assert json.dumps(off) in text
    default = write("default/decguard.yaml", text)
    strict = write(
        "strict/decguard.yaml",
        text.replace("evaluation:\n", "evaluation:\n  probability_tolerance: 0.0001\n", 1),
    )
    for path, ok in ((default, True), (strict, False)):
        with both(path, backend="strong_model") as (mine, theirs):
            ours = _outcome(lambda g=mine: g.decide("x"))
            assert ours == _outcome(lambda g=theirs: g.decide("x"))
            assert (ours[0] == "ok") is ok, ours
            assert ok or ours[0] == "InvalidResponse"


def test_secret_metadata_is_redacted_like_the_reference(loopback, write):
    server = loopback(RULES, labels=("refund", "reject", "review"))
    text = textwrap.dedent(HTTP_CONTRACT).replace("HEALTH", server.health_url)
    contract = write("http.yaml", text.replace("URL", server.url))
    with both(contract) as (mine, theirs):
        a, b = mine.decide("x", case_id="meta-1"), theirs.decide("x", case_id="meta-1")
    assert "sk-should-not-leak" not in a.model_dump_json()
    assert _fixed(a).model_dump_json() == _fixed(b).model_dump_json()


def test_sdk_and_cli_agree(ours):
    with DecGuard.from_contract(load_contract(REFUND), check_health=True) as guard:
        for text in INPUTS[:4]:
            sdk = guard.decide(text, case_id="runtime")
            cli = json.loads(ours("run", REFUND, text, "-f", "json").stdout)
            cli["result"]["latency_ms"] = 1.25
            assert json.loads(_fixed(sdk).model_dump_json()) == cli


def test_default_case_id_and_lazy_package_attribute():
    import decguard_pipeline

    assert decguard_pipeline.DecGuard is DecGuard
    with DecGuard.from_contract(REFUND) as guard:
        assert guard.decide("hello").result.case_id == "sdk"


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
        assert guard.decide("x").result.model == "refund-strong-v1"
    assert CountingMock.closed == 0
    with DecGuard(loaded, mine):
        pass
    assert CountingMock.closed == 0
    with DecGuard(loaded, mine, owned_backend=True):
        pass
    assert CountingMock.closed == 1
    assert DecGuard.from_contract(loaded)._owned_backend


@pytest.mark.parametrize(
    "case_id", ["status=503", "status=500", "status=429", "status=404", "garbage", "noprob", "drop"]
)
def test_http_failures_raise_what_the_reference_raises(loopback, write, case_id):
    server = loopback(RULES, labels=("refund", "reject", "review"))
    text = textwrap.dedent(HTTP_CONTRACT).replace("HEALTH", server.health_url)
    contract = write("http.yaml", text.replace("URL", server.url))
    with both(contract, check_health=True) as (mine, theirs):
        assert mine.decide("the mug arrived damaged").action == "accept"
        with pytest.raises(BackendError) as caught:
            mine.decide("x", case_id=case_id)
        ours = _outcome(lambda: mine.decide("x", case_id=case_id))
        ref = _outcome(lambda: theirs.decide("x", case_id=case_id))
    assert ours == ref
    assert caught.value.kind == type(caught.value).kind


def test_http_backend_is_closed_and_health_is_checked(loopback, write):
    server = loopback(RULES, labels=("refund", "reject", "review"))
    text = textwrap.dedent(HTTP_CONTRACT).replace("HEALTH", server.health_url)
    contract = write("http.yaml", text.replace("URL", server.url))
    with DecGuard.from_contract(contract, check_health=True) as guard:
        assert guard.decide("the mug arrived damaged").action == "accept"
    assert guard.backend._client is None  # built by the SDK, so closed by it
    server.behaviour.healthy = False
    RefGuard = _ref_guard()
    ours = _outcome(lambda: DecGuard.from_contract(contract, check_health=True))
    ref = _outcome(lambda: RefGuard.from_contract(contract, check_health=True))
    assert ours == ref == ("DecGuardError", "backend 'default' is unhealthy: HTTP 503")
    with pytest.raises(DecGuardError):
        DecGuard.from_contract(contract, check_health=True)

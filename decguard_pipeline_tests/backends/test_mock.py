"""The ``mock`` backend: rules, default, the hashed fallback bit for bit, position_bias and
shown labels (as option_order and label_format present them), against decguard==0.1.1."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from decguard_pipeline.backends.mock import MockBackend, hashed_distribution, semantic_label
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest


def test_pinned_hash_vector():
    values = hashed_distribution("hello", ("a", "b", "c"), 0)
    assert [round(v, 7) for v in values] == [0.0530477, 0.3819792, 0.5649730]
    assert math_fsum(values) == pytest.approx(1.0, abs=1e-15)


def math_fsum(values: list[float]) -> float:
    import math

    return math.fsum(values)


SHOWN_FORMS = ["b", "B", "B) b", "2. b", '"b"', "[b]", " b ", "b.", "bb", "12) b", "1234) b"]


@pytest.mark.parametrize("form", SHOWN_FORMS)
def test_semantic_label_matches_reference(form):
    from decguard.backends.mock import semantic_label as ref_semantic

    assert semantic_label(form) == ref_semantic(form)


def _pair(settings: dict[str, Any], labels: tuple[str, ...]) -> tuple[Any, Any]:
    from decguard.backends.mock import MockBackend as RefMock
    from decguard.contracts.models import BackendConfig as RefConfig
    from decguard.decisions import DecisionSpec as RefSpec

    config = {"provider": "mock", **settings}
    mine = MockBackend.from_config(
        BackendConfig.model_validate(config),
        name="default",
        decision=DecisionSpec("d", "choice", labels),
    )
    theirs = RefMock.from_config(
        RefConfig.model_validate(config),
        name="default",
        decision=RefSpec(name="d", type="choice", labels=labels),
    )
    return mine, theirs


def _presentations(labels: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Canonical, reordered and reformatted label lists, as fuzzing shows them."""
    shown = [labels, tuple(reversed(labels))]
    shown += [tuple(order) for order in itertools.islice(itertools.permutations(labels), 6)]
    shown.append(tuple(label.upper() for label in labels))
    shown.append(tuple(f"{chr(65 + i)}) {label}" for i, label in enumerate(labels)))
    shown.append(tuple(f"{i + 1}. {label}" for i, label in enumerate(labels)))
    shown.append(tuple(f'"{label}"' for label in labels))
    shown.append(tuple(f"[{label}]" for label in labels))
    shown.append(tuple(f"x{label}" for label in labels))  # unmappable: answered as configured
    return shown


SETTINGS: dict[str, dict[str, Any]] = {
    "hashed": {},
    "hashed seeded": {"seed": 12345},
    "hashed biased": {"seed": 3, "position_bias": 0.1},
    "rules and default": {
        "rules": [
            {"contains": "damaged", "probabilities": {"refund": 0.96, "reject": 0.01,
                                                      "review": 0.03}},
            {"contains": "  NEVER   arrived ", "probabilities": {"refund": 0.9, "reject": 0.02,
                                                                 "review": 0.08}},
        ],
        "default": {"refund": 0.2, "reject": 0.15, "review": 0.65},
        "model_version": "v7",
    },
    "rules biased": {
        "rules": [{"contains": "damaged", "probabilities": {"review": 0.03, "refund": 0.96,
                                                            "reject": 0.01}}],
        "position_bias": 0.3,
    },
    "full bias": {"default": {"refund": 0.2, "reject": 0.15, "review": 0.65}, "position_bias": 1.0},
    "int answers": {"default": {"refund": 1, "reject": 0, "review": 0}},
}  # fmt: skip

INPUTS: list[Any] = [
    "The blender arrived damaged.",
    "my parcel never\n\tARRIVED",
    "hello",
    "",
    "  ",
    "ünïcödé text ✓",
    {"text": "damaged box", "users": 5},
    {"b": [1, 2.5, None, True], "a": {"z": "never arrived"}},
    {"text": "x", "nested": {"ü": "é"}},
]


@pytest.mark.parametrize("name", SETTINGS)
def test_predictions_match_reference_bit_for_bit(name):
    from decguard.decisions import DecisionRequest as RefRequest
    from decguard.decisions import DecisionSpec as RefSpec

    labels = ("refund", "reject", "review")
    mine, theirs = _pair(SETTINGS[name], labels)
    for shown in _presentations(labels):
        spec = DecisionSpec("d", "choice", shown)
        ref_spec = RefSpec(name="d", type="choice", labels=shown)
        for value in INPUTS:
            got = mine.predict(DecisionRequest("c1", spec, value))
            want = theirs.predict(RefRequest(case_id="c1", decision=ref_spec, input=value))
            assert got.probabilities == dict(want.probabilities), (shown, value)
            assert list(got.probabilities) == list(want.probabilities)
            assert (got.model, got.model_version) == (want.model, want.model_version)
            # asked again: the same answer (the cache keys on the presentation)
            assert (
                mine.predict(DecisionRequest("c2", spec, value)).probabilities == got.probabilities
            )
    assert mine.metadata() == theirs.metadata().model_dump()
    assert (
        mine.healthcheck()
        == theirs.healthcheck().model_dump()
        == {
            "status": "ok",
            "detail": "mock backend",
        }
    )


def test_colliding_meanings_hash_the_shown_labels():
    """Labels that read the same after normalisation ("A" and "a") hash as shown."""
    from decguard.decisions import DecisionRequest as RefRequest
    from decguard.decisions import DecisionSpec as RefSpec

    labels = ("A", "a", "[a]")
    mine, theirs = _pair({}, labels)
    got = mine.predict(DecisionRequest("c", DecisionSpec("d", "choice", labels), "text"))
    want = theirs.predict(
        RefRequest(
            case_id="c", decision=RefSpec(name="d", type="choice", labels=labels), input="text"
        )
    )
    assert got.probabilities == dict(want.probabilities)
    assert list(got.probabilities.values()) == hashed_distribution("text", labels, 0)


def test_rules_first_match_and_bias_arithmetic():
    labels = ("refund", "reject", "review")
    mine, _ = _pair(SETTINGS["rules biased"], labels)
    spec = DecisionSpec("d", "choice", ("reject", "refund", "review"))
    got = mine.predict(DecisionRequest("c", spec, "DAMAGED lid")).probabilities
    assert got == {"review": 0.7 * 0.03, "refund": 0.7 * 0.96, "reject": 0.7 * 0.01 + 0.3}


@pytest.mark.parametrize("seed", range(5))
def test_random_texts_hash_identically(seed):
    from decguard.decisions import DecisionRequest as RefRequest
    from decguard.decisions import DecisionSpec as RefSpec

    rng = random.Random(seed)
    labels = tuple(f"label{i}" for i in range(rng.randint(2, 7)))
    settings = {"seed": rng.randint(0, 2**40), "position_bias": rng.choice((0.0, 0.05))}
    mine, theirs = _pair(settings, labels)
    spec, ref_spec = (
        DecisionSpec("d", "choice", labels),
        RefSpec(name="d", type="choice", labels=labels),
    )
    for _ in range(300):
        text = "".join(rng.choice("abc xyzé\n0") for _ in range(rng.randint(0, 30)))
        got = mine.predict(DecisionRequest("c", spec, text)).probabilities
        want = theirs.predict(RefRequest(case_id="c", decision=ref_spec, input=text)).probabilities
        assert got == dict(want)

"""Pinned vectors of DecGuard §9.1 (random stream), §9.3 (transformations), §9.4
(comparison and judging) and §9.5 (reductions), and transformations generated for many
inputs compared with decguard 0.1.1's own generator."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from decguard_pipeline.core.contract.properties import (
    LABEL_STYLES,
    Fuzz,
    Inversion,
    IrrelevantContext,
    LabelFormat,
    Monotonic,
    OptionOrder,
    RepeatedContext,
    Whitespace,
)
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.properties.compare import compare, judge
from decguard_pipeline.core.properties.minimize import GreedySearch
from decguard_pipeline.core.properties.rng import Rng
from decguard_pipeline.core.properties.text import (
    NotApplicable,
    format_label,
    insert_fragments,
    replace_whitespace,
    sentence_count,
)
from decguard_pipeline.core.properties.transforms import make_transform

# --- §9.1 the random stream ----------------------------------------------------------------


def test_rng_pinned_values():
    rng = Rng(0, "x")
    assert [rng.below(100) for _ in range(5)] == [59, 95, 9, 90, 31]
    assert Rng(0, "x").sample("abcdef", 3) == ["f", "b", "d"]


def test_rng_sample_and_shuffle_edges():
    assert Rng(1, "y").sample([1, 2], 5) in ([1, 2], [2, 1])  # k capped at the pool size
    assert sorted(Rng(3, "z").shuffled(range(10))) == list(range(10))
    with pytest.raises(ValueError):
        Rng(0).below(0)


def test_rng_matches_reference_streams():
    from decguard.fuzz.rng import Rng as RefRng

    for parts in [(0, "option_order", "r1"), (2**63 - 1, "whitespace", "case-7"), ("ü", 1.5)]:
        ours, theirs = Rng(*parts), RefRng(*parts)
        assert [ours.below(n) for n in range(1, 60)] == [theirs.below(n) for n in range(1, 60)]
        assert ours.sample(range(30), 7) == theirs.sample(range(30), 7)


# --- §9.3 transformations -------------------------------------------------------------------

SPEC3 = DecisionSpec("d", "choice", ("refund", "reject", "review"))


@pytest.mark.parametrize(
    ("at", "expected"),
    [(0, "X. One.  Two!\nThree"), (1, "One.  X. Two!\nThree"), (3, "One.  Two!\nThree X.")],
)
def test_insertion_vectors(at, expected):
    assert insert_fragments("One.  Two!\nThree", [{"at": at, "text": "X."}]) == expected
    assert sentence_count("One.  Two!\nThree") == 3


def test_insertions_at_the_same_boundary_keep_their_order():
    steps = [{"at": 1, "text": "A."}, {"at": 1, "text": "B."}]
    assert insert_fragments("One. Two.", steps) == "One. A. B. Two."


def test_whitespace_vector():
    steps = [{"at": 1, "ws": "\n"}, {"at": "start", "ws": " "}, {"at": "end", "ws": "\t"}]
    assert replace_whitespace("a b  c", steps) == " a b\nc\t"


def test_label_forms():
    forms = {s: format_label("refund", s, 1) for s in LABEL_STYLES}
    assert forms == {
        "upper": "REFUND",
        "lower": "refund",
        "capitalized": "Refund",
        "lettered": "B) refund",
        "numbered": "2. refund",
        "quoted": '"refund"',
        "bracketed": "[refund]",
    }
    assert format_label("x", "lettered", 26) == "27) x"


def test_inversion_replaces_the_first_occurrence_only():
    config = Inversion(rewrites=[{"find": "is spam", "replace": "is not spam"}], max_flip_rate=0)
    spec = DecisionSpec("s", "noul", ("spam", "ham"))
    transform = make_transform("inversion", config, spec, Fuzz())
    [mutation] = transform.generate("c", "this is spam, is spam", Rng(0))
    assert mutation.input == "this is not spam, is spam"
    with pytest.raises(NotApplicable, match="no rewrite matches the text"):
        transform.generate("c", "hello", Rng(0))


def test_monotonic_keeps_integers_integral():
    config = Monotonic(field="users", deltas=[10, 0.5])
    spec = DecisionSpec("s", "score", ("1", "2", "3"))
    transform = make_transform("monotonic", config, spec, Fuzz())
    mutations = transform.generate("c", {"users": 5, "text": "t"}, Rng(0))
    assert [m.input for m in mutations] == [{"users": 15, "text": "t"}, {"users": 5.5, "text": "t"}]
    assert isinstance(mutations[0].input["users"], int)
    for bad, reason in [({"users": True}, "missing or not a number"), ("text", "not a number")]:
        with pytest.raises(NotApplicable, match=reason):
            transform.generate("c", bad, Rng(0))


def test_option_order_reductions():
    transform = make_transform("option_order", OptionOrder(max_tv_distance=0.1), SPEC3, Fuzz())
    assert list(transform.reductions(({"order": [2, 1, 0]},))) == [
        ({"order": [1, 2, 0]},),
        ({"order": [2, 0, 1]},),
    ]
    assert list(transform.reductions(({"order": [1, 0, 2]},))) == []


def test_noul_has_a_single_other_order_and_text_needs_a_field():
    spec = DecisionSpec("s", "noul", ("yes", "no"))
    transform = make_transform("option_order", OptionOrder(max_tv_distance=0.1), spec, Fuzz())
    [mutation] = transform.generate("c", "x", Rng(0))
    assert mutation.presentation == (("no", "no"), ("yes", "yes"))
    whitespace = make_transform("whitespace", Whitespace(max_tv_distance=0.1), spec, Fuzz())
    with pytest.raises(NotApplicable, match=r"set fuzz\.text_field"):
        whitespace.generate("c", {"text": "a b"}, Rng(0))
    with_field = make_transform(
        "whitespace", Whitespace(max_tv_distance=0.1), spec, Fuzz(text_field="body")
    )
    with pytest.raises(NotApplicable, match="'body' is missing or not a string"):
        with_field.generate("c", {"text": "a b"}, Rng(0))


# --- §9.4 comparison and judging -------------------------------------------------------------


def _compare(p, q, relation="invariant", score=False, labels=("a", "b", "c")):
    p, q = np.array([p]), np.array([q])
    return compare(p, q, p.argmax(axis=1), labels[: p.shape[1]], relation=relation, score=score)


def test_comparison_vectors():
    [c] = _compare([0.6, 0.3, 0.1], [0.3, 0.6, 0.1]).records()
    assert (c["tv_distance"], c["max_abs_delta"], c["confidence_delta"]) == (0.3, 0.3, 0.0)
    assert c["flipped"] and c["rank_changed"] and c["level_delta"] is None
    [same] = _compare([0.9, 0.1], [0.1, 0.9], relation="swapped").records()
    assert (same["tv_distance"], same["flipped"]) == (0.0, False)
    [kept] = _compare([0.9, 0.1], [0.9, 0.1], relation="swapped").records()
    assert kept["tv_distance"] == pytest.approx(0.8) and kept["flipped"]
    [mono] = _compare([0.7, 0.2, 0.1], [0.1, 0.2, 0.7], relation="monotonic", score=True).records()
    assert mono["level_delta"] == pytest.approx(1.2) and not mono["flipped"]


def _reference_result(labels, decision_type, row):
    from decguard.decisions import DecisionResult

    probs = dict(zip(labels, row.tolist(), strict=True))
    best = labels[int(np.argmax(row))]
    return DecisionResult(
        case_id="c", decision="d", decision_type=decision_type, labels=labels,
        probabilities=probs, selected=best, confidence=probs[best], backend="b",
        provider="mock", latency_ms=0.0,
    )  # fmt: skip


def _configs_for(relation, direction):
    from decguard.contracts import properties as ref_props

    if relation == "monotonic":
        config = Monotonic(
            field="n", direction=direction, max_level_decrease=0.05, max_flip_rate=0.1
        )
    elif relation == "swapped":
        config = Inversion(
            rewrites=[{"find": "a", "replace": "b"}],
            max_tv_distance=0.1,
            max_confidence_delta=0.05,
            max_flip_rate=0,
        )
    else:
        config = OptionOrder(
            max_tv_distance=0.1,
            max_js_divergence=0.02,
            max_abs_delta=0.1,
            max_confidence_delta=0.1,
            max_flip_rate=0,
        )
    return config, getattr(ref_props, type(config).__name__)(**config.model_dump())


@pytest.mark.parametrize(
    ("decision_type", "labels", "relation", "direction"),
    [
        ("choice", ("a", "b", "c", "d"), "invariant", "increasing"),
        ("noul", ("yes", "no"), "swapped", "increasing"),
        ("score", ("1", "2", "3"), "monotonic", "increasing"),
        ("score", ("1", "2", "3", "4", "5"), "monotonic", "decreasing"),
    ],
)
def test_comparisons_and_verdicts_match_the_reference_bit_for_bit(
    decision_type, labels, relation, direction
):
    from decguard.fuzz.compare import compare as ref_compare
    from decguard.fuzz.compare import judge as ref_judge

    rng = np.random.default_rng(7)
    k = len(labels)
    p = rng.dirichlet(np.ones(k), size=200)
    q = rng.dirichlet(np.full(k, 0.5), size=200)
    q[:20] = p[:20]  # identical answers
    q[20:40, 0] = 0.0  # zero probabilities: JS terms are skipped
    q[20:40] /= q[20:40].sum(axis=1, keepdims=True)
    config, ref_config = _configs_for(relation, direction)
    ours = compare(p, q, p.argmax(axis=1), labels, relation=relation, direction=direction,
                   score=decision_type == "score").records()  # fmt: skip
    for i, mine in enumerate(ours):
        before = _reference_result(labels, decision_type, p[i])
        after = _reference_result(labels, decision_type, q[i])
        theirs = ref_compare(before, after, relation, direction=direction)
        assert mine == theirs.model_dump(), i
        assert judge(config, mine) == ref_judge(ref_config, theirs).violations


def test_judge_messages():
    config = OptionOrder(max_tv_distance=0.03, max_confidence_delta=0.05, max_flip_rate=0)
    [c] = _compare([0.6, 0.3, 0.1], [0.3, 0.6, 0.1]).records()
    assert judge(config, c) == ["tv_distance 0.3 > 0.03", "selected label changed: 'a' -> 'b'"]
    inversion = Inversion(rewrites=[{"find": "x", "replace": "y"}], max_flip_rate=0)
    [kept] = _compare([0.9, 0.1], [0.9, 0.1], relation="swapped").records()
    assert judge(inversion, kept) == [
        "answer did not invert: 'a' was selected before and after negation"
    ]
    mono = Monotonic(field="n", max_level_decrease=0.05, max_flip_rate=0)
    [down] = _compare([0.1, 0.2, 0.7], [0.7, 0.2, 0.1], relation="monotonic", score=True).records()
    assert judge(mono, down) == [
        "expected level moved -1.2 against 'increasing' (allowed 0.05)",
        "selected level moved against 'increasing': c -> a",
    ]


# --- §9.5 greedy minimisation ---------------------------------------------------------------


def test_greedy_search_calls_in_order_and_respects_the_budget():
    transform = make_transform("option_order", OptionOrder(max_tv_distance=0.1), SPEC3, Fuzz())
    start = ({"order": [2, 1, 0]},)

    def run(budget, violates):
        search, sent = GreedySearch(transform, "x", start, budget), []
        while (mutation := search.next()) is not None:
            sent.append(mutation.steps[0]["order"])
            search.feed(violates(mutation.steps[0]["order"]))
        return sent, search

    sent, search = run(32, lambda order: order[0] != 0)  # violates while 'refund' is not first
    assert sent == [[1, 2, 0], [1, 0, 2]]  # [1,2,0] still fails; then [1,0,2]; no smaller
    assert search.best.steps == ({"order": [1, 0, 2]},) and search.calls == 2
    sent, search = run(1, lambda order: True)
    assert sent == [[1, 2, 0]] and search.calls == 1
    sent, search = run(32, lambda order: False)
    assert sent == [[1, 2, 0], [2, 0, 1]] and search.best is None and search.calls == 2


# --- generated transformations against decguard's generator --------------------------------

WORDS = [
    *("the", "a", "parcel", "never", "arrived", "damaged", "refund", "is", "not", "spam"),
    *("hello.", "ok!", "why?", "fine"),
]


def _text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 14)):
        parts.append(rng.choice(WORDS))
        parts.append(rng.choice([" ", "  ", "\n", " \t", ". ", "! "]))
    return "".join(parts)


def _configs():
    return {
        "option_order": OptionOrder(samples=4, max_tv_distance=0.1),
        "label_format": LabelFormat(
            samples=5,
            aliases={"refund": ["money back", "Refund"], "review": ["check"]},
            max_tv_distance=0.1,
        ),
        "irrelevant_context": IrrelevantContext(insertions=3, samples=3, max_tv_distance=0.1),
        "repeated_context": RepeatedContext(
            repeats=2, samples=2, fragments=["Same.", "Other."], max_flip_rate=0
        ),
        "whitespace": Whitespace(edits=4, samples=3, max_tv_distance=0.1),
    }


@pytest.mark.parametrize(
    "labels",
    [("refund", "reject", "review"), tuple("abcdefgh"), tuple(f"l{i}" for i in range(28))],
)
def test_generation_matches_the_reference(labels):
    from decguard.contracts import properties as ref_props
    from decguard.contracts.properties import Fuzz as RefFuzz
    from decguard.datasets import Case
    from decguard.decisions import DecisionSpec as RefSpec
    from decguard.fuzz.rng import Rng as RefRng
    from decguard.fuzz.transforms import NotApplicable as RefNotApplicable
    from decguard.fuzz.transforms import make_transform as ref_make

    spec = DecisionSpec("d", "choice", labels)
    ref_spec = RefSpec(name="d", type="choice", labels=labels)
    rng = random.Random(11)
    configs = _configs()
    if labels[0] != "refund":
        configs["label_format"] = LabelFormat(samples=5, max_tv_distance=0.1)
    for name, config in configs.items():
        ref_config = getattr(ref_props, type(config).__name__)(**config.model_dump())
        for fuzz in (Fuzz(seed=rng.randrange(2**63)), Fuzz(seed=3, text_field="body")):
            ours = make_transform(name, config, spec, fuzz)
            theirs = ref_make(name, ref_config, ref_spec, RefFuzz(**fuzz.model_dump()))
            for n in range(25):
                text = _text(rng)
                value = {"body": text, "n": 1} if fuzz.text_field else text
                case_id = f"case-{n}"
                try:
                    mine = ours.generate(case_id, value, Rng(fuzz.seed, name, case_id))
                except NotApplicable as exc:
                    with pytest.raises(RefNotApplicable, match=re.escape(str(exc))):
                        theirs.generate(Case(id=case_id, input=value),
                                        RefRng(fuzz.seed, name, case_id))  # fmt: skip
                    continue
                expected = theirs.generate(Case(id=case_id, input=value),
                                           RefRng(fuzz.seed, name, case_id))  # fmt: skip
                assert [(m.steps, m.input, m.presentation) for m in mine] == [
                    (m.steps, m.input, m.presentation) for m in expected
                ], (name, value)
                for mutation in mine:
                    assert list(ours.reductions(mutation.steps)) == list(
                        theirs.reductions(mutation.steps)
                    )

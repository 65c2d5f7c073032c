"""The GBNF grammar of a structured answer admits exactly the answers the scoring reads: the
options shown (JSON-encoded, awkward characters included) and, with a stated confidence, a
number in [0, 1] without sign or exponent. Checked with a GBNF reader written apart
(``support/gbnf.py``) and, in the slow test, with llama.cpp's own grammar parser."""

from __future__ import annotations

import json
import random

import pytest

from decguard_pipeline.backends.grammar import decision_grammar
from decguard_pipeline.backends.scoring import structured_distribution
from decguard_pipeline_tests.support.gbnf import accepts, draw, parse

LABELS = ("billing", 'say "hi"', "back\\slash", "élan ünïcode", "A) lettered")
VALID_NUMBERS = ["0", "1", "0.5", "0.000001", "0.999999", "1.0", "1.000000", "0.1234"]
INVALID_NUMBERS = [
    "-0.0", "-0E541", "0E5", "1e-400", "1.5", "2", "01", ".5", "0.", "1.01", "0.1234567",
    "-0", "+1", "1.0000001", "NaN", "Infinity", '"0.5"',
]  # fmt: skip


def answer(label: str, confidence: str | None = None, ws: str = "") -> str:
    text = f"{{{ws}{json.dumps('choice')}{ws}:{ws}{json.dumps(label, ensure_ascii=False)}"
    if confidence is not None:
        text += f"{ws},{ws}{json.dumps('confidence')}{ws}:{ws}{confidence}"
    return text + ws + "}"


@pytest.mark.parametrize("verbalized", [False, True])
def test_every_valid_answer_is_admitted(verbalized):
    grammar = decision_grammar(LABELS, verbalized)
    numbers = VALID_NUMBERS if verbalized else [None]
    for label in LABELS:
        for number in numbers:
            for ws in ("", " ", "\n", "\t "):
                assert accepts(grammar, answer(label, number, ws)), answer(label, number, ws)


def test_what_the_scoring_would_refuse_or_misread_is_not_admitted():
    grammar = decision_grammar(LABELS, verbalized=True)
    for number in INVALID_NUMBERS:
        assert not accepts(grammar, answer("billing", number)), number
    refused = [
        answer("Billing", "0.5"),  # not an option
        answer("billing", None),  # confidence missing
        answer("billin", "0.5"),  # a prefix
        answer("billing", "0.5", ws="   "),  # unbounded blanks
        answer("billing", "0.5").replace('"choice"', '"label"'),
        answer("billing", "0.5")[:-1],  # unclosed
        answer('say \\"hi\\"', "0.5"),  # the label's escape escaped again
        '{"confidence": 0.5, "choice": "billing"}',  # keys in another order
    ]
    for text in refused:
        assert not accepts(grammar, text), text
    plain = decision_grammar(LABELS, verbalized=False)
    assert not accepts(plain, answer("billing", "0.5"))


@pytest.mark.parametrize("verbalized", [False, True])
def test_whatever_the_grammar_lets_a_model_write_is_read_as_a_clean_distribution(verbalized):
    rules = parse(decision_grammar(LABELS, verbalized))
    rng = random.Random(31)
    for _ in range(2000):
        text = draw(rules, rng)
        values = structured_distribution(text, LABELS, verbalized)
        assert len(values) == len(LABELS)
        assert all(0.0 <= v <= 1.0 and str(v) != "-0.0" for v in values), text
        assert abs(sum(values) - 1.0) < 1e-12


@pytest.mark.slow
def test_llama_cpp_parses_the_grammar():
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    for verbalized in (False, True):
        grammar = llama_cpp.LlamaGrammar.from_string(decision_grammar(LABELS, verbalized))
        assert grammar is not None

"""The ``openai`` provider against loopback servers that speak the OpenAI API: every scoring
method's distribution is recomputed here from what the server sent, by hand."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest

from decguard_pipeline.backends import create_backend
from decguard_pipeline.backends.runner import Cases, run_cases
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline_tests.support.llm_servers import Seen, chat_answer, llm_server

SPEC = DecisionSpec("route", "choice", ("billing", "technical", "sales"), "Route the ticket.")
PROMPT = (
    "Route the ticket.\n\nInput:\n{input}\n\nOptions:\nA) billing\nB) technical\nC) sales\n\n"
    "Answer with the letter of the correct option only."
)


def backend(url: str, spec: DecisionSpec = SPEC, **settings: Any) -> Any:
    config = BackendConfig.model_validate(
        {"provider": "openai", "model": "gpt-test", "base_url": f"{url}/v1", **settings}
    )
    return create_backend(config, decision=spec)


def run(b: Any, inputs: list[Any], spec: DecisionSpec = SPEC) -> Any:
    ids = [f"c{i}" for i in range(len(inputs))]
    cases = Cases(ids, inputs, [None] * len(inputs), [{} for _ in inputs])
    return run_cases(b, spec, cases, max_concurrency=4, tolerance=1e-3)


def by_hand_softmax(logprobs: list[float]) -> list[float]:
    weights = [math.exp(v) for v in logprobs]
    return [w / sum(weights) for w in weights]


# -- logprobs ------------------------------------------------------------------------------------


def test_logprobs_adds_same_letter_tokens_and_ignores_the_rest():
    alternatives = [
        ("A", -0.9),
        (" B", -1.2),
        ("B", -2.5),  # same letter as " B": probabilities add
        ("\nC", -4.0),
        ("a", -0.1),  # lower case: not a letter of ours
        ("D", -0.2),  # no fourth option
        ("Answer", -0.05),
    ]
    with llm_server(lambda s: (200, chat_answer("A", top_logprobs=alternatives), {})) as server:
        b = backend(server.url)
        decided = b.decide(DecisionRequest("c1", SPEC, "I was charged twice"))
        sent = server.posts("/v1/chat/completions")[0].body
    mass = [math.exp(-0.9), math.exp(-1.2) + math.exp(-2.5), math.exp(-4.0)]
    expected = [m / sum(mass) for m in mass]
    got = [decided["probabilities"][label] for label in SPEC.labels]
    assert got == pytest.approx(expected, abs=1e-12)
    assert decided["selected"] == "billing"
    # the logits a calibrator reads: each letter's own log-probability, in the order shown
    assert decided["metadata"]["logprobs"] == pytest.approx(
        [-0.9, math.log(math.exp(-1.2) + math.exp(-2.5)), -4.0], abs=1e-12
    )
    assert decided["model"] == "gpt-test"
    assert decided["model_version"] == "test-model-2026-01-01"
    assert sent == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": PROMPT.format(input="I was charged twice")}],
        "temperature": 0.0,
        "max_tokens": 1,
        "logprobs": True,
        "top_logprobs": 20,
    }


def test_logprobs_letters_not_offered_get_zero_and_none_found_is_invalid():
    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        text = seen.body["messages"][0]["content"]
        if "no letter" in text:
            alternatives = [("x", -0.1), ("a", -0.2), ("AB", -0.3), ("B", None)]
        else:
            alternatives = [(" C ", -0.3), ("Hello", -0.01), ("A", None)]
        return 200, chat_answer("C", top_logprobs=alternatives), {}

    with llm_server(answer) as server:
        results = run(backend(server.url), ["only C", "no letter here"])
    assert results.probs[0].tolist() == [0.0, 0.0, 1.0]
    assert results.result_metadata[0] == {"logprobs": [None, None, -0.3]}  # absent: null
    assert results.error_kind == [None, "invalid_response"]
    assert results.error_message[1] == "no option letter (A, B, C) among top_logprobs"


def test_unknown_and_misplaced_settings_are_contract_errors():
    from decguard_pipeline.core.errors import ContractError

    misplaced = r"backend\.normalize: applies to scoring completion_logprobs, not logprobs"
    with pytest.raises(ContractError, match=misplaced):
        backend("http://127.0.0.1:9", normalize="sum")
    with pytest.raises(ContractError, match=r"backend\.scoring: "):
        backend("http://127.0.0.1:9", scoring="vibes")
    with pytest.raises(ContractError, match=r"backend\.prompt: unknown placeholder\(s\) \{inptu\}"):
        backend("http://127.0.0.1:9", prompt="Classify {inptu}")
    with pytest.raises(ContractError, match=r"backend\.top_logprobs: "):
        backend("http://127.0.0.1:9", top_logprobs=21)
    with pytest.raises(ContractError, match="'model' is required"):
        create_backend(
            BackendConfig.model_validate({"provider": "openai", "base_url": "http://x/v1"}),
            decision=SPEC,
        )
    many = DecisionSpec("m", "choice", tuple(f"o{i}" for i in range(27)))
    with pytest.raises(ContractError, match="at most 26 options"):
        backend("http://127.0.0.1:9", spec=many)


# -- completion_logprobs -------------------------------------------------------------------------

CONTEXT = "Route the ticket.\n\nInput:\n{input}\n\nOptions: billing, technical, sales\nAnswer:"
# the server's tokenisation of each option's continuation, and the log-probability it gives
OPTION_TOKENS = {
    "billing": [(" bill", -1.0), ("ing", -0.2)],
    "technical": [(" tech", -0.5), ("ni", -0.1), ("cal", -0.0)],
    "sales": [(" sales", -2.0)],
}


def completion_answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
    """Echo each prompt as tokens with offsets: the context in two tokens (the first without
    a log-probability), then the option's tokens, then one generated token past the end."""
    choices = []
    for index, prompt in enumerate(seen.body["prompt"]):
        context, option = prompt.rsplit(" ", 1)
        tokens, logprobs, offsets = [context[:5], context[5:]], [None, -3.0], [0, 5]
        at = len(context)
        for text, logprob in OPTION_TOKENS[option]:
            tokens.append(text)
            logprobs.append(logprob)
            offsets.append(at)
            at += len(text)
        assert at == len(prompt)
        tokens.append(" Yes")  # generated: its offset is the prompt's length
        logprobs.append(-0.001)
        offsets.append(len(prompt))
        choices.append(
            {
                "index": index,
                "text": prompt + " Yes",
                "logprobs": {
                    "tokens": tokens,
                    "token_logprobs": logprobs,
                    "text_offset": offsets,
                    "top_logprobs": None,
                },
            }
        )
    choices.reverse()  # answered out of order: read by index
    return (
        200,
        {
            "model": "base-model",
            "choices": choices,
            "usage": {"prompt_tokens": 90, "completion_tokens": 3},
        },
        {},
    )


@pytest.mark.parametrize("normalize", ["mean", "sum"])
def test_completion_logprobs_scores_each_option_by_its_own_tokens(normalize):
    with llm_server(completion_answer) as server:
        b = backend(server.url, scoring="completion_logprobs", normalize=normalize)
        results = run(b, ["The app crashes on login"])
        sent = server.posts("/v1/completions")[0].body
    context = CONTEXT.format(input="The app crashes on login")
    assert sent == {
        "model": "gpt-test",
        "prompt": [f"{context} billing", f"{context} technical", f"{context} sales"],
        "echo": True,
        "logprobs": 1,
        "max_tokens": 1,
        "temperature": 0.0,
    }
    if normalize == "mean":
        scores = [(-1.0 - 0.2) / 2, (-0.5 - 0.1 - 0.0) / 3, -2.0]
    else:
        scores = [-1.2, -0.6, -2.0]
    assert results.probs[0].tolist() == pytest.approx(by_hand_softmax(scores), abs=1e-12)
    assert results.result_metadata[0]["logprobs"] == pytest.approx(scores, abs=1e-12)
    assert results.prompt_tokens.tolist() == [90.0]
    assert results.completion_tokens.tolist() == [3.0]


def test_completion_logprobs_without_echo_or_option_tokens_is_invalid():
    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        text = seen.body["prompt"][0]
        if "no echo" in text:
            return 200, {"model": "m", "choices": [{"index": i, "text": "x"} for i in range(3)]}, {}
        if "too few" in text:
            return completion_answer(seen)[0], {"model": "m", "choices": []}, {}
        # offsets that all fall inside the context: the options' tokens are missing
        n = len(seen.body["prompt"])
        lp = {"tokens": ["a"], "token_logprobs": [-1.0], "text_offset": [0]}
        return 200, {"model": "m", "choices": [{"index": i, "logprobs": lp} for i in range(n)]}, {}

    with llm_server(answer) as server:
        results = run(
            backend(server.url, scoring="completion_logprobs"), ["no echo", "too few", "short"]
        )
    assert results.error_kind == ["invalid_response"] * 3
    assert results.error_message == [
        "a choice has no logprobs (does the server support echo?)",
        "expected 3 choices (one per option), got 0",
        "no token of the option found through text_offset",
    ]


# -- structured ----------------------------------------------------------------------------------


def test_structured_is_one_hot_on_the_choice_and_sends_a_strict_enum_schema():
    contents = {
        "my invoice": '{"choice": "billing"}',
        "bad": '{"choice": "legal"}',
        "garbled": "billing",
    }

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        text = seen.body["messages"][0]["content"]
        key = next(k for k in contents if k in text)
        return 200, chat_answer(contents[key]), {}

    with llm_server(answer) as server:
        b = backend(server.url, scoring="structured")
        results = run(b, ["my invoice", "bad", "garbled"])
        sent = server.posts()[0].body
    assert results.probs[0].tolist() == [1.0, 0.0, 0.0]
    assert results.error_kind[1:] == ["invalid_response", "invalid_response"]
    assert results.error_message[1:] == [
        "choice 'legal' is not one of the options shown",
        "structured answer is not JSON",
    ]
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "decision",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {
                    "choice": {"type": "string", "enum": ["billing", "technical", "sales"]}
                },
                "required": ["choice"],
                "additionalProperties": False,
            },
        },
    }
    assert sent["max_tokens"] == 100 and sent["temperature"] == 0.0
    assert sent["messages"][0]["content"].endswith("C) sales\n\nChoose the correct option.")


def test_verbalized_confidence_goes_to_the_choice_and_the_rest_share_what_is_left():
    answers = {
        "a": '{"choice": "sales", "confidence": 0.7}',
        "b": '{"choice": "sales"}',
        "c": '{"choice": "sales", "confidence": 1.5}',
    }

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        text = seen.body["messages"][0]["content"]
        return 200, chat_answer(answers[text.split("Input:\n")[1][0]]), {}

    with llm_server(answer) as server:
        b = backend(server.url, scoring="structured", verbalized_confidence=True)
        results = run(b, ["a", "b", "c"])
        schema = server.posts()[0].body["response_format"]["json_schema"]["schema"]
    assert results.probs[0].tolist() == pytest.approx([0.15, 0.15, 0.7], abs=1e-15)
    assert results.error_message[1:] == [
        "confidence None is not a number in [0, 1]",
        "confidence 1.5 is not a number in [0, 1]",
    ]
    assert schema["required"] == ["choice", "confidence"]
    assert schema["properties"]["confidence"] == {"type": "number", "minimum": 0, "maximum": 1}


# -- sample --------------------------------------------------------------------------------------

SAMPLED = ["A", " B", "A", "(C)", "A.", "I think B", "B) technical", "", "A", "c"]


def test_sample_counts_answered_letters_in_one_request_with_n():
    with llm_server(lambda s: (200, chat_answer(*SAMPLED[: s.body["n"]]), {})) as server:
        b = backend(server.url, scoring="sample", samples=10, smoothing=0.5)
        results = run(b, ["x"])
        sent = server.posts()
    assert len(sent) == 1
    assert [sent[0].body[key] for key in ("n", "temperature", "max_tokens")] == [10, 1.0, 3]
    # A: 4 ("A", "A", "A.", "A"), B: 2 (" B", "B) technical"), C: 1 ("(C)"); 3 name none
    counts = [4, 2, 1]
    expected = [(c + 0.5) / (7 + 1.5) for c in counts]
    assert results.probs[0].tolist() == pytest.approx(expected, abs=1e-15)
    assert results.result_metadata[0] == {"unparsed_samples": 3}


@pytest.mark.parametrize("refusal", ["ignores n", "rejects n"])
def test_sample_falls_back_to_one_request_per_sample(refusal):
    answered = iter(SAMPLED * 10)

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        if "n" in seen.body and refusal == "rejects n":
            return 400, {"error": {"message": "n must be 1"}}, {}
        return 200, chat_answer(next(answered)), {}  # one choice, whatever n says

    with llm_server(answer) as server:
        b = backend(server.url, scoring="sample", samples=10)
        first = b.decide(DecisionRequest("c1", SPEC, "x"))  # the sync path
        second = b.decide(DecisionRequest("c2", SPEC, "y"))
        sent = [s.body.get("n") for s in server.posts()]
    if refusal == "rejects n":
        assert sent == [10] + [None] * 10 + [None] * 10
    else:
        assert sent == [10] + [None] * 9 + [None] * 10  # the first answer counts as a sample
    expected = [4 / 7, 2 / 7, 1 / 7]
    for decided in (first, second):
        assert [decided["probabilities"][x] for x in SPEC.labels] == pytest.approx(expected)


def test_sample_where_no_answer_names_an_option_is_invalid():
    with llm_server(lambda s: (200, chat_answer(*["maybe"] * s.body["n"]), {})) as server:
        results = run(backend(server.url, scoring="sample", samples=4), ["x"])
    assert results.error_kind == ["invalid_response"]
    assert results.error_message == ["none of 4 samples named an option letter"]


# -- prompts -------------------------------------------------------------------------------------


def test_a_template_gets_object_inputs_as_canonical_json_and_each_placeholder_once():
    template = "{decision} | {labels} | {input} | {options} | {unused-braces} {}"
    with llm_server(lambda s: (200, chat_answer("A", top_logprobs=[("A", 0.0)]), {})) as server:
        b = backend(server.url, prompt=template, system_prompt="You route tickets.")
        run(b, [{"subject": "Refund", "body": "{options} é"}])
        messages = server.posts()[0].body["messages"]
    assert messages == [
        {"role": "system", "content": "You route tickets."},
        {
            "role": "user",
            "content": 'Route the ticket. | billing, technical, sales | {"body":"{options} é",'
            '"subject":"Refund"} | A) billing\nB) technical\nC) sales | {unused-braces} {}',
        },
    ]


# -- properties: letters follow the order shown --------------------------------------------------

TOPICS = {"invoice": "billing", "crash": "technical", "quote": "sales"}


def semantic(seen: Seen) -> tuple[int, Any, dict[str, str]]:
    """A model that reads the options: most of its mass on the letter of the right topic."""
    text = seen.body["messages"][0]["content"]
    topic = next(label for word, label in TOPICS.items() if word in text)
    options = re.findall(r"^([A-Z])\) (.*)$", text, flags=re.M)
    alternatives = [(letter, -0.1 if topic in shown.lower() else -3.0) for letter, shown in options]
    return 200, chat_answer(alternatives[0][0], top_logprobs=alternatives), {}


def position_biased(seen: Seen) -> tuple[int, Any, dict[str, str]]:
    """A model that prefers whatever is shown first."""
    return 200, chat_answer("A", top_logprobs=[("A", -0.2), ("B", -2.0), ("C", -2.5)]), {}


@pytest.mark.parametrize(("model", "violations"), [(semantic, 0), (position_biased, None)])
def test_option_order_and_label_format_work_through_the_letters(model, violations, tmp_path, ours):
    cases = [
        ("t1", "My invoice is wrong", "billing"),
        ("t2", "The app crashes", "technical"),
        ("t3", "Please send a quote", "sales"),
    ]
    (tmp_path / "cases.jsonl").write_text(
        "".join(json.dumps({"id": i, "input": x, "expected": e}) + "\n" for i, x, e in cases)
    )
    with llm_server(model) as server:
        (tmp_path / "c.yaml").write_text(
            f"""schema_version: "0.1"
decision: {{name: route, type: choice, options: [billing, technical, sales]}}
backend: {{provider: openai, model: m, base_url: "{server.url}/v1"}}
dataset: cases.jsonl
properties:
  option_order: {{samples: 3, max_tv_distance: 0.001, max_flip_rate: 0}}
  label_format: {{max_tv_distance: 0.001}}
"""
        )
        ran = ours("fuzz", tmp_path / "c.yaml", "-o", tmp_path / "r.json", "-f", "json")
        shown = [
            re.findall(r"^[A-Z]\) (.*)$", s.body["messages"][0]["content"], flags=re.M)
            for s in server.posts()
        ]
    summaries = {
        s["property"]: s
        for s in json.loads((tmp_path / "r.json").read_text())["properties"]["summaries"]
    }
    assert ["billing", "sales", "technical"] in shown  # reordered options were lettered anew
    assert ["A) billing", "B) technical", "C) sales"] in shown  # label_format "lettered"
    for name in ("option_order", "label_format"):
        assert summaries[name]["n_errors"] == 0 and summaries[name]["n_evaluated"] > 0
        if violations is not None:
            assert summaries[name]["n_violations"] == violations
    if violations is None:
        assert summaries["option_order"]["n_violations"] > 0
        assert ran.exit_code == 1
    else:
        assert ran.exit_code == 0, ran.stdout

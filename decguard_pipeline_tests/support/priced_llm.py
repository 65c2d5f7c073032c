"""A priced language-model decider for the usage and cost tests: a loopback chat server
answering letter log-probabilities with an ``usage`` that differs per case, recording every
usage it sent, and a contract whose ``openai`` backend has ``pricing`` (plus a mock backend
with neither tokens nor pricing).

    with priced_server() as server:
        contract = write_priced_contract(tmp_path, server.url, gates="...")
        ...
        server.sent_usage   # [(prompt_tokens, completion_tokens), ...] per answered request
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from decguard_pipeline_tests.support.llm_servers import LLMServer, Seen, chat_answer, llm_server

INPUT_PER_MILLION, OUTPUT_PER_MILLION = 3.0, 15.0
MODEL = "priced-model-2026-02-01"
CASES = [
    ("c1", "the parcel never came", "yes"),
    ("c2", "all good thanks", "no"),
    ("c3", "where is my order, it never came", "yes"),
    ("c4", "thanks for the quick help", "no"),
    ("c5", "never came and nobody answers", "yes"),
]


@dataclass
class PricedServer:
    server: LLMServer
    sent_usage: list[tuple[int, int]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url


@contextmanager
def priced_server() -> Iterator[PricedServer]:
    """Option A ("yes") at 0.9 when the prompt says "never", else 0.2; the prompt's token
    count is its number of characters (so every case costs differently), one completion
    token."""
    state: dict[str, PricedServer] = {}

    def answer(seen: Seen) -> tuple[int, object, dict[str, str]]:
        prompt = seen.body["messages"][-1]["content"]
        p = 0.9 if "never" in prompt else 0.2
        usage = (len(prompt), 1)
        state["priced"].sent_usage.append(usage)
        letters = [("A", math.log(p)), ("B", math.log(1.0 - p))]
        return 200, chat_answer("A", model=MODEL, top_logprobs=letters, usage=usage), {}

    with llm_server(answer) as server:
        state["priced"] = PricedServer(server)
        yield state["priced"]


def write_priced_contract(folder: Path, url: str, *, pipeline: str = "") -> Path:
    """``folder/decguard.yaml`` (yes/no, five cases): backend ``default`` is the priced
    ``openai`` model at ``url``, backend ``free`` a mock; ``pipeline`` is the YAML body of a
    ``pipeline:`` section (indented by the caller's dedent)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": i, "input": text, "expected": label}) for i, text, label in CASES]
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n")
    contract = textwrap.dedent(
        f"""\
        schema_version: "0.1"
        decision:
          name: never_came
          type: choice
          description: Does the customer say the parcel never came?
          options: ["yes", "no"]
        backend:
          provider: openai
          model: priced-model
          base_url: {url}/v1
          pricing:
            input_per_million: {INPUT_PER_MILLION}
            output_per_million: {OUTPUT_PER_MILLION}
          max_retries: 0
        backends:
          free:
            provider: mock
            model: free-v1
            default: {{"yes": 0.5, "no": 0.5}}
        dataset: cases.jsonl
        """
    )
    if pipeline:
        contract += "pipeline:\n" + textwrap.indent(textwrap.dedent(pipeline), "  ")
    path = folder / "decguard.yaml"
    path.write_text(contract)
    return path


def expected_cost(sent: list[tuple[int, int]]) -> float:
    """The run's cost from what the server said it used, priced by hand."""
    prompt = sum(p for p, _ in sent)
    completion = sum(c for _, c in sent)
    return (prompt * INPUT_PER_MILLION + completion * OUTPUT_PER_MILLION) / 1_000_000

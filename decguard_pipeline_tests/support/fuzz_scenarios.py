"""Shared by the fuzz/replay differential tests (no tests here): generated contracts that cover
every property, decision type and skip reason, and report normalisation (producer version,
timestamps and latencies differ between the two tools by nature)."""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path
from typing import Any

FILE_PARAPHRASES = [
    {"id": "c1", "paraphrases": ["The parcel never arrived.", "My parcel did not arrive."]},
    {"input": "hello. ok! why?", "paraphrases": ["hi. fine! how so?"]},
]

# name -> (contract YAML, dataset file name, dataset lines)
SCENARIOS: dict[str, tuple[str, str, list[dict[str, Any]]]] = {
    # hashed answers depend on the exact text: insertions and whitespace move them a lot
    "choice": (
        """
        schema_version: "0.1"
        decision: {name: refund_request, type: choice, options: [refund, reject, review]}
        backend: {provider: mock, model: hashed-v1, seed: 3, position_bias: 0.2}
        backends:
          fair:
            provider: mock
            model: rules-v1
            default: {refund: 0.2, reject: 0.15, review: 0.65}
        dataset: cases.jsonl
        evaluation: {max_concurrency: 3}
        fuzz: {seed: 5, max_minimize_calls: 3}
        properties:
          option_order: {samples: 5, max_tv_distance: 0.05, max_flip_rate: 0}
          label_format:
            samples: 4
            aliases: {refund: [money back], review: [check it]}
            max_js_divergence: 0.01
            level: warning
          irrelevant_context:
            {insertions: 2, samples: 2, max_abs_delta: 0.05, max_violation_rate: 0.5}
          repeated_context: {repeats: 3, max_confidence_delta: 0.02, max_flip_rate: 0.1}
          whitespace: {edits: 3, max_tv_distance: 0.01}
          paraphrase:
            source: {provider: file, path: paraphrases.jsonl}
            samples: 2
            max_tv_distance: 0
        """,
        "cases.jsonl",
        [
            {
                "id": "c1",
                "input": "My parcel never arrived. It was due last week!",
                "expected": "refund",
            },
            {"id": "c2", "input": "hello. ok! why?", "expected": "review"},
            {"id": "c3", "input": "", "expected": "reject"},
            {"input": "damaged   box\n\nplease refund", "expected": "refund"},
            {"id": "c5", "input": "I changed my mind. Can I return it? Thanks."},
            {"id": "c6", "input": "one two three four five six seven", "expected": "review"},
        ],
    ),
    # configured answers cannot be re-keyed to an alias: those requests fail validation
    "noul": (
        """
        schema_version: "0.1"
        decision: {name: is_spam, type: noul, labels: [spam, ham]}
        backend:
          provider: mock
          model: spam-v1
          position_bias: 0.05
          rules:
            - {contains: winner, probabilities: {spam: 0.97, ham: 0.03}}
            - {contains: not spam, probabilities: {spam: 0.4, ham: 0.6}}
          default: {spam: 0.06, ham: 0.94}
        dataset: cases.json
        fuzz: {seed: 9}
        properties:
          option_order: {max_tv_distance: 0.02}
          label_format:
            styles: [upper, quoted, bracketed]
            aliases: {spam: [junk]}
            max_tv_distance: 0.02
          irrelevant_context:
            fragments: [Winner of nothing., Lunch is at noon.]
            max_flip_rate: 0
          inversion:
            rewrites:  # the last one changes nothing: a no-op, never sent
              - {find: is spam, replace: is not spam}
              - {find: winner, replace: loser}
              - {find: Lunch, replace: Lunch}
            samples: 2
            max_flip_rate: 0
            max_tv_distance: 0.5
        """,
        "cases.json",
        [
            {"input": "You are a winner, this is spam for sure", "expected": "spam"},
            {"input": "Lunch at noon?", "expected": "ham"},
            {"input": "this is spam, is spam", "expected": "spam"},
            {"input": "WINNER winner", "expected": "spam"},
            {"input": "Quarterly report attached."},
        ],
    ),
    # object inputs: text properties edit fuzz.text_field; monotonic raises a number
    "score": (
        """
        schema_version: "0.1"
        decision: {name: severity, type: score, levels: [1, 2, 3, 4]}
        backend: {provider: mock, model: sev-hash, seed: 1}
        dataset: cases.jsonl
        fuzz: {seed: 2, text_field: text, minimize: true, max_minimize_calls: 1}
        properties:
          label_format: {styles: [numbered, lettered], max_tv_distance: 0.2}
          irrelevant_context: {max_tv_distance: 0.05, max_flip_rate: 0.5}
          whitespace: {edits: 2, samples: 3, max_abs_delta: 0.1}
          paraphrase: {max_tv_distance: 0.001}
          monotonic:
            field: users
            direction: decreasing
            deltas: [1, 1000.5]
            max_level_decrease: 0.1
            max_flip_rate: 0.2
        """,
        "cases.jsonl",
        [
            {
                "id": "s1",
                "input": {"text": "Checkout is down. All regions.", "users": 50},
                "expected": 4,
            },
            {"id": "s2", "input": {"text": "Slow search", "users": 2.5}, "expected": 2},
            {"id": "s3", "input": {"text": "Typo on page", "users": True}, "expected": 1},
            {"id": "s4", "input": {"text": "No users field. Odd."}, "expected": 3},
            {"id": "s5", "input": {"users": 7}, "expected": 2},
            {"id": "s6", "input": "a plain string", "expected": 1},
        ],
    ),
    # more than six options: orders are drawn by shuffling
    "wide": (
        """
        schema_version: "0.1"
        decision: {name: topic, type: choice, options: [a, b, c, d, e, f, g, h]}
        backend: {provider: mock, seed: 4, position_bias: 0.3}
        dataset: cases.jsonl
        fuzz: {seed: 1234567890123, minimize: true}
        properties:
          option_order: {samples: 4, max_tv_distance: 0.1}
          label_format: {styles: [lettered, upper], max_tv_distance: 0.5, samples: 3}
        """,
        "cases.jsonl",
        [{"id": f"w{i}", "input": f"topic number {i}. extra words"} for i in range(5)],
    ),
}


def write_scenario(root: Path, name: str, **replace: str) -> Path:
    """The scenario's files under ``root/name``; returns the contract path. ``replace`` edits
    the contract text (old=new pairs given as keyword ``"old" -> "new"`` via a dict)."""
    text, dataset_name, cases = SCENARIOS[name]
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    contract = textwrap.dedent(text).lstrip("\n")
    for old, new in replace.items():
        assert old in contract, old
        contract = contract.replace(old, new)
    (folder / "decguard.yaml").write_text(contract, encoding="utf-8")
    if dataset_name.endswith(".json"):
        (folder / dataset_name).write_text(json.dumps(cases), encoding="utf-8")
    else:
        lines = "\n".join(json.dumps(c) for c in cases) + "\n"
        (folder / dataset_name).write_text(lines, encoding="utf-8")
    rows = "\n".join(json.dumps(row) for row in FILE_PARAPHRASES) + "\n"
    (folder / "paraphrases.jsonl").write_text(rows, encoding="utf-8")
    return folder / "decguard.yaml"


def _zero_latency(result: dict[str, Any] | None) -> None:
    if result is not None:
        result["latency_ms"] = 0.0


def normalised(document: dict[str, Any]) -> dict[str, Any]:
    """A report without what legitimately differs: producer, time and latencies."""
    doc = copy.deepcopy(document)
    for key in ("decguard_version", "created_at"):
        doc.pop(key, None)
    for record in doc.get("results") or []:
        _zero_latency(record["result"])
    if "metrics" in doc:
        doc["metrics"]["latency"] = None
    doc["checks"] = [c for c in doc.get("checks", []) if c["gate"] != "max_latency_p95_ms"]
    properties = doc.get("properties")
    for pair in (properties or {}).get("pairs", []):
        _zero_latency(pair["result"])
        if pair["reduced"] is not None:
            _zero_latency(pair["reduced"]["result"])
    return doc


def normalised_replay(document: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(document)
    for key in ("decguard_version", "created_at"):
        doc.pop(key)
    for outcome in doc["outcomes"]:
        _zero_latency(outcome["original"])
        for example in outcome["examples"]:
            _zero_latency(example["result"])
    return doc


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values differ, for readable assertion messages."""
    if type(a) is not type(b) and not (isinstance(a, int | float) and isinstance(b, int | float)):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} != {list(b)}"
        for key in a:
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"

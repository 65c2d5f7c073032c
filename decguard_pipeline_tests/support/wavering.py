"""A loopback model that never answers the same way twice (seeded), for the tests of
``pipeline.repeats``: what it sent per case, in order, and the consistency of that computed
from the definitions, independently of core/consistency."""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

LABELS = ["urgent", "routine", "later"]


class Wavering:
    """A model that answers every request with fresh random probabilities (seeded), and
    remembers, per case, what it sent, in the order it sent it; ``fail`` holds
    (case id, n-th ask) pairs answered with a 503 instead."""

    def __init__(self, seed: int = 5, fail: set[tuple[str, int]] | None = None) -> None:
        self.rng = random.Random(seed)
        self.fail = fail or set()
        self.sent: dict[str, list[dict[str, float] | None]] = defaultdict(list)
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        case = body["case_id"]
        with self.lock:
            if (case, len(self.sent[case])) in self.fail:
                self.sent[case].append(None)
                return 503, {"error": "busy"}, {}
            # a leaning model: the case's favourite label most of the time, sometimes another
            weights = [self.rng.random() + (3.0 if i == int(case[1:]) % 3 else 0.0)
                       for i in range(3)]  # fmt: skip
            if self.rng.random() < 0.3:
                weights.reverse()
            total = sum(weights)
            probs = {label: w / total for label, w in zip(body["decision"]["labels"], weights,
                                                          strict=True)}  # fmt: skip
            self.sent[case].append(probs)
        return 200, {"probabilities": probs, "model_version": "w-1"}, {}


def contract(folder: Path, url: str, *, n: int, count: int | None, concurrency: int = 4) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "cases.jsonl").open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"t{i:03d}", "input": f"ticket {i}",
                                     "expected": LABELS[i % 3]}) + "\n")  # fmt: skip
    repeats = "" if count is None else f"pipeline:\n  repeats: {{count: {count}}}\n"
    path = folder / "decguard.yaml"
    path.write_text(
        'schema_version: "0.1"\n'
        f"decision: {{name: urgency, type: choice, options: [{', '.join(LABELS)}]}}\n"
        f"backend: {{provider: http, model: wavering, url: {url}, max_retries: 0}}\n"
        f"dataset: cases.jsonl\nevaluation: {{max_concurrency: {concurrency}}}\n" + repeats
    )
    return path


def expected_consistency(sent: dict[str, list[dict[str, float] | None]]) -> dict[str, Any]:
    """The consistency of what the server sent, from the definitions (argmax; the random
    weights never tie), with cases that got a 503 in any ask left out."""
    asks = {case: answers for case, answers in sent.items() if None not in answers}
    chosen = {case: [max(LABELS, key=a.__getitem__) for a in answers]  # type: ignore[union-attr]
              for case, answers in asks.items()}  # fmt: skip
    pairs = [sum(x == y for x, y in itertools.combinations(row, 2))
             / len(list(itertools.combinations(row, 2))) for row in chosen.values()]  # fmt: skip
    tv = []
    for answers in asks.values():
        mean = {label: sum(a[label] for a in answers) / len(answers) for label in LABELS}  # type: ignore[index]
        tv += [0.5 * sum(abs(a[label] - mean[label]) for label in LABELS) for a in answers]  # type: ignore[index]
    rows = list(chosen.values())
    with_report = [sum(c == row[0] for c in row[1:]) / (len(row) - 1) for row in rows]
    flips = {label: sum(label in row and set(row) != {label} for row in rows) for label in LABELS}
    return {
        "cases_measured": len(asks),
        "unanimous_share": sum(len(set(row)) == 1 for row in rows) / len(rows),
        "pairwise_agreement": sum(pairs) / len(pairs),
        "agreement_with_report": sum(with_report) / len(rows),
        "mean_tv_distance": sum(tv) / len(tv),
        "label_flips": flips,
    }


def assert_matches(section: dict[str, Any], expected: dict[str, Any]) -> None:
    for name, value in expected.items():
        assert section[name] == (pytest.approx(value, abs=1e-12) if isinstance(value, float)
                                 else value), name  # fmt: skip

"""``pipeline.repeats`` (issue 13 item 4) against loopback models: a server whose answers vary
from request to request, so the consistency numbers must equal a computation from what it
sent; a deterministic model, whose report must not change with repeats; and the response
cache, which must replay each repetition's own answers and ask nothing the second time."""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.runs.cache import CacheOptions
from decguard_pipeline.runs.golden import run_test
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.canned_server import canned
from decguard_pipeline_tests.support.fuzz_scenarios import normalised

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


def test_consistency_is_what_the_server_sent(tmp_path):
    model = Wavering()
    with canned(model) as server:
        report = run_test(contract(tmp_path, server.url, n=30, count=4), check_health_first=False)
    assert sum(len(v) for v in model.sent.values()) == 4 * 30  # N asks of every case
    assert all(len(v) == 4 for v in model.sent.values())
    section = report.extensions["consistency"]
    assert_matches(section, expected_consistency(model.sent))
    assert section["cases"] == 30 and section["extra_asks"] == 90
    assert 0 < section["unanimous_share"] < 1  # the model wavers: not one answer 4 times
    # the report's answer is the first ask's
    for record, case in zip(report.results.probs, report.results.case_ids, strict=True):
        assert record.tolist() == pytest.approx([model.sent[case][0][label] for label in LABELS])


def test_errored_asks_are_counted_and_their_cases_left_out(tmp_path):
    fail = {("t001", 2), ("t007", 1), ("t007", 2), ("t011", 0)}
    model = Wavering(seed=9, fail=fail)
    with canned(model) as server:
        report = run_test(contract(tmp_path, server.url, n=15, count=3), check_health_first=False)
    section = report.extensions["consistency"]
    assert section["errors_by_repetition"] == [1, 1, 2]
    assert section["cases_with_errors"] == 3 and section["cases_measured"] == 12
    assert_matches(section, expected_consistency(model.sent))
    errored = [c for c, e in zip(report.results.case_ids, report.results.error_kind, strict=True)
               if e is not None]  # fmt: skip
    assert errored == ["t011"]  # the report's own ask: only its errors are DecGuard's


def test_a_deterministic_model_is_consistent_and_its_report_unchanged(tmp_path):
    """The report of a contract with repeats is the report of the same contract without
    them (but for the hash of the contract that differs, the time and latencies)."""
    folder = tmp_path / "spam"
    folder.mkdir()
    source = (EXAMPLES / "spam" / "decguard.yaml").read_text()
    (folder / "cases.json").write_bytes((EXAMPLES / "spam" / "cases.json").read_bytes())
    path = folder / "decguard.yaml"
    path.write_text(source)
    plain = run_test(path)
    path.write_text(source + "pipeline:\n  repeats: {count: 5}\n")
    repeated = run_test(path)
    section = repeated.extensions["consistency"]
    assert section["unanimous_share"] == section["pairwise_agreement"] == 1.0
    assert section["agreement_with_report"] == 1.0 and section["mean_tv_distance"] == 0.0
    assert section["inconsistent_cases"] == 0 and section["extra_asks"] == 40
    assert "consistency" not in plain.extensions
    one, five = normalised(plain.document), normalised(repeated.document)
    assert one["contract"].pop("hash") != five["contract"].pop("hash")
    assert one == five


def test_the_cache_replays_each_repetitions_own_answers(tmp_path):
    """Cold: every repetition asked (N x cases) and stored under its own sample index; warm:
    nothing asked, the same report and consistency, so never one answer N times."""
    model = Wavering(seed=3)
    with canned(model) as server:
        path = contract(tmp_path, server.url, n=20, count=3)
        runs = []
        for _ in range(2):
            options = CacheOptions(tmp_path / "cache", "urgency", version="w-1")
            runs.append((run_test(path, check_health_first=False, cache=options), options))
        asked = sum(len(v) for v in model.sent.values())
    (cold, cold_options), (warm, warm_options) = runs
    assert asked == 3 * 20  # the warm run asked nothing
    assert cold_options.stats.asked == 60 and cold_options.stats.stored == 60
    assert warm_options.stats.asked == 0 and warm_options.stats.from_cache == 60
    assert warm.extensions["consistency"] == cold.extensions["consistency"]
    assert_matches(warm.extensions["consistency"], expected_consistency(model.sent))
    assert warm.extensions["consistency"]["unanimous_share"] < 1
    assert normalised(warm.document) == normalised(cold.document)


def test_without_repeats_a_warm_cache_still_replays_the_first_ask(tmp_path):
    """Repetition 0 is keyed as a run without repeats: adding repeats to a contract whose
    answers are cached asks only the extra repetitions."""
    model = Wavering(seed=4)
    with canned(model) as server:
        plain = contract(tmp_path / "plain", server.url, n=10, count=None)
        run_test(plain, check_health_first=False,
                 cache=CacheOptions(tmp_path / "cache", "urgency", version="w-1"))  # fmt: skip
        repeated = contract(tmp_path / "plain", server.url, n=10, count=3)
        options = CacheOptions(tmp_path / "cache", "urgency", version="w-1")
        run_test(repeated, check_health_first=False, cache=options)
    assert options.stats.from_cache == 10 and options.stats.asked == 20
    assert all(len(v) == 3 for v in model.sent.values())


def test_fuzz_runs_ask_once(tmp_path):
    path = tmp_path / "spam"
    path.mkdir()
    (path / "cases.json").write_bytes((EXAMPLES / "spam" / "cases.json").read_bytes())
    (path / "decguard.yaml").write_text(
        (EXAMPLES / "spam" / "decguard.yaml").read_text() + "pipeline:\n  repeats: {count: 3}\n"
    )
    loaded = load_contract(path / "decguard.yaml")
    assert "consistency" not in run_test(loaded, mode="fuzz").extensions
    assert "consistency" in run_test(loaded, mode="all").extensions

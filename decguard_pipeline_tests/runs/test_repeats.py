"""``pipeline.repeats`` (issue 13 item 4) against loopback models: a server whose answers vary
from request to request, so the consistency numbers must equal a computation from what it
sent; a deterministic model, whose report must not change with repeats; and the response
cache, which must replay each repetition's own answers and ask nothing the second time."""

from __future__ import annotations

import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.runs.cache import CacheOptions
from decguard_pipeline.runs.golden import run_test
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.canned_server import canned
from decguard_pipeline_tests.support.counting_server import counting_server
from decguard_pipeline_tests.support.fuzz_scenarios import normalised
from decguard_pipeline_tests.support.wavering import (
    Wavering,
    assert_matches,
    contract,
    expected_consistency,
)

LABELS = ["urgent", "routine", "later"]


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


def test_a_deterministic_server_is_consistent_and_its_report_unchanged(tmp_path):
    with counting_server() as server:
        reports = []
        for count in (None, 3):
            path = contract(tmp_path, server.url, n=25, count=count)
            reports.append(run_test(path))
        assert server.state.total == 25 + 3 * 25
    plain, repeated = reports
    section = repeated.extensions["consistency"]
    assert section["unanimous_share"] == section["pairwise_agreement"] == 1.0
    assert section["mean_tv_distance"] == 0.0 and section["cases_measured"] == 25
    one, three = normalised(plain.document), normalised(repeated.document)
    assert one["contract"].pop("hash") != three["contract"].pop("hash")
    assert one == three

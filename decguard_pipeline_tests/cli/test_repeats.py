"""``pipeline.repeats`` on the command line: the consistency block after DecGuard's layout and
the sidecar section; ``-f json`` prints DecGuard's document alone; ``--cache`` replays every
repetition; ``--retry-errors`` takes only the report's own answers from the stored report
(never an extra repetition's)."""

from __future__ import annotations

import json

from decguard_pipeline_tests.support.canned_server import canned
from decguard_pipeline_tests.support.wavering import (
    Wavering,
    assert_matches,
    contract,
    expected_consistency,
)


def asked(model: Wavering) -> int:
    return sum(len(v) for v in model.sent.values())


def test_text_block_sidecar_and_json(tmp_path, ours, monkeypatch):
    monkeypatch.delenv("DECGUARD_CACHE", raising=False)
    model = Wavering(seed=21)
    with canned(model) as server:
        path = contract(tmp_path, server.url, n=12, count=3)
        ran = ours("test", path, "--no-healthcheck", "-o", tmp_path / "r.json")
        shown = ours("test", path, "--no-healthcheck", "-f", "json")
    assert ran.exit_code == 0, ran.stderr
    assert "\n\n  Consistency  3 asks per case · 12 of 12 cases measured · 24 extra asks\n" in (
        ran.stdout
    )
    section = json.loads((tmp_path / "r.pipeline.json").read_text())["consistency"]
    first_run = {case: answers[:3] for case, answers in model.sent.items()}
    assert_matches(section, expected_consistency(first_run))
    assert f"unanimous {section['unanimous_share']:.4f}" in ran.stdout
    document = json.loads(shown.stdout)
    assert "consistency" not in document and document["mode"] == "test"
    assert asked(model) == 2 * 3 * 12


def test_cache_and_retry_errors(tmp_path, ours, monkeypatch):
    monkeypatch.delenv("DECGUARD_CACHE", raising=False)
    model = Wavering(seed=22, fail={("t002", 0), ("t005", 0)})
    cache = tmp_path / "cache"
    with canned(model) as server:
        plain = contract(tmp_path / "plain", server.url, n=10, count=None)
        first = ours("test", plain, "--no-healthcheck", "-o", tmp_path / "first.json")
        assert first.exit_code in (0, 1), first.stderr
        assert asked(model) == 10
        repeated = contract(tmp_path / "plain", server.url, n=10, count=3)
        retry = ["--retry-errors", tmp_path / "first.json", "--cache", cache]
        retried = ours("test", repeated, "--no-healthcheck", *retry, "-o", tmp_path / "r.json")
        assert retried.exit_code in (0, 1), retried.stderr
        # the two errored cases asked again, and every case twice more for the repetitions
        assert asked(model) == 10 + 2 + 2 * 10
        again = ours("test", repeated, "--no-healthcheck", "--cache", cache,
                     "-o", tmp_path / "again.json")  # fmt: skip
        # the repetitions and the two retried answers come from the cache; the eight answers
        # taken from the report were never in it: they are asked (the first one tells the
        # model version, as a probe)
        assert asked(model) == 10 + 2 + 2 * 10 + 8
    assert all(len(answers) == 4 for answers in model.sent.values())
    sidecar = json.loads((tmp_path / "r.pipeline.json").read_text())
    assert sidecar["cache"]["answers_from_report"] == 8
    assert sidecar["consistency"]["cases_with_errors"] == 0
    replayed = json.loads((tmp_path / "again.pipeline.json").read_text())
    assert replayed["cache"]["answers_from_cache"] == 2 + 2 * 10
    assert again.exit_code in (0, 1), again.stderr


def test_validate_names_the_repeats(tmp_path, ours):
    path = contract(tmp_path, "http://127.0.0.1:9/decide", n=3, count=7)
    ran = ours("validate", path)
    assert ran.exit_code == 0 and "    repeats   7 asks per golden case\n" in ran.stdout

"""``replay`` against decguard 0.1.1: outcomes, regeneration from the seed, error-kind
semantics, selection by id, contract/backend overrides, errors, JSON and text layout."""

from __future__ import annotations

import json
import re

import pytest

from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.fuzz_scenarios import (
    SCENARIOS,
    first_difference,
    normalised_replay,
    write_scenario,
)

REFUND = EXAMPLES / "refund" / "decguard.yaml"


def _text(stdout: str) -> list[str]:
    return re.sub(r"DecGuard \S+ ·", "DecGuard V ·", stdout).splitlines()


def replay_both(ours, ref, report_args, tmp_path, *replay_args):
    """Each tool makes the report (same path) and replays it; both outcomes must agree."""
    report = tmp_path / "fuzz.json"
    runs = {}
    for name, tool in (("ours", ours), ("ref", ref)):
        made = tool(*report_args, "-o", report)
        assert made.exit_code in (0, 1), made.stderr
        as_json = tool("replay", report, *replay_args, "-f", "json")
        as_text = tool("replay", report, *replay_args)
        assert as_json.exit_code == as_text.exit_code
        runs[name] = (as_json, as_text)
    (a_json, a_text), (b_json, b_text) = runs["ours"], runs["ref"]
    assert (a_json.exit_code, a_json.stderr) == (b_json.exit_code, b_json.stderr)
    assert _text(a_text.stdout) == _text(b_text.stdout)
    if a_json.exit_code == 2:
        return None, a_json
    mine, theirs = (
        normalised_replay(json.loads(a_json.stdout)),
        normalised_replay(json.loads(b_json.stdout)),
    )
    assert mine == theirs, first_difference(mine, theirs)
    return mine, a_text


def test_documented_replays(ours, ref, tmp_path):
    args = ("fuzz", REFUND, "-b", "order_sensitive")
    doc, text = replay_both(ours, ref, args, tmp_path)
    assert doc["status"] == "fail" and doc["exit_code"] == 1
    assert "  option_order/r1/2: REPRODUCED · regenerated from seed: yes" in text.stdout
    assert all(o["regenerated"] for o in doc["outcomes"])
    doc, text = replay_both(ours, ref, args, tmp_path, "--backend", "default")
    assert doc["status"] == "pass" and text.stdout.endswith("PASS: no failure reproduced\n")


def test_selection_by_id_and_passing_pairs(ours, ref, tmp_path):
    args = ("fuzz", REFUND, "-b", "order_sensitive")
    ids = ("--id", "label_format/r2/1", "--id", "option_order/r1/2", "--id", "paraphrase/r3/0")
    doc, _ = replay_both(ours, ref, args, tmp_path, *ids)
    assert [o["id"] for o in doc["outcomes"]] == list(ids[1::2])
    assert [o["regenerated"] for o in doc["outcomes"]] == [True, True, None]
    assert [len(o["examples"]) for o in doc["outcomes"]] == [1, 2, 1]


@pytest.mark.parametrize(
    "replay_args",
    [("--id", "option_order/r99/0"), ("-b", "nope"), ("-c", "missing.yaml")],
    ids=["unknown-id", "unknown-backend", "missing-contract"],
)
def test_replay_errors(ours, ref, tmp_path, replay_args):
    _, ran = replay_both(
        ours, ref, ("fuzz", REFUND, "-b", "order_sensitive"), tmp_path, *replay_args
    )
    assert ran.exit_code == 2


def test_test_reports_have_nothing_to_replay(ours, ref, tmp_path):
    _, ran = replay_both(ours, ref, ("test", REFUND), tmp_path)
    assert "a 'test' report has no property results to replay" in ran.stderr


def test_nothing_to_replay(ours, ref, tmp_path):
    doc, text = replay_both(ours, ref, ("fuzz", REFUND), tmp_path)
    assert doc["outcomes"] == []
    assert "Nothing to replay: the report has no property failures." in text.stdout


def test_changed_contract_uses_its_limits(ours, ref, tmp_path):
    loose = tmp_path / "loose.yaml"
    loose.write_text(
        REFUND.read_text()
        .replace("samples: 3, max_tv_distance: 0.03", "samples: 3, max_tv_distance: 0.5")
        .replace("dataset: cases.jsonl", f"dataset: {EXAMPLES / 'refund' / 'cases.jsonl'}")
    )
    args = ("fuzz", REFUND, "-b", "order_sensitive")
    doc, text = replay_both(ours, ref, args, tmp_path, "-c", loose)
    assert doc["contract_changed"] and doc["status"] == "pass"
    assert "(changed since the report was made)" in text.stdout


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_generated_contracts_replay_like_the_reference(ours, ref, tmp_path, name):
    contract = write_scenario(tmp_path, name)
    doc, _ = replay_both(ours, ref, ("fuzz", contract), tmp_path)
    assert doc["outcomes"], "the scenario must have failures to replay"
    if name == "choice":  # another backend: different answers, some failures hold now
        other, _ = replay_both(ours, ref, ("fuzz", contract), tmp_path, "-b", "fair")
        assert other != doc


def test_errored_pairs_replay_by_error_kind(ours, ref, tmp_path):
    """A stored invalid_response reproduces when the same kind comes back."""
    contract = write_scenario(tmp_path, "noul")
    doc, text = replay_both(ours, ref, ("fuzz", contract), tmp_path)
    errored = [o for o in doc["outcomes"] if o["examples"][0]["stored_error"]]
    assert errored and all(o["reproduced"] for o in errored)
    assert "      error: invalid_response: probabilities do not match" in text.stdout


def test_errored_originals_over_http(ours, ref, tmp_path, loopback):
    server = loopback({"seed": 2, "position_bias": 0.3}, labels=("a", "b", "c"))
    (tmp_path / "cases.jsonl").write_text(
        json.dumps({"id": "ok", "input": "fine. text"})
        + "\n"
        + json.dumps({"id": "status=500", "input": "fails"})
        + "\n"
    )
    contract = tmp_path / "decguard.yaml"
    contract.write_text(
        'schema_version: "0.1"\n'
        "decision: {name: d, type: choice, options: [a, b, c]}\n"
        f"backend: {{provider: http, url: '{server.url}'}}\n"
        "dataset: cases.jsonl\n"
        "properties:\n  option_order: {samples: 1, max_tv_distance: 0.01}\n"
    )
    ids = ("--id", "option_order/status=500/0", "--id", "option_order/ok/0")
    doc, text = replay_both(ours, ref, ("fuzz", contract), tmp_path, *ids)
    failing = doc["outcomes"][0]
    assert failing["original_error"]["kind"] == "backend_error"
    assert failing["examples"][0]["error"]["kind"] == "backend_error"
    assert not failing["reproduced"]
    assert "      error changed: original_error -> backend_error:" in text.stdout
    assert "    original errored: backend 'default' returned HTTP 500" in text.stdout


def test_cross_replay(ours, ref, tmp_path):
    """Each tool replays the other's report the same way it replays its own."""
    mine, theirs = tmp_path / "ours.json", tmp_path / "ref.json"
    ours("fuzz", REFUND, "-b", "order_sensitive", "-o", mine)
    ref("fuzz", REFUND, "-b", "order_sensitive", "-o", theirs)
    a = ours("replay", theirs, "-f", "json")
    b = ref("replay", mine, "-f", "json")
    assert a.exit_code == b.exit_code == 1
    left, right = normalised_replay(json.loads(a.stdout)), normalised_replay(json.loads(b.stdout))
    left.pop("source"), right.pop("source")
    assert left == right, first_difference(left, right)

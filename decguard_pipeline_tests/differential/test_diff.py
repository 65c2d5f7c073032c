"""``diff`` against decguard==0.1.1: generated report pairs, both CLIs, JSON and text compared.

Report pairs come from the reference's own report builder (random cases: errors on either
side, unlabeled cases, ties and zeros, metadata of every JSON type, different datasets) and
from both CLIs' ``test`` command (mock backends; a loopback HTTP model for errors).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from decguard_pipeline_tests.support.diff_cases import (
    ALL_GATES,
    contract_text,
    gates_yaml,
    generated_pair,
    normal_json,
    normal_text,
)

# --- reports built by the reference ------------------------------------------------------------


# --- comparing both CLIs ----------------------------------------------------------------------


def assert_same_diff(ours, ref, *args: Any, error: bool = False) -> int:
    """Both CLIs on the same arguments: exit code, stderr, text and JSON. Unless ``error``,
    the diff must have been made (exit 0 or 1)."""
    a, b = ours("diff", *args), ref("diff", *args)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert (b.exit_code == 2) == error, b.stderr
    assert normal_text(a.stdout) == normal_text(b.stdout)
    a, b = ours("diff", *args, "-f", "json"), ref("diff", *args, "-f", "json")
    assert a.exit_code == b.exit_code
    if b.exit_code == 2:
        assert a.stderr == b.stderr
        return b.exit_code
    assert normal_json(a.stdout) == normal_json(b.stdout)
    # key order too, not only content
    assert list(json.loads(a.stdout)) == list(json.loads(b.stdout))
    return b.exit_code


def write_contract(tmp: Path, name: str, kind: str, body: str) -> Path:
    path = tmp / name
    path.write_text(contract_text(kind, extra=textwrap.dedent(body)), encoding="utf-8")
    return path


# --- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("kind", ["choice", "noul", "score"])
def test_no_contract_same_dataset(tmp_path, ours, ref, seed, kind):
    base, cand = generated_pair(tmp_path, seed, kind)
    assert_same_diff(ours, ref, base, cand)


@pytest.mark.parametrize("level", ["requirements", "warnings"])
@pytest.mark.parametrize("seed", [4, 5])
def test_every_regression_gate(tmp_path, ours, ref, seed, level):
    base, cand = generated_pair(tmp_path, seed, "choice", p_error=(0.1, 0.15))
    gates = gates_yaml(ALL_GATES, "  " if level == "requirements" else "    ")
    # with warnings only, the implicit requirement is relaxed so only warnings can fail
    prefix = (
        "regression:\n"
        if level == "requirements"
        else "regression:\n  max_error_rate_increase: 1.0\n  warnings:\n"
    )
    body = prefix + gates + "  segment_by: [locale, tier]\n  min_segment_size: 4\n"
    contract = write_contract(tmp_path, "c.yaml", "choice", body)
    code = assert_same_diff(ours, ref, base, cand, "-c", contract)
    assert code == (1 if level == "requirements" else 0)
    if level == "warnings":
        assert assert_same_diff(ours, ref, base, cand, "-c", contract, "--fail-on-warn") == 1


@pytest.mark.parametrize(
    ("threshold", "limit"), [(0.0, 0.0), (1.0, 1.0), (0.5, 0.02)]
)  # fmt: skip
def test_gate_boundaries_and_evaluation_from_contract(tmp_path, ours, ref, threshold, limit):
    # the contract's evaluation (threshold, bins) differs from the one the reports were made
    # with; limits of exactly 0 and 1 test the inclusive comparison
    base, cand = generated_pair(tmp_path, 6, "score")
    limits = {g: v if g == "max_latency_p95_increase_ms" else min(v, limit)
              for g, v in ALL_GATES.items()}  # fmt: skip
    body = (
        f"evaluation:\n  confidence_threshold: {threshold}\n  calibration_bins: 7\n"
        "regression:\n" + gates_yaml(limits) + "  segment_by: [locale]\n"
    )
    contract = write_contract(tmp_path, "c.yaml", "score", body)
    assert_same_diff(ours, ref, base, cand, "-c", contract)


@pytest.mark.parametrize("seed", [7, 8])
def test_different_datasets_matched_by_id(tmp_path, ours, ref, seed):
    base, cand = generated_pair(tmp_path, seed, "choice", overlap=0.7, shuffle=True)
    contract = write_contract(
        tmp_path, "c.yaml", "choice",
        "regression:\n  max_accuracy_drop: 0.05\n  segment_by: [région]\n",
    )  # fmt: skip
    assert_same_diff(ours, ref, base, cand, "-c", contract)
    assert_same_diff(ours, ref, cand, base, "-s", "locale", "-s", "tier", "-s", "locale")


def test_no_common_cases(tmp_path, ours, ref):
    base, cand = generated_pair(tmp_path, 9, "noul", overlap=0.0)
    body = "regression:\n" + gates_yaml(ALL_GATES) + "  segment_by: [x]\n"
    contract = write_contract(tmp_path, "c.yaml", "noul", body)
    assert assert_same_diff(ours, ref, base, cand, "-c", contract) == 1


def test_errors_on_either_side(tmp_path, ours, ref):
    # candidate errors on most cases; then the other way round (recoveries)
    base, cand = generated_pair(tmp_path, 10, "choice", p_error=(0.05, 0.9))
    assert assert_same_diff(ours, ref, base, cand) == 1
    assert assert_same_diff(ours, ref, cand, base) == 0  # fewer errors: passes
    contract = write_contract(tmp_path, "c.yaml", "choice",
                              "regression:\n  max_error_rate_increase: 1.0\n")  # fmt: skip
    assert assert_same_diff(ours, ref, base, cand, "-c", contract) == 0


def test_all_unlabeled_and_small_segments(tmp_path, ours, ref):
    base, cand = generated_pair(tmp_path, 11, "choice", n=25, p_unlabeled=1.0)
    contract = write_contract(
        tmp_path, "c.yaml", "choice",
        "regression:\n  max_accuracy_drop: 0.1\n  warnings:\n    max_segment_accuracy_drop: 0.1\n"
        "  segment_by: [locale]\n  min_segment_size: 30\n",
    )  # fmt: skip
    assert assert_same_diff(ours, ref, base, cand, "-c", contract) == 1


def test_output_file_and_notice(tmp_path, ours, ref):
    base, cand = generated_pair(tmp_path, 12, "choice")
    a = ours("diff", base, cand, "-o", tmp_path / "o" / "ours.json")
    b = ref("diff", base, cand, "-o", tmp_path / "r" / "ref.json")
    assert a.stderr.replace("o/ours", "X") == b.stderr.replace("r/ref", "X")
    ours_doc = normal_json((tmp_path / "o" / "ours.json").read_text(encoding="utf-8"))
    ref_doc = normal_json((tmp_path / "r" / "ref.json").read_text(encoding="utf-8"))
    assert ours_doc == ref_doc
    assert not (tmp_path / "o" / "ours.pipeline.json").exists()  # no statistics, no sidecar


def test_errors_exit_2_like_the_reference(tmp_path, ours, ref):
    base, cand = generated_pair(tmp_path, 13, "choice")
    other, _ = generated_pair(tmp_path / "n", 13, "noul")
    assert assert_same_diff(ours, ref, base, other, error=True) == 2  # cannot compare
    wrong = write_contract(tmp_path, "w.yaml", "noul", "")
    assert (
        assert_same_diff(ours, ref, base, cand, "-c", wrong, error=True) == 2
    )  # contract mismatch
    assert assert_same_diff(ours, ref, tmp_path / "missing.json", cand, error=True) == 2
    tampered = tmp_path / "tampered.json"
    doc = json.loads(cand.read_text(encoding="utf-8"))
    doc["metrics"]["counts"]["total"] += 1
    tampered.write_text(json.dumps(doc), encoding="utf-8")
    assert assert_same_diff(ours, ref, base, tampered, error=True) == 2
    assert ours("diff", base, cand, "-f", "xml").exit_code == 2


def test_the_baselines_problem_is_said_first_as_the_reference_says_it(tmp_path, ours, ref):
    """The two reports load side by side (core/report/load_both.py): whichever fails, and
    when both do, the message is the one loading them in order gives."""
    base, cand = generated_pair(tmp_path, 17, "choice")
    broken = {}
    for name, path, field in (("base", base, "total"), ("cand", cand, "labeled")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["metrics"]["counts"][field] += 1
        broken[name] = tmp_path / f"broken-{name}.json"
        broken[name].write_text(json.dumps(doc), encoding="utf-8")
    for pair in ((broken["base"], cand), (base, broken["cand"]), (broken["base"], broken["cand"])):
        assert assert_same_diff(ours, ref, *pair, error=True) == 2
    both = ours("diff", broken["base"], broken["cand"])
    assert "broken-base.json" in both.stderr and "broken-cand.json" not in both.stderr


# --- reports produced by the CLIs' own ``test`` --------------------------------------------------

CLI_CONTRACT = """\
schema_version: "0.1"
decision:
  name: tickets
  type: choice
  options: [refund, reject, review]
backend:
  provider: mock
  model: m-1
  rules:
    - contains: damaged
      probabilities: {refund: 0.9, reject: 0.05, review: 0.05}
backends:
  hashed:
    provider: mock
    model: m-2
    seed: 3
  biased:
    provider: mock
    model: m-3
    position_bias: 0.3
    rules:
      - contains: damaged
        probabilities: {refund: 0.6, reject: 0.1, review: 0.3}
  remote:
    provider: http
    url: URL
    max_retries: 0
dataset: cases.jsonl
evaluation:
  confidence_threshold: 0.6
regression:
  max_answer_flip_rate: 0.2
  max_mean_tv_distance: 0.2
  warnings:
    max_ece_increase: 0.01
    max_segment_accuracy_drop: 0.05
  segment_by: [locale]
  min_segment_size: 3
"""


def _cli_cases(n: int) -> str:
    lines = []
    for i in range(n):
        case: dict[str, Any] = {
            "id": f"t{i}" + ("-status=503" if i % 9 == 4 else ""),
            "input": ("parcel damaged " if i % 3 == 0 else "where is it ") + str(i),
            "metadata": {"locale": ["en", "de", "fr"][i % 3]},
        }
        if i % 5:
            case["expected"] = ["refund", "reject", "review"][i % 3]
        lines.append(json.dumps(case))
    return "\n".join(lines) + "\n"


def test_pairs_made_by_both_clis(tmp_path, ours, ref, loopback):
    server = loopback({"seed": 5}, labels=("refund", "reject", "review"))
    (tmp_path / "cases.jsonl").write_text(_cli_cases(40), encoding="utf-8")
    contract = tmp_path / "decguard.yaml"
    contract.write_text(CLI_CONTRACT.replace("URL", server.url), encoding="utf-8")
    reports = {}
    for who, run in (("ours", ours), ("ref", ref)):
        for backend in ("default", "hashed", "biased", "remote"):
            out = tmp_path / f"{who}-{backend}.json"
            ran = run("test", contract, "-b", backend, "-o", out, "--no-healthcheck")
            assert ran.exit_code in (0, 1), ran.stderr
            reports[who, backend] = out
    pairs = [
        (("ours", "default"), ("ours", "hashed")),
        (("ref", "default"), ("ref", "biased")),
        (("ours", "remote"), ("ref", "hashed")),  # errors in the baseline: recoveries
        (("ref", "biased"), ("ours", "remote")),  # errors in the candidate
    ]
    for b, c in pairs:
        assert_same_diff(ours, ref, reports[b], reports[c], "-c", contract)
    assert_same_diff(ours, ref, reports["ours", "hashed"], reports["ref", "remote"])


@pytest.mark.parametrize("seed", range(20, 32))
def test_random_configurations(tmp_path, ours, ref, seed):
    rng = np.random.default_rng(seed)
    kind = ["choice", "noul", "score"][seed % 3]
    base, cand = generated_pair(
        tmp_path, seed, kind,
        n=int(rng.integers(5, 80)),
        overlap=float(rng.choice([1.0, 0.9, 0.5])),
        p_error=(float(rng.uniform(0, 0.3)), float(rng.uniform(0, 0.3))),
        p_unlabeled=float(rng.uniform(0, 0.6)),
        shuffle=bool(rng.integers(0, 2)),
    )  # fmt: skip
    chosen = [g for g in ALL_GATES if rng.random() < 0.5]
    limits = {g: round(float(rng.uniform(0, 0.3)), 3) for g in chosen}
    warn = {g: round(float(rng.uniform(0, 0.3)), 3) for g in ALL_GATES if rng.random() < 0.3}
    threshold = "" if rng.random() < 0.5 else f"  confidence_threshold: {rng.uniform():.2f}\n"
    body = (
        f"evaluation:\n  calibration_bins: {int(rng.integers(1, 15))}\n{threshold}"
        "regression:\n" + gates_yaml(limits) + "  warnings:\n" + gates_yaml(warn, "    ")
        + "  segment_by: [locale, tier]\n"
        + f"  min_segment_size: {int(rng.integers(1, 12))}\n"
    )  # fmt: skip
    if not warn:
        body = body.replace("  warnings:\n", "")
    contract = write_contract(tmp_path, "c.yaml", kind, body)
    assert_same_diff(ours, ref, base, cand, "-c", contract)
    assert_same_diff(ours, ref, base, cand, "-c", contract, "--fail-on-warn")


def test_fuzz_mode_reports_of_both_clis(tmp_path, ours, ref):
    """Reports with a ``properties`` section (``test --all``) are diffed the same way."""
    from decguard_pipeline_tests.conftest import EXAMPLES

    contract = EXAMPLES / "refund" / "decguard.yaml"
    mine, theirs = tmp_path / "ours-all.json", tmp_path / "ref-all.json"
    assert ours("test", contract, "--all", "-o", mine).exit_code == 0
    assert ref("test", contract, "--all", "-b", "order_sensitive", "-o", theirs).exit_code == 1
    assert assert_same_diff(ours, ref, mine, theirs, "-c", contract) == 1
    assert assert_same_diff(ours, ref, theirs, mine) == 0

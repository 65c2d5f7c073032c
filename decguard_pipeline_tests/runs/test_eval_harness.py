"""``test``/``fuzz --run-dir``: the Guard Eval Harness files of a real run, every number
recomputed with scikit-learn from the case results of the run's own DecGuard reports; drop
rates at GEH's boundaries through a real HTTP server; the threshold table in the text and the
sidecar; bad settings and unwritable directories."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as skm

from decguard_pipeline_tests.runs.test_guard import ADVERSARIAL, CLEAR, HEAD
from decguard_pipeline_tests.support.guard_contracts import cases

EXTENSION = """\
pipeline:
  guard: {threshold: 0.5, target_recall: 0.75, target_fpr: 0.25}
  suites: {clear: clear.jsonl, adversarial: adversarial.jsonl}
"""


@pytest.fixture
def contract(write):
    write("clear.jsonl", cases(CLEAR, "c"))
    write("adversarial.jsonl", cases(ADVERSARIAL, "a"))
    return write("decguard.yaml", HEAD + EXTENSION)


def columns(report: dict, positive: str) -> tuple[np.ndarray, np.ndarray]:
    """``(unsafe, score)`` of the labeled cases with a decision, from a DecGuard report."""
    kept = [r for r in report["results"] if r["result"] and r["expected"] is not None]
    y = np.array([r["expected"] == positive for r in kept], dtype=bool)
    score = np.array([r["result"]["probabilities"][positive] for r in kept])
    return y, score


def recomputed(y: np.ndarray, score: np.ndarray, t: float) -> dict:
    """metrics.json's numbers, from scikit-learn."""
    pred = score >= t
    tn, fp, fn, tp = skm.confusion_matrix(y, pred, labels=[False, True]).ravel()
    nan = {"zero_division": np.nan}

    def defined(value: float) -> float | None:
        return None if np.isnan(value) else float(value)

    both = 0 < y.sum() < len(y)
    return {
        "count": len(y), "tp": tp, "tn": tn, "fp": fp, "fn": fn,
        "accuracy": skm.accuracy_score(y, pred),
        "precision": defined(skm.precision_score(y, pred, **nan)),
        "recall": defined(skm.recall_score(y, pred, **nan)),
        "f1": skm.f1_score(y, pred) if tp else None,
        "fpr": fp / (fp + tn) if fp + tn else None,
        "fnr": fn / (fn + tp) if fn + tp else None,
        "auroc": skm.roc_auc_score(y, score) if both else None,
        "auprc": skm.average_precision_score(y, score) if y.any() else None,
    }  # fmt: skip


def assert_recomputed(doc: dict, y: np.ndarray, score: np.ndarray, t: float) -> None:
    expected = recomputed(y, score, t)
    assert set(doc) == {*expected, "threshold_sweep"}
    for key, value in expected.items():
        assert doc[key] == (None if value is None else pytest.approx(value, abs=1e-12)), key
    for row in doc["threshold_sweep"]:
        again = recomputed(y, score, row["threshold"])
        for key in ("tp", "tn", "fp", "fn", "accuracy", "precision", "recall", "f1", "fpr"):
            value = again[key]
            assert row[key] == (None if value is None else pytest.approx(value, abs=1e-12)), key


def test_test_run_dir_writes_gehs_files_for_every_suite(ours, contract, tmp_path):
    out, run = tmp_path / "out" / "report.json", tmp_path / "geh"
    ran = ours("test", contract, "-o", out, "--run-dir", run)
    assert ran.exit_code == 0, ran.stderr
    assert f"Guard Eval Harness run written to {run}" in ran.stderr
    files = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())
    assert files == [
        "datasets/adversarial/dataset-manifest.json", "datasets/adversarial/metrics.json",
        "datasets/clear/dataset-manifest.json", "datasets/clear/metrics.json",
        "manifest.json", "summary.json",
    ]  # fmt: skip
    main = json.loads(out.read_text())
    # the other suite's DecGuard report is what `test --suite adversarial -o` writes
    other = tmp_path / "adv.json"
    assert ours("test", contract, "--suite", "adversarial", "-o", other).exit_code == 0
    reports = {"clear": main, "adversarial": json.loads(other.read_text())}
    pooled_y, pooled_s = [], []
    for name, report in reports.items():
        y, score = columns(report, "spam")
        assert_recomputed(json.loads((run / "datasets" / name / "metrics.json").read_text()),
                          y, score, 0.5)  # fmt: skip
        pooled_y.append(y)
        pooled_s.append(score)
    summary = json.loads((run / "summary.json").read_text())
    assert [d["name"] for d in summary["datasets"]] == ["clear", "adversarial"]
    micro = summary["aggregate"]["micro"]
    assert_recomputed(micro, np.concatenate(pooled_y), np.concatenate(pooled_s), 0.5)
    for metric, value in summary["aggregate"]["macro"].items():
        per = [d["metrics"][metric] for d in summary["datasets"]]
        assert value == pytest.approx(sum(per) / 2, abs=1e-15), metric

    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == summary["status"] == "normal"
    assert manifest["contract"]["hash"] == main["contract"]["hash"]
    assert manifest["created_at"] == main["created_at"]
    assert [(d["name"], d["hash"]) for d in manifest["datasets"]] == [
        ("clear", main["dataset"]["hash"]),
        ("adversarial", reports["adversarial"]["dataset"]["hash"]),
    ]
    assert (manifest["target"], manifest["positive_label"]) == ("default@mock", "spam")
    assert manifest["threshold"] == 0.5

    # the threshold table: in the text (under each suite's guard table) and the sidecar
    assert ran.stdout.count("  Thresholds   spam") == 2
    assert "target recall ≥ 0.75" in ran.stdout and "target FPR ≤ 0.25" in ran.stdout
    side = json.loads((out.parent / "report.pipeline.json").read_text())
    adversarial = side["evaluations"][1]["metrics"]["thresholds"]["labels"]["spam"]
    assert [r["threshold"] for r in adversarial["grid"]] == [i / 10 for i in range(1, 10)]
    # adversarial spam scores .06 .06 .97, ham .97 .92 .06 (test_guard.py): recall 3/3 only
    # at 0.06, where 3 of 3 ham are flagged too; FPR <= 0.25 never below the top ham score
    assert (adversarial["target_recall"]["threshold"], adversarial["target_recall"]["fp"]) == (
        0.06, 3,
    )  # fmt: skip
    assert adversarial["target_fpr"]["threshold"] is None
    assert side["settings"]["guard"]["target_recall"] == 0.75


def test_the_html_guard_section_shows_the_threshold_tables(ours, contract, tmp_path):
    page = tmp_path / "report.html"
    assert ours("test", contract, "--html", page).exit_code == 0
    html = page.read_text()
    assert "could not be read" not in html
    for suite in ("clear", "adversarial"):
        assert f"<h3>Thresholds · {suite} · spam</h3>" in html
    table = html[html.index("<h3>Thresholds · adversarial · spam</h3>") :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 1 + 9 + 2  # head, the grid, the two targets
    assert "<th>recall ≥ 0.75: 0.06</th>" in table
    assert "<th>FPR ≤ 0.25: none</th>" in table


def test_fuzz_run_dir_writes_the_dataset_it_decided(ours, write, contract, tmp_path):
    fuzzed = write("fuzzed.yaml", HEAD + "properties:\n  whitespace: {max_tv_distance: 1}\n"
                   + EXTENSION)  # fmt: skip
    out, run = tmp_path / "fuzz.json", tmp_path / "geh"
    ran = ours("fuzz", fuzzed, "-o", out, "--run-dir", run)
    assert ran.exit_code == 0, ran.stderr
    names = sorted(p.name for p in (run / "datasets").iterdir())
    assert names == ["clear"]  # the contract's dataset is its clear suite
    y, score = columns(json.loads(out.read_text()), "spam")
    assert_recomputed(json.loads((run / "datasets/clear/metrics.json").read_text()), y, score, 0.5)


def test_a_guard_over_several_labels_is_refused_before_any_model_call(ours, write, tmp_path):
    write("clear.jsonl", cases(CLEAR, "c"))
    path = write("wide.yaml", HEAD + "pipeline:\n  guard: {labels: [spam, ham]}\n")
    out = tmp_path / "r.json"
    ran = ours("test", path, "-o", out, "--run-dir", tmp_path / "geh")
    assert ran.exit_code == 2 and "Traceback" not in ran.stderr
    assert ran.stderr.startswith(
        f"error: {path}: a Guard Eval Harness run is about one positive label, but the guard "
        "scores 2 (spam, ham); name one in pipeline.guard.labels"
    )
    assert not out.exists() and not (tmp_path / "geh").exists()


def test_an_unwritable_run_dir_is_exit_2_after_the_report(ours, contract, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = tmp_path / "r.json"
    ran = ours("test", contract, "-o", out, "--run-dir", blocker / "geh")
    assert ran.exit_code == 2 and "Traceback" not in ran.stderr
    assert "cannot write Guard Eval Harness run" in ran.stderr
    assert json.loads(out.read_text())["status"] == "pass"  # the report is there


PARTIAL = """\
schema_version: "0.1"
decision: {{name: flagged, type: noul}}
backend: {{provider: http, url: "{url}"}}
dataset: cases.jsonl
requirements: {{max_error_rate: 0.5}}
pipeline:
  guard: {{threshold: 0.5}}
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("errored", "status"), [(49, "normal"), (50, "warning"), (200, "warning"), (201, "partial")]
)
def test_drop_rates_over_http_at_gehs_boundaries(ours, loopback, tmp_path, errored, status):
    """1000 cases, the first ``errored`` answered with HTTP 500 by the server: 4.9 % normal,
    5 % and 20 % warning, 20.1 % partial."""
    server = loopback({})  # no rules: the hashed fallback gives every case its own scores
    rows = [
        {"id": f"status=500-{i}" if i < errored else f"ok-{i}", "input": f"message {i}",
         "expected": "yes" if i % 3 else "no"}
        for i in range(1000)
    ]  # fmt: skip
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "decguard.yaml"
    path.write_text(PARTIAL.format(url=server.url))
    out, run = tmp_path / "r.json", tmp_path / "geh"
    ran = ours("test", path, "--no-healthcheck", "-o", out, "--run-dir", run)
    assert ran.exit_code == 0, ran.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    dataset = manifest["datasets"][0]
    assert (dataset["name"], dataset["status"], manifest["status"]) == ("main", status, status)
    assert dataset["drop_rate"] == manifest["drop_rate"] == errored / 1000
    assert (dataset["sample_count"], dataset["dropped_sample_count"]) == (1000, errored)
    assert manifest["warnings"] == [
        f"dropped {errored} of 1000 samples ({errored / 1000:.2%}) from dataset main after "
        "adapter errors"
    ]
    assert json.loads((run / "summary.json").read_text())["status"] == status
    y, score = columns(json.loads(out.read_text()), "yes")
    assert len(y) == 1000 - errored
    assert_recomputed(json.loads((run / "datasets/main/metrics.json").read_text()), y, score, 0.5)
    # the sidecar's run state is the same judgement
    side = json.loads((tmp_path / "r.pipeline.json").read_text())
    assert side["evaluations"][0]["metrics"]["run"]["state"] == status


def test_the_run_dir_is_replaced_by_the_next_run(ours, contract, tmp_path):
    run = tmp_path / "geh"
    assert ours("test", contract, "--run-dir", run).exit_code == 0
    assert ours("test", contract, "--suite", "clear", "--run-dir", run).exit_code == 0
    assert sorted(p.name for p in (run / "datasets").iterdir()) == ["clear"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert [d["name"] for d in manifest["datasets"]] == ["clear"]
    assert not list(Path(run).rglob("*.tmp"))

"""The Guard Eval Harness files (core/guard/eval_harness.py): every number of metrics.json
against scikit-learn on the same labels and scores, key for key; the aggregates of
summary.json; the drop-rate statuses at GEH's boundaries; the files as GEH writes them, whole
(kill -9) and without leftovers of an earlier run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as skm

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.errors import ContractError, ReportError
from decguard_pipeline.core.guard.eval_harness import (
    METRICS,
    HarnessRun,
    dump,
    harness_run,
    metrics_document,
)
from decguard_pipeline.core.guard.extension import guard_config
from decguard_pipeline.core.report.golden import build_report, dataset_info
from decguard_pipeline_tests.core.guard.test_metrics import generated, sk
from decguard_pipeline_tests.support.guard_results import make_results

NAN = {"zero_division": np.nan}
# GEH's documented metrics.json keys, and what its writer adds
DOCUMENTED = {"accuracy", "precision", "recall", "f1", "auroc", "auprc", "fpr", "fnr",
              "tp", "tn", "fp", "fn"}  # fmt: skip
WRITTEN = DOCUMENTED | {"count", "threshold_sweep"}


def check_at(doc: dict, y: np.ndarray, score: np.ndarray, threshold: float) -> None:
    """Every thresholded number of ``doc`` against scikit-learn at ``threshold``."""
    pred = score >= threshold
    tn, fp, fn, tp = skm.confusion_matrix(y, pred, labels=[False, True]).ravel()
    assert (doc["tp"], doc["tn"], doc["fp"], doc["fn"]) == (tp, tn, fp, fn)
    assert all(type(doc[k]) is int for k in ("tp", "tn", "fp", "fn"))
    assert doc["accuracy"] == (sk(skm.accuracy_score, y, pred) if len(y) else None)
    assert doc["precision"] == sk(skm.precision_score, y, pred, **NAN)
    assert doc["recall"] == sk(skm.recall_score, y, pred, **NAN)
    if tp:  # GEH: 2PR / (P + R), null whenever TP = 0 (scikit-learn says 0 there)
        assert doc["f1"] == pytest.approx(skm.f1_score(y, pred), rel=1e-15)
    else:
        assert doc["f1"] is None
    # FPR = 1 - specificity (recall of the negatives), FNR = 1 - recall
    specificity = sk(skm.recall_score, ~y, ~pred, **NAN)
    assert doc["fpr"] == (None if specificity is None else pytest.approx(1 - specificity))
    assert doc["fpr"] == (fp / (fp + tn) if fp + tn else None)
    assert doc["fnr"] == (fn / (fn + tp) if fn + tp else None)


def check_document(doc: dict, y: np.ndarray, score: np.ndarray, threshold: float) -> None:
    assert set(doc) == WRITTEN and set(METRICS) == DOCUMENTED
    assert doc["count"] == len(y)
    check_at(doc, y, score, threshold)
    both = 0 < y.sum() < len(y)
    auroc = sk(skm.roc_auc_score, y, score) if both else None
    assert doc["auroc"] == (None if auroc is None else pytest.approx(auroc, abs=1e-12))
    auprc = sk(skm.average_precision_score, y, score) if y.any() else None
    assert doc["auprc"] == (None if auprc is None else pytest.approx(auprc, abs=1e-12))
    sweep = doc["threshold_sweep"]
    assert [row["threshold"] for row in sweep] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7,
                                                    0.8, 0.9, 1.0]  # fmt: skip
    for row in sweep:
        assert set(row) == {"threshold", "accuracy", "precision", "recall", "f1", "fpr", "fnr",
                            "tp", "tn", "fp", "fn"}  # fmt: skip
        check_at(row, y, score, row["threshold"])


# (seed, cases, decimals of the scores: fewer make more ties, positive share, threshold)
SHAPES = [(seed, n, d, share, t)
          for seed, t in ((0, 0.5), (1, 0.3), (2, 0.7))
          for n, d, share in ((8, 1, 0.3), (300, 2, 0.3), (3000, 3, 0.1), (40, 1, 0.0),
                              (40, 1, 1.0))]  # fmt: skip


@pytest.mark.parametrize(("seed", "n", "decimals", "share", "threshold"), SHAPES)
def test_metrics_json_equals_sklearn_key_for_key(seed, n, decimals, share, threshold):
    y, score = generated(seed, n, decimals, positive_share=share)
    check_document(metrics_document(y, score, threshold), y, score, threshold)


def test_metrics_json_of_no_samples_is_all_null_ratios():
    doc = metrics_document(np.zeros(0, bool), np.zeros(0), 0.5)
    assert doc["count"] == doc["tp"] == doc["fn"] == 0
    assert all(doc[k] is None for k in ("accuracy", "precision", "recall", "f1", "fpr", "fnr",
                                         "auroc", "auprc"))  # fmt: skip


CONTRACT = """\
schema_version: "0.1"
decision: {name: is_unsafe, type: noul, labels: [unsafe, safe]}
backend: {provider: mock, model: guard-v1}
pipeline:
  guard: {threshold: 0.5}
"""


def loaded_contract(folder: Path, extra: str = ""):
    path = folder / "decguard.yaml"
    path.write_text(CONTRACT + extra)
    return load_contract(path)


def suite(loaded, seed: int, n: int, errored: int = 0, share: float = 0.4, unlabeled: int = 0):
    """A DecGuard report of ``n`` generated cases: the first ``errored`` are timeouts, the
    last ``unlabeled`` have no expected label."""
    y, score = generated(seed, n, 2, positive_share=share)
    expected = [0 if positive else 1 for positive in y]
    for i in range(n - unlabeled, n):
        expected[i] = None
    results = make_results(np.column_stack([score, 1 - score]), expected,
                           labels=("unsafe", "safe"), errored=tuple(range(errored)))  # fmt: skip
    info = dataset_info(f"suite{seed}.jsonl", f"sha256:{seed:064x}", n, n - unlabeled)
    backend = {"name": "default", "provider": "mock", "model": "guard-v1",
               "model_version": None, "details": {}}  # fmt: skip
    report = build_report(loaded, info, backend, results)
    keep = slice(errored, n - unlabeled)
    return report, y[keep], score[keep]


def test_summary_lists_every_dataset_and_aggregates_micro_and_macro(tmp_path):
    loaded = loaded_contract(tmp_path)
    config = guard_config(loaded.contract)
    parts = [suite(loaded, 1, 120, errored=3, unlabeled=5), suite(loaded, 2, 80),
             suite(loaded, 3, 30, share=1.0)]  # fmt: skip
    names = ["clear", "adversarial", "attacks_only"]
    run = harness_run(list(zip(names, [p[0] for p in parts], strict=True)), config,
                      target="default@guard-v1", source="decguard.yaml")  # fmt: skip
    docs = run.documents
    assert list(docs) == [
        *(f"datasets/{n}/{f}" for n in names for f in ("metrics.json", "dataset-manifest.json")),
        "summary.json",
        "manifest.json",
    ]
    for name, (_, y, score) in zip(names, parts, strict=True):
        check_document(docs[f"datasets/{name}/metrics.json"], y, score, 0.5)
    summary = docs["summary.json"]
    assert [d["name"] for d in summary["datasets"]] == names
    assert summary["dataset_count"] == 3 and summary["threshold"] == 0.5
    first = summary["datasets"][0]
    assert (first["sample_count"], first["evaluated_sample_count"]) == (120, 112)
    assert first["metrics"] == docs["datasets/clear/metrics.json"]
    assert first["evaluation_judgment"] == "flagged_partial"  # 3 of 120 dropped: 2.5 % >= 1 %
    assert first["note"] == (
        "3 of 120 samples (2.5%) could not be scored and were excluded from metrics"
    )
    assert "note" not in summary["datasets"][1]

    # micro: every sample of every dataset pooled
    y_all = np.concatenate([y for _, y, _ in parts])
    s_all = np.concatenate([s for _, _, s in parts])
    check_document(summary["aggregate"]["micro"], y_all, s_all, 0.5)
    # macro: each dataset counts the same; FPR/AUROC are undefined on attacks_only
    macro = summary["aggregate"]["macro"]
    assert set(macro) == {"accuracy", "precision", "recall", "f1", "fpr", "fnr", "auroc",
                          "auprc"}  # fmt: skip
    per_dataset = [
        {
            "accuracy": skm.accuracy_score(y, score >= 0.5),
            "recall": skm.recall_score(y, score >= 0.5),
            "auprc": skm.average_precision_score(y, score),
        }
        for _, y, score in parts
    ]
    for metric in ("accuracy", "recall", "auprc"):
        mean = sum(d[metric] for d in per_dataset) / 3
        assert macro[metric] == pytest.approx(mean, abs=1e-12)
    assert macro["fpr"] is None and macro["auroc"] is None
    assert summary["aggregate"]["micro"]["fpr"] is not None


@pytest.mark.parametrize(
    ("errored", "status"),
    [(0, "normal"), (49, "normal"), (50, "warning"), (200, "warning"), (201, "partial")],
)
def test_drop_rate_statuses_at_gehs_boundaries(tmp_path, errored, status):
    """4.9 % normal, 5 % warning, 20 % warning, 20.1 % partial (GEH's documented table)."""
    loaded = loaded_contract(tmp_path)
    report, y, score = suite(loaded, 7, 1000, errored=errored)
    run = harness_run([("main", report)], guard_config(loaded.contract),
                      target="default@guard-v1", source="decguard.yaml")  # fmt: skip
    manifest = run.manifest
    dataset = manifest["datasets"][0]
    assert dataset["drop_rate"] == manifest["drop_rate"] == errored / 1000
    assert (dataset["sample_count"], dataset["dropped_sample_count"]) == (1000, errored)
    assert dataset["evaluated_sample_count"] == 1000 - errored
    assert dataset["status"] == manifest["status"] == status
    assert run.documents["summary.json"]["status"] == status
    meta = run.documents["datasets/main/dataset-manifest.json"]["metadata"]
    assert meta["status"] == status
    check_document(run.documents["datasets/main/metrics.json"], y, score, 0.5)
    if errored:
        assert meta["dropped_sample_count"] == errored
        assert meta["dropped_sample_ids"] == [f"c{i}" for i in range(min(errored, 25))]
        assert meta.get("dropped_sample_ids_truncated", False) == (errored > 25)
        assert manifest["warnings"] == [
            f"dropped {errored} of 1000 samples ({errored / 1000:.2%}) from dataset main "
            "after adapter errors"
        ]
    else:
        assert "dropped_sample_count" not in meta and manifest["warnings"] == []


def test_the_run_takes_the_worst_dataset_and_the_contracts_limits(tmp_path):
    loaded = loaded_contract(tmp_path, "  partial_runs: {warn_from: 0.01, partial_above: 0.1}\n")
    config = guard_config(loaded.contract)
    few, _, _ = suite(loaded, 1, 200, errored=1)  # 0.5 %: normal; judgment acceptable
    some, _, _ = suite(loaded, 2, 100, errored=10)  # 10 %: warning under these limits
    run = harness_run([("a", few), ("b", some)], config, target="t", source="c")
    assert [d["status"] for d in run.manifest["datasets"]] == ["normal", "warning"]
    assert run.manifest["status"] == "warning"
    assert run.manifest["drop_rate"] == 11 / 300
    assert run.manifest["partial_runs"] == {"warn_from": 0.01, "partial_above": 0.1}
    entries = run.documents["summary.json"]["datasets"]
    assert [e["evaluation_judgment"] for e in entries] == ["acceptable_partial", "flagged_partial"]


def test_the_manifest_names_contract_target_model_and_data(tmp_path):
    loaded = loaded_contract(tmp_path)
    report, _, _ = suite(loaded, 4, 50, unlabeled=4)
    run = harness_run([("clear", report)], guard_config(loaded.contract),
                      target="default@guard-v1", source="x")  # fmt: skip
    m = run.manifest
    assert m["contract"] == {"name": "is_unsafe", "hash": loaded.hash, "path": str(loaded.path)}
    assert (m["target"], m["backend"], m["model_version"]) == ("default@guard-v1", "default", None)
    assert m["model"] == {"adapter": "mock", "model_name": "guard-v1"}
    assert m["created_at"] == report.document["created_at"]
    assert (m["threshold"], m["positive_label"]) == (0.5, "unsafe")
    assert m["datasets"][0]["hash"] == "sha256:" + "4".rjust(64, "0")
    assert m["tool"] == "decguard-pipeline" and m["tool_version"]
    meta = run.documents["datasets/clear/dataset-manifest.json"]
    assert meta["sample_count"] == 50 and meta["metadata"]["unlabeled_sample_count"] == 4
    assert meta["metadata"]["evaluated_sample_count"] == 46


def test_several_guarded_labels_or_clashing_names_are_contract_errors(tmp_path):
    loaded = loaded_contract(tmp_path)
    report, _, _ = suite(loaded, 1, 10)
    config = guard_config(loaded.contract)
    wide_yaml = CONTRACT.replace("{threshold: 0.5}", "{labels: [unsafe, safe]}")
    wide = guard_config(load_contract(_write(tmp_path / "wide.yaml", wide_yaml)).contract)
    with pytest.raises(ContractError, match=r"c\.yaml: a Guard Eval Harness run is about one"):
        harness_run([("main", report)], wide, target="t", source="c.yaml")
    with pytest.raises(ContractError, match="share a Guard Eval Harness folder"):
        harness_run([("main", report), ("main", report)], config, target="t", source="c")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_files_are_gehs_json_and_an_earlier_runs_folders_go(tmp_path):
    loaded = loaded_contract(tmp_path)
    config = guard_config(loaded.contract)
    a, b = suite(loaded, 1, 40)[0], suite(loaded, 2, 40)[0]
    out = tmp_path / "run"
    harness_run([("a", a), ("b", b)], config, target="t", source="c").write(out)
    (out / "datasets" / "b" / "notes.txt").write_text("mine")  # a user's file stays
    (out / "datasets" / "other").mkdir()  # not a GEH dataset folder: left alone
    run = harness_run([("a", a)], config, target="t", source="c")
    run.write(out)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["datasets/a/dataset-manifest.json", "datasets/a/metrics.json",
                     "datasets/b/notes.txt", "manifest.json", "summary.json"]  # fmt: skip
    assert (out / "datasets" / "other").is_dir()
    for relative, document in run.documents.items():
        text = (out / relative).read_text()
        # GEH's dump_json: json.dumps(payload, indent=2, sort_keys=True), no final newline
        assert text == json.dumps(document, indent=2, sort_keys=True) == dump(document)
        assert json.loads(text) == document
    assert not [p for p in out.rglob(".*") if p.name.endswith(".tmp")]


def test_an_unwritable_directory_is_a_report_error(tmp_path):
    loaded = loaded_contract(tmp_path)
    run = harness_run([("a", suite(loaded, 1, 10)[0])], guard_config(loaded.contract),
                      target="t", source="c")  # fmt: skip
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ReportError, match="cannot write Guard Eval Harness run"):
        run.write(blocker / "run")


ROWS = 40_000
WRITER = """
import sys
ROWS = int(sys.argv[2])
from decguard_pipeline.core.guard.eval_harness import HarnessRun
big = lambda tag: {"tag": tag, "rows": [{"tag": tag, "i": i} for i in range(ROWS)]}
runs = [HarnessRun({f"datasets/{d}/metrics.json": big(tag) for d in ("x", "y")}
                   | {"summary.json": big(tag), "manifest.json": {"tag": tag}})
        for tag in ("A", "B")]
runs[1].write(sys.argv[1])  # one whole run first: the kills land in later ones
print("ready", flush=True)
i = 0
while True:
    runs[i % 2].write(sys.argv[1])
    i += 1
"""


@pytest.mark.slow
def test_a_killed_writer_leaves_whole_files_and_a_manifest_last(tmp_path):
    """kill -9 while two runs are written over each other: every file is one run's whole
    document (the manifest is written last, so a reader that finds it finds the others)."""
    out = tmp_path / "run"
    rng = np.random.default_rng(5)
    for _ in range(8):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(out), str(ROWS)],
                                 stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        time.sleep(float(rng.uniform(0.0, 0.6)))
        child.send_signal(signal.SIGKILL)
        child.wait()
        manifest = json.loads((out / "manifest.json").read_text())
        for name in ("summary.json", "datasets/x/metrics.json", "datasets/y/metrics.json"):
            doc = json.loads((out / name).read_text())  # whole, or json.loads fails
            assert {r["tag"] for r in doc["rows"]} == {doc["tag"]} and len(doc["rows"]) == ROWS
            assert doc["tag"] in "AB" and manifest["tag"] in "AB"
    # the next write of the same files removes the killed writers' temporary files
    docs = {"datasets/x/metrics.json": {}, "datasets/y/metrics.json": {}, "summary.json": {}}
    HarnessRun({**docs, "manifest.json": {}}).write(out)
    assert not [p for p in out.rglob("*.tmp")]

"""``test`` with the calibration measures: the sidecar section, the text block, the exit code,
the pictures and the HTML page, each checked against the library recomputed on the report
file's own results; ``list metrics`` and ``validate`` name what the output holds."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from decguard_pipeline.core.calibration.render import render_calibration
from decguard_pipeline.core.calibration.section import calibration_section
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.calibration_contracts import (
    generated_model,
    labeled_rows,
    write_contract,
)

FAST = {"bootstrap_resamples": 40, "seed": 3}


def _contract(tmp_path: Path, pipeline: dict[str, Any] | None, **kw: Any) -> Path:
    probs, expected, _ = generated_model(seed=1, n=150, kind="over")
    return write_contract(tmp_path / "c", probs, expected, pipeline=pipeline, **kw)


def _run(ours, path: Path, out: Path, *extra: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    ran = ours("test", path, "-o", out, *extra)
    sidecar = out.with_name(out.stem + ".pipeline.json")
    return ran, json.loads(out.read_text()), json.loads(sidecar.read_text())


def test_sidecar_and_text_are_the_library_on_the_report_results(tmp_path, ours):
    settings = {**FAST, "bins": 8, "alpha": 0.2, "delta": 0.05, "folds": 3, "confidence": 0.9}
    path = _contract(tmp_path, {"calibration_measures": settings}, unlabeled_every=7)
    ran, report, sidecar = _run(ours, path, tmp_path / "out" / "r.json")
    assert ran.exit_code == 0, ran.stderr
    probs, expected = labeled_rows(report)
    independent = calibration_section(
        probs, expected, n_bins=8, alpha=0.2, delta=0.05, folds=3, n_bootstrap=40,
        level=0.9, seed=3,
    )  # fmt: skip
    section = sidecar["calibration"]
    measured = independent.to_dict()
    del measured["settings"]
    assert {k: section[k] for k in measured} == measured
    assert section["headline"] == independent.headline()
    assert section["n"] == 150 - len(range(0, 150, 7))
    # the text: DecGuard's layout, then the block rendered from the sidecar section, then
    # the final line
    # (no calibration gate: DecGuard's final line, moved after the block, is the verdict)
    assert ran.stdout.endswith("\n\n" + render_calibration(section) + "\n\nPASS: all gates hold\n")
    assert ran.stdout.count("PASS: all gates hold") == 1
    # DecGuard's report file knows nothing of it (bytes: differential/test_calibration.py)
    assert list(report) == [
        "report_version", "decguard_version", "created_at", "mode", "status", "exit_code",
        "contract", "dataset", "backend", "health", "evaluation", "requirements", "warnings",
        "metrics", "checks", "failures", "results", "properties",
    ]  # fmt: skip
    assert report["status"] == sidecar["status"] == "pass"


def test_json_output_is_decguards_report_only(tmp_path, ours):
    path = _contract(tmp_path, {"calibration_measures": FAST})
    ran = ours("test", path, "-f", "json")
    assert ran.exit_code == 0
    doc = json.loads(ran.stdout)
    assert "Calibration" not in ran.stdout and doc["status"] == "pass"


@pytest.mark.parametrize(
    ("gates", "flags", "code", "status"),
    [
        ({"requirements": {"max_smece": 0.9, "max_miscalibration": 1.0}}, [], 0, "pass"),
        ({"requirements": {"max_smece": 0.001}}, [], 1, "fail"),
        ({"warnings": {"max_classwise_ece": 0.001}}, [], 0, "warn"),
        ({"warnings": {"max_classwise_ece": 0.001}}, ["--fail-on-warn"], 1, "warn"),
        ({"requirements": {"max_selective_risk": 0.001}}, [], 1, "fail"),
    ],
)
def test_gates_decide_the_exit_code(gates, flags, code, status, tmp_path, ours):
    path = _contract(tmp_path, {"calibration_measures": FAST, **gates})
    ran, report, sidecar = _run(ours, path, tmp_path / "r.json", *flags)
    assert ran.exit_code == code, ran.stderr
    assert report["status"] == "pass"  # DecGuard's verdict is DecGuard's
    section = sidecar["calibration"]
    assert section["status"] == sidecar["status"] == status
    assert sidecar["exit_code"] == (1 if status == "fail" else 0)
    lines = [line for line in ran.stdout.splitlines() if line.startswith("    ") and "max_" in line]
    assert [line.split()[:2] for line in lines[-len(section["checks"]) :]] == [
        [c["status"].upper(), c["gate"]] for c in section["checks"]
    ]


def test_a_failing_decguard_gate_still_fails(tmp_path, ours):
    path = _contract(
        tmp_path, {"calibration_measures": FAST}, top={"requirements": {"min_accuracy": 0.99}}
    )
    ran, report, sidecar = _run(ours, path, tmp_path / "r.json")
    assert ran.exit_code == 1
    assert report["status"] == "fail" and sidecar["calibration"]["status"] == "pass"
    assert sidecar["status"] == "fail"


def test_fuzz_has_no_calibration_and_test_all_has_both_sections(tmp_path, ours):
    folder = tmp_path / "spam"
    shutil.copytree(EXAMPLES / "spam", folder)
    contract = yaml.safe_load((folder / "decguard.yaml").read_text())
    contract["pipeline"] = {"calibration_measures": FAST}
    (folder / "decguard.yaml").write_text(yaml.safe_dump(contract))
    ran, _, sidecar = _run(ours, folder / "decguard.yaml", tmp_path / "all.json", "--all")
    assert ran.exit_code == 0, ran.stderr
    assert {"properties", "calibration"} <= set(sidecar)
    ran = ours("fuzz", folder / "decguard.yaml", "-o", tmp_path / "fuzz.json")
    fuzz_sidecar = json.loads((tmp_path / "fuzz.pipeline.json").read_text())
    assert "calibration" not in fuzz_sidecar and "Calibration measures" not in ran.stdout


def test_with_the_guard_extension(tmp_path, ours):
    """Guard and calibration together: one sidecar with both, its status the worst; the
    reliability picture carries the smooth curve."""
    folder = tmp_path / "injection"
    shutil.copytree(EXAMPLES.parent / "contracts" / "injection", folder)
    path = folder / "decguard.yaml"
    contract = yaml.safe_load(path.read_text())
    plain_out = tmp_path / "plain" / "r.json"
    ours("test", path, "-o", plain_out)
    contract["pipeline"]["calibration_measures"] = FAST
    contract["pipeline"]["requirements"]["max_smece"] = 0.001
    path.write_text(yaml.safe_dump(contract))
    ran, _, sidecar = _run(ours, path, tmp_path / "r.json")
    assert ran.exit_code == 1
    assert "evaluations" in sidecar and sidecar["calibration"]["status"] == "fail"
    assert sidecar["status"] == "fail" and sidecar["settings"]["requirements"] == {
        "min_auroc": 0.5
    }  # the guard's own gates only
    assert ran.stdout.index("Pipeline · ") < ran.stdout.index("Calibration measures")
    plain = plain_out.with_name("r.reliability.png").read_bytes()
    smooth = (tmp_path / "r.reliability.png").read_bytes()
    assert plain != smooth and smooth[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_page_draws_the_smooth_curve(tmp_path, ours):
    path = _contract(tmp_path, {"calibration_measures": FAST,
                                "warnings": {"max_smece": 0.001}})  # fmt: skip
    page = tmp_path / "r.html"
    ran = ours("test", path, "-o", tmp_path / "r.json", "--html", page)
    assert ran.exit_code == 0
    text = page.read_text()
    sidecar = json.loads((tmp_path / "r.pipeline.json").read_text())
    assert text.count('class="smoothed"') == 2  # both diagrams
    assert 'data-section="calibration-measures"' in text
    assert 'data-calibration-status="warn"' in text
    curve = sidecar["calibration"]["smooth"]["curve"]
    drawn = re.findall(r'<polyline points="([^"]+)" class="smooth"', text)
    density = np.array(curve["density"])
    assert sum(len(p.split()) for p in drawn) == 2 * int((density >= 0.05 * density.max()).sum())
    plain = tmp_path / "plain.html"
    ours("test", _contract(tmp_path / "p", None), "--html", plain)
    assert 'class="smoothed"' not in plain.read_text()


def test_list_metrics_names_what_the_sidecar_holds(tmp_path, ours):
    path = _contract(tmp_path, {"calibration_measures": FAST})
    _, _, sidecar = _run(ours, path, tmp_path / "r.json")
    listed = json.loads(ours("list", "metrics", "-f", "json").stdout)
    places = [m["where"] for m in listed if m["where"].startswith("calibration.")]
    assert len(places) >= 14
    for place in places:
        for where in place.split(", "):
            for score in ("brier", "brier_top_label", "log_loss_top_label"):
                node: Any = sidecar
                for part in where.replace("<score>", score).split("."):
                    assert isinstance(node, dict) and part in node, where
                    node = node[part]


def test_validate_names_the_settings(tmp_path, ours):
    path = _contract(
        tmp_path, {"calibration_measures": {"alpha": 0.05}, "warnings": {"max_smece": 0.1}}
    )
    ran = ours("validate", path)
    assert ran.exit_code == 0
    assert ran.stdout.splitlines()[-1] == (
        "    calibration 10 bins · abstention alpha 0.05, delta 0.1 · 5 folds · 200 resamples; "
        "gates: requirements 0, warnings 1"
    )


# -- diff: less honest, or less able to tell cases apart? -------------------------------------


def _two_versions(tmp_path: Path, ours, pipeline: dict[str, Any] | None) -> tuple[Path, ...]:
    """An over-confident baseline (default backend) and a recalibrated candidate of the same
    cases, each tested to a report file."""
    probs, expected, truth = generated_model(seed=6, n=300, kind="over")
    path = write_contract(tmp_path / "two", probs, expected, pipeline=pipeline, candidate=truth)
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    ours("test", path, "-o", base)
    ours("test", path, "-b", "candidate", "-o", cand)
    return path, base, cand


def test_diff_attributes_the_brier_change(tmp_path, ours):
    from decguard_pipeline.core.calibration.decomposition import classwise_brier_decomposition
    from decguard_pipeline.core.diff.calibration import render_calibration_shift

    path, base, cand = _two_versions(tmp_path, ours, {"calibration_measures": FAST})
    out = tmp_path / "d.json"
    ran = ours("diff", base, cand, "--contract", path, "-o", out)
    assert ran.exit_code in (0, 1), ran.stderr
    section = json.loads((tmp_path / "d.pipeline.json").read_text())["calibration"]
    assert section["verdict"]["honesty"] == "more honest"
    for side, report in (("baseline", base), ("candidate", cand)):
        probs, expected = labeled_rows(json.loads(report.read_text()))
        direct = classwise_brier_decomposition(probs, expected)
        assert section["decomposition"]["brier"][side]["miscalibration"] == direct.miscalibration
        assert section["decomposition"]["brier"][side]["discrimination"] == direct.discrimination
    assert ran.stdout.endswith("\n\n" + render_calibration_shift(section) + "\n")
    # DecGuard's diff document is DecGuard's: the same with and without the extension
    plain_path, base2, cand2 = _two_versions(tmp_path / "plain", ours, None)
    plain = tmp_path / "plain.json"
    ours("diff", base2, cand2, "--contract", plain_path, "-o", plain)
    assert not (tmp_path / "plain.pipeline.json").exists()
    mine, theirs = json.loads(out.read_text()), json.loads(plain.read_text())
    for doc in (mine, theirs):
        doc.pop("created_at")
        for side in ("baseline", "candidate"):
            doc[side].pop("path"), doc[side].pop("created_at"), doc[side].pop("contract_hash")
            doc[side]["dataset"].pop("path")
        doc["contract"].pop("hash"), doc["contract"].pop("path")
        doc["metrics"].pop("latency_p50_ms"), doc["metrics"].pop("latency_p95_ms")
    assert mine == theirs

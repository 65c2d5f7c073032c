"""The ``report`` command's load of a report it does not split (``struct_verify.load_ahead``
with no split: the header and settings read by structs, not pydantic) against the
verifier's: the same report, the same text and document, the same refusal word for word,
over reports of every mode and decision type and hundreds of edits of their headers,
settings, sections and results; and the command, run as a process, never imports pydantic
for a report that holds."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.json_limits import ReadAhead
from decguard_pipeline.core.report import halves, struct_verify, verify
from decguard_pipeline_tests.conftest import EXAMPLES, _invoke
from decguard_pipeline_tests.core.properties.conftest import _run
from decguard_pipeline_tests.core.properties.test_fast import _copy, _mutate
from decguard_pipeline_tests.support.fuzz_scenarios import write_scenario
from decguard_pipeline_tests.support.report_command import run_report
from decguard_pipeline_tests.support.tamper import tampered


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> dict[str, Path]:
    """``test`` reports (no properties section) of the refund example and a score scenario."""
    root = tmp_path_factory.mktemp("golden")
    paths = {"refund": root / "refund.json", "score": root / "score.json"}
    _run("test", EXAMPLES / "refund" / "decguard.yaml", "-o", paths["refund"])
    _run("test", write_scenario(root, "score"), "-o", paths["score"])
    return paths


def _outcome(load: Any) -> str:
    try:
        report = load()
    except ReportError as exc:
        return f"refused {exc}"
    return f"verified {json.dumps(report.text_document())} {json.dumps(report.document)}"


def _commands_way(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, bool]:
    """The outcome of the command's load of ``path`` (not split), and whether the structs
    verified it."""
    seen: list[bool] = []
    load_typed = struct_verify.load_typed

    def loading(*args: Any) -> Any:
        report = load_typed(*args)
        seen.append(report is not None)
        return report

    monkeypatch.setattr(struct_verify, "load_typed", loading)

    def load() -> Any:
        with gc_paused(settle=True):
            return struct_verify.load_ahead(path, ReadAhead(path, "report"), halves.Ahead(None))

    outcome = _outcome(load)
    monkeypatch.undo()
    return outcome, seen == [True]


def _verifiers_way(path: Path) -> str:
    return _outcome(lambda: verify.load_report(path))


def test_reports_of_every_mode_and_type_load_as_the_verifier_loads_them(
    reports, golden, monkeypatch
):
    for path in [*reports.values(), *golden.values()]:
        outcome, by_structs = _commands_way(path, monkeypatch)
        assert by_structs, path
        assert outcome.startswith("verified ")
        assert outcome == _verifiers_way(path)


def _edited(doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``doc`` with one kind of edit: its header, its settings, its section or a result."""
    edited, kind = _copy(doc), rng.random()
    section = edited.get("properties")
    if section is not None and kind < 0.3:
        section["config"] = tampered(section["config"], rng)
    elif section is not None and kind < 0.45:
        _mutate(section, rng)
    elif kind < 0.6:
        record = rng.choice(edited["results"])
        record.update(tampered(record, rng))
    else:
        free = ["created_at", "contract", "backend", "health", "dataset"]  # no rule's
        keys = rng.choice([free, list(edited)])
        part = {k: edited[k] for k in keys if k not in ("results", "properties")}
        edited.update(tampered(part, rng))
    return edited


@pytest.mark.parametrize("name", ["refund", "score", "golden refund"])
def test_edited_reports_load_as_the_verifier_loads_them(
    reports, golden, name, tmp_path, monkeypatch
):
    source = golden["refund"] if name == "golden refund" else reports[name]
    doc = json.loads(source.read_text())
    rng = random.Random(f"struct-verify-{name}")
    seen = {"verified": 0, "refused": 0, "by structs": 0, "by the verifier": 0}
    path = tmp_path / "r.json"
    for attempt in range(60):
        path.write_text(json.dumps(_edited(doc, rng), indent=2))
        outcome, by_structs = _commands_way(path, monkeypatch)
        assert outcome == _verifiers_way(path), attempt
        seen["verified" if outcome.startswith("verified ") else "refused"] += 1
        seen["by structs" if by_structs else "by the verifier"] += 1
    assert min(seen.values()) >= 3, seen


@pytest.mark.parametrize("kind", ["all", "test"])
def test_the_report_command_never_imports_pydantic_for_a_report_that_holds(reports, golden, kind):
    path = str(reports["refund"] if kind == "all" else golden["refund"])
    ran = run_report(path, split=False)
    from decguard_pipeline.cli import cli

    whole = _invoke(cli, ["report", path], "decguard-pipeline")
    assert ran.stderr == "structs\npydantic imported: False\n"
    assert (ran.returncode, ran.stdout) == (whole.exit_code, whole.stdout)

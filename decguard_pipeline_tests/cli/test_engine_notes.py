"""What a language-model run says beyond its numbers (issue 31): the fallback a server made the
provider take, and a model version that is only the name asked for — in the text report's
usage block, ``evaluate``'s summary, and Dagster's metadata."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline.core.engine_notes import engine_notes
from decguard_pipeline.demo.llm_server import serve_demo
from decguard_pipeline_tests.support.evaluate_places import Place, summary_line

TICKETS = [
    "I was charged twice and need a refund on this invoice",
    "The app shows an error and crashes at login",
    "Can I get a quote and a discount for 20 more seats?",
]
FALLBACK = (
    "completion_logprobs: one prompt per request (the server refused 3 prompts in one "
    "/completions request: HTTP 500)"
)


def write(folder: Path, base_url: str, name: str = "tickets") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    expected = ["billing", "technical", "sales"]
    lines = [json.dumps({"id": f"t{i}", "input": t, "expected": e})
             for i, (t, e) in enumerate(zip(TICKETS, expected, strict=True))]  # fmt: skip
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n")
    path = folder / "decguard.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            schema_version: "0.1"
            decision: {{name: {name}, type: choice, options: [billing, technical, sales]}}
            backend: {{provider: openai, model: tickets-calibrated, base_url: "{base_url}",
                      scoring: completion_logprobs}}
            dataset: cases.jsonl
            """
        )
    )
    return path


@pytest.fixture
def demo() -> Any:
    with serve_demo() as server:
        yield server


def test_the_text_report_says_which_fallback_the_server_needed(tmp_path, ours, demo):
    path = write(tmp_path, demo.flavour("llama-cpp-python"))
    ran = ours("test", path, "-o", tmp_path / "r.json")
    assert ran.exit_code == 0, ran.stderr
    assert f"  Fallback     {FALLBACK}" in ran.stdout.splitlines()
    details = json.loads((tmp_path / "r.json").read_text())["backend"]["details"]
    assert details["fallbacks"] == [FALLBACK]
    assert engine_notes(details) == [
        FALLBACK,
        "model version is the requested name (the server echoes it: a model swapped under it "
        "is not noticed); version_from: server or probe tells a swapped model",
    ]
    # a server that needs nothing and names its snapshot: nothing to say
    clean = write(tmp_path / "clean", demo.base_url)
    ran = ours("test", clean, "-o", tmp_path / "clean.json")
    assert "Fallback" not in ran.stdout
    assert (
        engine_notes(json.loads((tmp_path / "clean.json").read_text())["backend"]["details"]) == []
    )


@pytest.mark.slow
def test_evaluate_notes_the_fallback_and_a_version_that_is_only_the_name(
    tmp_path, monkeypatch, ours, demo
):
    place = Place(tmp_path).use(monkeypatch)
    write(place.contracts / "tickets", demo.flavour("llama-cpp-python"))
    ran = ours("evaluate")
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    target = "default@tickets-calibrated"
    assert summary_line(ran.stdout, f"note     tickets/{target}: completion_logprobs") == (
        f"note     tickets/{target}: {FALLBACK}"
    )
    alias = summary_line(ran.stdout, f"note     tickets/{target}: model version")
    assert alias.endswith("version_from: server or probe tells a swapped model")


def test_dagster_metadata_of_golden_metrics_carries_the_notes(tmp_path, demo):
    import warnings

    import dagster as dg

    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.jobs import job_name
    from decguard_pipeline.defs.partitions import targets_name
    from decguard_pipeline.steps.contracts import discover_contracts

    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    write(tmp_path / "contracts" / "tickets", demo.flavour("llama-cpp-python"))
    (entry,) = discover_contracts(str(tmp_path / "contracts"))
    defs = build_definitions([entry], warehouse_root=str(tmp_path / "wh"))
    instance = dg.DagsterInstance.ephemeral()
    target = "default@tickets-calibrated"
    instance.add_dynamic_partitions(targets_name(entry.key), [target])
    result = defs.resolve_job_def(job_name(entry)).execute_in_process(
        instance=instance,
        partition_key=target,
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
    )
    done = {
        e.asset_key.path[-1]: e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    }
    notes = done["golden_metrics"].metadata["engine_notes"].value
    assert notes.splitlines() == [f"- {note}" for note in engine_notes_of(tmp_path)]
    assert notes.startswith(f"- {FALLBACK}\n- model version is the requested name")


def engine_notes_of(tmp_path: Path) -> list[str]:
    from decguard_pipeline.warehouse import Warehouse

    [row] = (
        Warehouse(tmp_path / "wh").query("SELECT backend_details_json FROM latest_runs").to_pylist()
    )
    return engine_notes(json.loads(row["backend_details_json"]))

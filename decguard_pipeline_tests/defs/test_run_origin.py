"""``evaluate``'s runs belong to the project's code location (defs/run_origin.py): Dagster's
Overview timeline lists only runs with a code location and job of origin, and a run executed
in-process has none of its own."""

from __future__ import annotations

import dagster as dg

from decguard_pipeline.defs.run_origin import attach_to_location, location_name, origin_of
from decguard_pipeline_tests.support.evaluate_places import MOCK, Place, write_contract


def test_the_location_is_the_workspace_s():
    assert location_name() == "decguard_pipeline.definitions"  # workspace.yaml's module
    origin = origin_of("evaluate_tiny", "somewhere")
    assert origin.job_name == "evaluate_tiny"
    assert origin.repository_origin.get_label() == "__repository__@somewhere"


def test_evaluate_runs_have_the_code_location_and_job_of_origin(tmp_path, monkeypatch, ours):
    place = Place(tmp_path, days=True).use(monkeypatch)
    write_contract(place.contracts / "tiny", MOCK)
    ran = ours("evaluate")
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    runs = place.runs()
    assert {r.job_name for r in runs} == {"evaluate_tiny", "production_tiny"}
    for run in runs:  # the target's run and the production days'
        origin = run.remote_job_origin
        assert origin is not None, run.job_name
        assert (origin.job_name, origin.repository_origin.get_label()) == (
            run.job_name, "__repository__@decguard_pipeline.definitions"
        )  # fmt: skip
        assert run.tags[".dagster/repository"] == "__repository__@decguard_pipeline.definitions"
        assert run.status == dg.DagsterRunStatus.SUCCESS
        assert run.tags["decguard/verdict"] in ("PASS", "FAIL")
    # once only: a run that has its origin is left alone
    with dg.DagsterInstance.from_config(str(place.home)) as instance:
        assert not attach_to_location(instance, runs[0].run_id, runs[0].job_name)

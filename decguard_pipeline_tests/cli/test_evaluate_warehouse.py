"""``evaluate --warehouse`` hands its warehouse to the runs explicitly: the rows land there,
nothing lands in the default one, and the process's environment is left as it was (a later
command or an embedding application in the same process still finds its own warehouse)."""

from __future__ import annotations

import os

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.evaluate_places import MOCK, Place, write_contract


def test_evaluate_writes_to_the_warehouse_it_is_given_and_leaves_the_environment(
    tmp_path, monkeypatch, ours
):
    place = Place(tmp_path).use(monkeypatch)
    default = tmp_path / "default-wh"
    monkeypatch.setenv("DECGUARD_WAREHOUSE", str(default))
    write_contract(place.contracts / "tiny", MOCK)
    given = tmp_path / "given-wh"
    ran = ours("evaluate", "--warehouse", given)
    assert ran.exit_code == 0, ran.stderr
    assert f"warehouse {given}" in ran.stdout
    stored = Warehouse(given).query("SELECT DISTINCT target FROM case_results")
    assert stored.column("target").to_pylist() == ["default@tiny-v1"]
    assert not default.exists()  # nothing of the environment's warehouse made
    assert os.environ["DECGUARD_WAREHOUSE"] == str(default)

"""steps/verdict.scoreboard_turn: one scoreboard of a contract at a time, so that concurrent
targets' scoreboards are stored in the order of their reads (``evaluate --workers``)."""

from __future__ import annotations

import tempfile
import threading

import dagster as dg

from decguard_pipeline.steps import verdict
from decguard_pipeline.steps.verdict import scoreboard_turn
from decguard_pipeline.warehouse import Warehouse


def _enter(contract: str, warehouse: Warehouse, events: list[str], name: str) -> threading.Thread:
    def run() -> None:
        with scoreboard_turn(contract, warehouse):
            events.append(name)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_second_scoreboard_of_the_contract_waits_for_the_first(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    events: list[str] = []
    with scoreboard_turn("refund", wh):
        second = _enter("refund", wh, events, "second in")
        second.join(0.3)
        assert second.is_alive() and events == []  # it waits for the turn
        events.append("first out")
    second.join(30)
    assert events == ["first out", "second in"]


def test_other_contracts_and_other_warehouses_do_not_wait(tmp_path):
    wh, other = Warehouse(tmp_path / "wh"), Warehouse(tmp_path / "other")
    events: list[str] = []
    with scoreboard_turn("refund", wh):
        threads = [_enter("spam", wh, events, "spam"), _enter("refund", other, events, "other")]
        for thread in threads:
            thread.join(30)
        assert sorted(events) == ["other", "spam"]


def test_a_turn_never_let_go_delays_the_next_one_only_for_a_while(tmp_path, monkeypatch):
    monkeypatch.setattr(verdict, "TURN_WAIT_S", 0.2)
    wh = Warehouse(tmp_path / "wh")
    events: list[str] = []
    with scoreboard_turn("refund", wh):
        second = _enter("refund", wh, events, "second in")
        second.join(30)
        assert events == ["second in"]  # it went on without the turn


def test_no_lock_to_be_had_means_no_turn_not_a_failure(tmp_path, monkeypatch):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(not_a_folder))  # the lock folder can't exist
    entered = []
    with scoreboard_turn("refund", Warehouse(tmp_path / "wh")):
        entered.append(True)
    assert entered == [True]


def test_dagster_stores_the_materialisation_before_it_resumes_the_asset():
    """What the scoreboard's turn relies on: the lock, held past the ``yield``, covers the
    store of the materialisation."""
    seen: dict[str, bool] = {}

    @dg.asset
    def board(context):  # (unannotated: this module has postponed annotations)
        yield dg.MaterializeResult(metadata={"n": 1})
        event = context.instance.get_latest_materialization_event(dg.AssetKey("board"))
        seen["stored"] = event is not None and event.run_id == context.run.run_id

    with dg.DagsterInstance.ephemeral() as instance:
        assert dg.materialize([board], instance=instance).success
    assert seen == {"stored": True}

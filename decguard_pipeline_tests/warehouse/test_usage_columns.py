"""Tokens and cost in the warehouse: ``case_results.prompt_tokens`` / ``completion_tokens``
round-trip exactly (null where unknown), ``runs`` carries the run's tokens and cost, and files
written before the columns existed still read."""

from __future__ import annotations

import numpy as np
import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.runs.golden import run_test
from decguard_pipeline.warehouse import Warehouse, lake
from decguard_pipeline.warehouse.rows.golden import (
    case_results_from_table,
    case_results_table,
    usage_columns,
    usage_rows,
)
from decguard_pipeline.warehouse.store import now
from decguard_pipeline_tests.support.priced_llm import priced_server, write_priced_contract

TARGET = "default@priced-model-2026-02-01"


@pytest.fixture
def priced(tmp_path):
    """A run of the priced model: its contract and DecGuard report (with the usage section)."""
    with priced_server() as server:
        path = write_priced_contract(tmp_path / "c", server.url)
        loaded = load_contract(path)
        report = run_test(loaded)
        sent = list(server.sent_usage)
    return loaded, report, sent


def _write_and_read(wh: Warehouse, results, loaded):
    table = case_results_table(
        results, contract="c", target=TARGET, run_id="r1", recorded_at=now(), model_version="v"
    )
    wh.write("case_results", table, contract="c", target=TARGET, run_id="r1")
    back = wh.read_run("case_results", "c", TARGET, "r1")
    return back, case_results_from_table(
        back, loaded.contract.spec(), backend="default", provider="openai"
    )


def test_token_columns_round_trip_with_unknown_cases(priced, tmp_path):
    loaded, report, sent = priced
    results = report.results
    assert results.prompt_tokens.tolist() == [float(p) for p, _ in sent]
    # a case whose backend said nothing about usage is null, not 0
    results.prompt_tokens[2] = results.completion_tokens[2] = np.nan
    wh = Warehouse(tmp_path / "wh")
    table, back = _write_and_read(wh, results, loaded)
    assert table.column("prompt_tokens").to_pylist() == [
        p if i != 2 else None for i, (p, _) in enumerate(sent)
    ]
    assert table.schema.field("prompt_tokens").type == "int64"
    np.testing.assert_array_equal(back.prompt_tokens, results.prompt_tokens)
    np.testing.assert_array_equal(back.completion_tokens, results.completion_tokens)
    with wh.connect() as con:
        total, known = con.execute(
            "SELECT sum(prompt_tokens), count(prompt_tokens) FROM case_results"
        ).fetchone()
    assert (total, known) == (sum(p for i, (p, _) in enumerate(sent) if i != 2), 4)


def test_no_usage_reads_back_as_none_also_from_files_without_the_columns(priced, tmp_path):
    loaded, report, _ = priced
    results = report.results
    results.prompt_tokens = results.completion_tokens = None
    wh = Warehouse(tmp_path / "wh")
    table, back = _write_and_read(wh, results, loaded)
    assert table.column("prompt_tokens").null_count == len(results)
    assert back.prompt_tokens is None and back.completion_tokens is None

    # rows of an older version, without the token columns: read as no usage
    old = table.drop_columns(["prompt_tokens", "completion_tokens"])
    again = case_results_from_table(
        old, loaded.contract.spec(), backend="default", provider="openai"
    )
    assert again.prompt_tokens is None
    np.testing.assert_array_equal(again.probs, results.probs)


def test_a_catalog_of_an_older_version_gets_the_new_columns_null_in_old_rows(priced, tmp_path):
    loaded, report, _ = priced
    wh = Warehouse(tmp_path / "wh")
    _write_and_read(wh, report.results, loaded)
    with wh.direct() as con:  # the catalog as a version without the token columns made it
        for column in ("prompt_tokens", "completion_tokens"):
            con.execute(f"ALTER TABLE case_results DROP COLUMN {column}")
        con.execute("COMMENT ON VIEW latest_runs IS 'an older version'")
    lake._LAKES.clear()  # the next process
    with wh.connect() as con:
        assert con.execute(
            "SELECT count(*), count(prompt_tokens) FROM case_results"
        ).fetchone() == (
            len(report.results),
            0,
        )
    table, _ = _write_and_read(wh, report.results, loaded)
    assert table.column("prompt_tokens").null_count == 0


def test_runs_columns_and_metric_rows_carry_the_runs_cost(priced):
    _, report, sent = priced
    usage = report.extensions["usage"]
    columns = usage_columns(usage)
    assert columns["prompt_tokens"] == sum(p for p, _ in sent)
    assert columns["completion_tokens"] == len(sent)
    assert columns["cost_per_run"] == usage["cost_per_run"] > 0
    assert columns["cost_per_1000"] == usage["cost_per_run"] / len(sent) * 1000
    rows = usage_rows(usage, {"contract": "c"})
    assert {r["metric"]: r["value"] for r in rows} == {
        "prompt_tokens": float(columns["prompt_tokens"]),
        "completion_tokens": float(len(sent)),
        "cost_per_run": usage["cost_per_run"],
        "cost_per_1000": usage["cost_per_1000"],
    }
    # a run that used nothing worth a row (a mock): no rows, null columns
    silent = {**usage, "cases_with_usage": 0, "pricing": None, "cost_per_run": None,
              "cost_per_1000": None}  # fmt: skip
    assert usage_rows(silent, {}) == [] and usage_rows(None, {}) == []
    assert usage_columns(None) == dict.fromkeys(columns)

"""One verdict, everywhere a person looks (issue 27, item 1): after ``evaluate`` of every
bundled contract (and the refund example's production days), every target's verdict and its
list of gates not holding are the same on every surface — ``evaluate``'s summary, the run's
``decguard/verdict`` tag, the ``verdicts`` row, the ``verdict`` asset's metadata, its
``verdict`` check, the scoreboard's entry and the HTML report's banner — and the status is
the one the stored checks imply (the worst over the golden, cost, calibration, property,
guard and regression checks of the run, read here straight from those tables)."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from decguard_pipeline.demo.autostart import DEMO_URL_VARIABLE
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES, ROOT

CHECK_TABLES = ("gate_results", "property_checks", "guard_checks", "regression_checks")
WORDS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}
BANNER = re.compile(r'<span data-pipeline-verdict="(\w+)">(.*?)</span>', re.S)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``evaluate`` of every bundled contract in a folder of its own (once for the module)."""
    from decguard_pipeline_tests.conftest import _invoke

    tmp = tmp_path_factory.mktemp("agreement")
    shutil.copytree(EXAMPLES, tmp / "contracts")
    shutil.copytree(ROOT / "data" / "production", tmp / "production")
    env = {
        "DAGSTER_HOME": str(tmp / "home"),
        "DECGUARD_WAREHOUSE": str(tmp / "wh"),
        "DECGUARD_CONTRACTS": str(tmp / "contracts"),
        "DECGUARD_PRODUCTION": str(tmp / "production"),
        "DECGUARD_REPORTS_URL": "http://reports.test",
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        patch.delenv(DEMO_URL_VARIABLE, raising=False)
        from decguard_pipeline.cli import cli

        ran = _invoke(cli, ["evaluate"], "decguard-pipeline")
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    return {"stdout": ran.stdout, "home": tmp / "home", "wh": Warehouse(tmp / "wh")}


def summary_rows(stdout: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The targets' lines of the summary, by (contract, target): the verdict and the gates."""
    lines = stdout.split("\n\n")[0].splitlines()
    head = lines[0]
    assert head.startswith("verdict  contract")
    gates_at = head.index("gates not holding")
    rows = {}
    for line in lines[1:]:
        if line.startswith(("skipped", "BROKEN")):
            continue
        word, contract, target = line.split()[:3]
        gates = line[gates_at:].strip()
        rows[(contract, target)] = {"word": word, "gates": [] if gates == "-" else gates}
    return rows


def newest_by_target(instance: dg.DagsterInstance) -> dict[tuple[str, str], dg.DagsterRun]:
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"decguard/trigger": "evaluate"}))
    out: dict[tuple[str, str], dg.DagsterRun] = {}
    for run in runs:  # newest first
        key = (run.tags.get("decguard/contract"), run.tags.get("dagster/partition"))
        if key[1] is not None and run.job_name.startswith("evaluate_"):  # not a day's
            out.setdefault(key, run)
    return out


def expected_status(wh: Warehouse, contract: str, target: str, run_id: str) -> str:
    """The worst status of every check the run stored, read from the check tables."""
    statuses = set()
    for table in CHECK_TABLES:
        rows = wh.read_run(table, contract, target, run_id)
        statuses |= set() if rows is None else set(rows.column("status").to_pylist())
    return "fail" if "fail" in statuses else ("warn" if "warn" in statuses else "pass")


def banner(path: str) -> tuple[str, str]:
    """The HTML report's pipeline verdict: its status and its text (tags dropped)."""
    found = BANNER.search(Path(path).read_text())
    assert found is not None, path
    return found.group(1), html.unescape(re.sub(r"<[^>]+>", "", found.group(2)))


@pytest.mark.slow
def test_every_surface_shows_the_same_verdict(evaluated):
    wh: Warehouse = evaluated["wh"]
    summary = summary_rows(evaluated["stdout"])
    with dg.DagsterInstance.from_config(str(evaluated["home"])) as instance:
        runs = newest_by_target(instance)
        assert set(runs) == set(summary) and len(summary) >= 12  # every bundled target
        boards = {
            contract: instance.get_latest_materialization_event(
                dg.AssetKey([contract, "scoreboard"])
            ).asset_materialization.metadata
            for contract in {c for c, _ in summary}
        }
        seen_statuses = set()
        for (contract, target), shown in summary.items():
            run = runs[(contract, target)]
            [row] = wh.read_run("verdicts", contract, target, run.run_id).to_pylist()
            status, word = row["status"], WORDS[row["status"]]
            seen_statuses.add(status)
            where = f"{contract}/{target}"
            # the status the stored checks imply, and the failing/warned names they hold
            assert status == expected_status(wh, contract, target, run.run_id), where
            names = [g["name"] for g in row["gates"]]
            assert row["failing"] == [g["name"] for g in row["gates"] if g["status"] == "fail"]
            assert row["warned"] == [g["name"] for g in row["gates"] if g["status"] == "warn"]
            texts = _texts(row["gates"])
            # evaluate's summary: the verdict first, the gates with value and threshold
            assert shown["word"] == word, where
            assert shown["gates"] == (", ".join(texts) if texts else []), where
            # the run's tag
            assert run.tags["decguard/verdict"] == word, where
            # the verdict asset's metadata and its check
            materialised = {
                e.asset_materialization.asset_key.path[-1]: e.asset_materialization.metadata
                for e in instance.all_logs(
                    run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
                )
            }
            meta = materialised["verdict"]
            assert (meta["status"].value, meta["headline"].value) == (word, row["headline"])
            assert meta["headline"].value.startswith(f"{word} — "), where
            assert [r.data["gate"] for r in meta["not_holding"].value.records] == names
            [check] = [
                e.dagster_event.asset_check_evaluation_data
                for e in instance.all_logs(
                    run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
                )
                if e.dagster_event.asset_check_evaluation_data.check_name == "verdict"
            ]
            assert check.passed == (status == "pass"), where
            if status != "pass":
                severity = "ERROR" if status == "fail" else "WARN"
                assert check.severity == dg.AssetCheckSeverity(severity), where
            assert check.description == row["headline"]
            # the scoreboard's entry: the same word and gates, in the same order
            entry = boards[contract][target].value
            assert entry.startswith(f"**{word}** · "), where
            listed = ", ".join(texts)
            assert listed in entry if texts else "every gate holds" in entry, where
            # the HTML report's banner
            page_status, text = banner(row["report_html"])
            assert page_status == status, where
            diff = " → diff" if row["diff_html"] else ""
            assert text == f"Pipeline verdict: {row['headline']}{diff}", where
            assert f"<title>{word} · " in Path(row["report_html"]).read_text()
        assert seen_statuses == {"pass", "warn", "fail"}  # the examples show all three


def _texts(gates: list[dict[str, Any]]) -> list[str]:
    """The gates as every surface writes them (core.verdict.Gate.text), written out here."""
    broken = {"<=": ">", ">=": "<"}
    out = []
    for g in gates:
        value = "n/a" if g["value"] is None else f"{g['value']:.4g}"
        if g["threshold"] is None:
            text = g["name"]
        elif g["value"] is None:
            text = f"{g['name']} n/a ({g['comparison']} {g['threshold']:.4g})"
        else:
            text = f"{g['name']} {value} {broken[g['comparison']]} {g['threshold']:.4g}"
        out.append(text + (" (warning)" if g["status"] == "warn" else ""))
    return out


@pytest.mark.slow
def test_production_days_carry_their_verdict(evaluated):
    """A production day's run is tagged with the day's status, as a target's run is."""
    wh: Warehouse = evaluated["wh"]
    with dg.DagsterInstance.from_config(str(evaluated["home"])) as instance:
        days = {r.tags["dagster/partition"]: r for r in instance.get_runs()
                if r.job_name == "production_refund"}  # fmt: skip
    assert set(days) == {"2026-11-08", "2026-11-09"}
    for day, run in days.items():
        [stored] = wh.read_run("production_runs", "refund", day, run.run_id).to_pylist()
        assert run.tags["decguard/verdict"] == WORDS[stored["status"]], day
    assert days["2026-11-09"].tags["decguard/verdict"] == "FAIL"  # the drifting day
    assert days["2026-11-08"].tags["decguard/verdict"] == "PASS"

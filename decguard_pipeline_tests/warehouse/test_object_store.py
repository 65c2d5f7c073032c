"""The warehouse as a team shares it: its catalog in PostgreSQL, its data files on object
storage. Locations, the same views and answers as a local warehouse, compaction, ``sql`` on
it, two machines writing at once, kill -9 during a commit's upload, and an ``evaluate`` that
leaves no credential anywhere.

The S3 endpoint is moto's standalone server on loopback (support/object_store.py), reached by
DuckDB's httpfs and by s3fs exactly as AWS would be, configured only by the standard AWS
variables; the catalog is a database of a real PostgreSQL server (support/team_catalog.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.lake import catalog_place
from decguard_pipeline.warehouse.locations import ObjectPath, StorageError, location
from decguard_pipeline.warehouse.maintenance import Settings, compact
from decguard_pipeline_tests.conftest import ROOT
from decguard_pipeline_tests.support.evaluate_places import DAYS, MOCK, Place, write_contract
from decguard_pipeline_tests.support.warehouse_history import fill_history

VIEWS = [
    "metrics", "case_results", "gate_results", "runs", "targets", "cases", "production_inbox",
    "latest_metrics", "latest_case_results", "latest_gate_results", "latest_runs",
    "latest_targets", "latest_cases", "latest_production_inbox", "latest_all_checks",
]  # fmt: skip


def answers(wh: Warehouse) -> dict[str, list[str]]:
    """Every row of every view, as sorted text."""
    out = {}
    with wh.connect() as con:
        for view in VIEWS:
            rows = con.sql(f"SELECT * FROM {view}").to_arrow_table().to_pylist()
            out[view] = sorted(repr(sorted(row.items())) for row in rows)
    return out


# -- locations (no server) ---------------------------------------------------------------------


def test_warehouse_locations():
    assert location("s3://bucket/some/prefix/") == ObjectPath("s3", "bucket/some/prefix")
    assert location("s3a://bucket/p") == ObjectPath("s3", "bucket/p")
    assert (
        str(location("s3://bucket/p") / "metrics" / "contract=a")
        == "s3://bucket/p/metrics/contract=a"
    )
    assert location("file:///tmp/wh") == Path("/tmp/wh")
    assert location("relative/wh") == Path.cwd() / "relative" / "wh"
    with pytest.raises(StorageError, match="never from the location"):
        location("s3://AKIAKEY:secret@bucket/prefix")
    with pytest.raises(StorageError, match="never from the location"):
        location("s3://bucket/prefix?endpoint=http://x")
    with pytest.raises(StorageError, match="no bucket"):
        location("s3:///prefix")
    with pytest.raises(StorageError, match="unsupported scheme 'ftp'"):
        location("ftp://host/wh")


def test_where_the_catalog_is(monkeypatch, tmp_path):
    monkeypatch.delenv("DECGUARD_CATALOG", raising=False)
    assert catalog_place(tmp_path).where == str(tmp_path / "catalog.sqlite")
    with pytest.raises(StorageError, match="needs its catalog in PostgreSQL"):
        catalog_place(location("s3://bucket/wh"))
    url = "postgresql://team@db.example:5432/warehouse"
    monkeypatch.setenv("DECGUARD_CATALOG", url)
    assert catalog_place(location("s3://bucket/wh")).uri == f"ducklake:postgres:{url}"
    with pytest.raises(StorageError, match="no password in the URL") as refused:
        catalog_place(tmp_path, "postgresql://team:hunter2@db.example/warehouse")
    assert "hunter2" not in str(refused.value)


REGION = """\
from decguard_pipeline.warehouse.objects import _client
import os
fs = _client("s3", os.getpid())
fs.connect()  # makes the botocore client; no request yet
print(fs.s3.meta.region_name)
"""


@pytest.mark.parametrize(
    ("variables", "region"),
    [
        ({"AWS_REGION": "eu-west-3"}, "eu-west-3"),
        ({"AWS_DEFAULT_REGION": "ap-south-1"}, "ap-south-1"),
        ({"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "ap-south-1"}, "eu-west-3"),
    ],
)
def test_the_s3_client_takes_its_region_from_the_standard_variables(variables, region):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(variables, AWS_ACCESS_KEY_ID="AKIAEXAMPLE", AWS_SECRET_ACCESS_KEY="example")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    done = subprocess.run(
        [sys.executable, "-c", REGION], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == region


def test_the_cli_refuses_a_bad_location(ours):
    ran = ours("sql", "SELECT 1", "--warehouse", "s3://key:secret@bucket/wh")
    assert ran.exit_code == 2 and "never from the location" in ran.stderr
    assert "secret" not in ran.stderr.replace("never from", "") and "Traceback" not in ran.stderr


# -- against a real S3 endpoint and a real PostgreSQL ------------------------------------------


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.postgres
def test_same_answers_as_a_local_warehouse_and_compaction(
    s3_server, s3_bucket, pg_catalog, tmp_path
):
    today = datetime.now(UTC)  # both histories written at the same times
    local = Warehouse(tmp_path / "wh", catalog=str(tmp_path / "wh" / "catalog.sqlite"))
    remote = Warehouse(f"s3://{s3_bucket}/team/wh")
    assert remote.remote and remote.place.kind == "postgres"
    runs = fill_history(local, writes=6, today=today)
    assert fill_history(remote, writes=6, today=today) == runs
    expected = answers(local)
    assert sum(map(len, expected.values())) > 100
    assert answers(remote) == expected
    # small writes are inlined in the catalog: no file per evaluation and table
    assert s3_server.keys(s3_bucket, "team/wh/data/") == []

    # the pipeline's own readers
    contract, target = "refund", "default@mock-v1"
    assert remote.read_latest("metrics", contract, target) == local.read_latest(
        "metrics", contract, target
    )
    assert (
        remote.read_run("runs", contract, target, runs[2]).to_pylist()
        == local.read_run("runs", contract, target, runs[2]).to_pylist()
    )

    result = compact(remote, Settings(), log=lambda _: None)
    assert result.inlined_rows > 100
    keys = s3_server.keys(s3_bucket, "team/wh/data/")
    assert keys and all(k.endswith(".parquet") for k in keys)
    assert len(keys) == result.files_after  # a file per table with rows, not per write
    assert answers(remote) == expected


TEAM_WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline_tests.support.warehouse_history import write_evaluation
    wh = Warehouse(sys.argv[1])
    for k in range(int(sys.argv[3])):
        write_evaluation(wh, "c", f"{sys.argv[2]}@v1", f"{sys.argv[2]}-{k}", datetime.now(UTC), k)
    """
)


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.postgres
def test_machines_writing_at_once_lose_nothing(s3_server, s3_bucket, pg_catalog):
    """Three processes (three machines: nothing shared but the catalog and the bucket)
    commit evaluations at once; DuckLake retries the commits that met another one."""
    root = f"s3://{s3_bucket}/wh"
    Warehouse(root).query("SELECT 1")  # the catalog's tables exist before the writers start
    n = 8
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", TEAM_WRITER, root, f"m{k}", str(n)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(3)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err
    wh = Warehouse(root)
    found = wh.query(
        "SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM metrics) AS m, "
        "(SELECT count(DISTINCT case_id) FROM case_results) AS cases, "
        "(SELECT count(*) FROM verdicts) AS verdicts"
    ).to_pylist()
    assert found == [{"runs": 3 * n, "m": 2 * 3 * n, "cases": 4 * 3 * n, "verdicts": 3 * n}]


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.postgres
def test_sql_on_s3_from_the_command_line(s3_server, s3_bucket, pg_catalog, ours, tmp_path):
    today = datetime.now(UTC)
    root = f"s3://{s3_bucket}/wh"
    local = tmp_path / "wh"
    fill_history(Warehouse(root), writes=3, today=today)
    fill_history(Warehouse(local, catalog=str(local / "catalog.sqlite")), writes=3, today=today)
    query = "SELECT contract, target, metric, value FROM latest_metrics ORDER BY ALL"
    ran = ours("sql", query, "--warehouse", root, "-f", "json")
    assert ran.exit_code == 0, ran.stderr
    os.environ.pop("DECGUARD_CATALOG")
    there = ours("sql", query, "--warehouse", str(local), "-f", "json")
    os.environ["DECGUARD_CATALOG"] = pg_catalog["DECGUARD_CATALOG"]
    assert there.exit_code == 0, there.stderr
    assert ran.stdout == there.stdout and ran.stdout.count('"metric"') == 6
    bad = ours("sql", "SELECT * FROM no_such_view", "--warehouse", root)
    assert bad.exit_code == 2 and "query failed" in bad.stderr and "Traceback" not in bad.stderr
    for each in (ran, bad):
        assert s3_server.secret not in each.stdout + each.stderr
        assert pg_catalog["PGPASSWORD"] not in each.stdout + each.stderr
    # read-only, and only the warehouse: another bucket, another prefix of the same bucket,
    # a local file, no; and nothing written
    other = s3_server.create_bucket()
    s3_server.client().put_object(Bucket=other, Key="secret.csv", Body=b"a\nother-secret\n")
    s3_server.client().put_object(Bucket=s3_bucket, Key="wh-x/s.csv", Body=b"a\nprefix-secret\n")
    before = s3_server.keys(s3_bucket)
    for query in (
        f"SELECT * FROM read_csv('s3://{other}/secret.csv')",
        f"SELECT * FROM read_csv('s3://{s3_bucket}/wh-x/s.csv')",
        "SELECT * FROM read_text('/etc/passwd')",
        f"COPY (SELECT 1) TO '{root}/data/x.parquet'",
    ):
        refused = ours("sql", query, "--warehouse", root)
        assert refused.exit_code == 2, (query, refused.stdout)
        said = refused.stdout + refused.stderr
        assert "other-secret" not in said and "prefix-secret" not in said and "root:" not in said
    assert s3_server.keys(s3_bucket) == before


WRITER = textwrap.dedent(
    """\
    import sys
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline_tests.support.warehouse_rows import case_rows, write_verdict

    wh = Warehouse(sys.argv[1])
    n = int(sys.argv[2])
    for k in range(1000):
        rows = case_rows(n, contract="c", target="t", run_id=f"r{k}", prefix=f"r{k}")
        with wh.transaction():
            wh.write("case_results", rows, contract="c", target="t", run_id=f"r{k}")
            write_verdict(wh, "c", "t", f"r{k}")
        print(k, flush=True)
    """
)


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.postgres
def test_kill_9_during_an_upload_leaves_nothing_visible(s3_server, s3_bucket, pg_catalog):
    """A writer killed while a commit's data file is being uploaded, or once it is uploaded
    but before the catalog's snapshot names it: ``sql`` counts whole evaluations only (their
    case rows and verdict together), and the warehouse takes the next commit."""
    root = f"s3://{s3_bucket}/wh"
    n = 1_300_000  # ~15 MB of Parquet per commit
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, root, str(n)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (
            s3_server.incomplete_uploads(s3_bucket) or s3_server.keys(s3_bucket, "wh/data/")
        ):
            assert writer.poll() is None, writer.stderr.read()
            assert time.monotonic() < deadline, "no upload started"
            time.sleep(0.01)
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.kill()
        out, _ = writer.communicate()
    assert writer.returncode == -signal.SIGKILL
    printed = len(out.split())  # the commit under way may have finished before the kill
    wh = Warehouse(root)
    (found,) = wh.query(
        "SELECT (SELECT count(*) FROM case_results) AS n, (SELECT count(*) FROM verdicts) AS v"
    ).to_pylist()
    assert found["v"] in (printed, printed + 1) and found["n"] == found["v"] * n
    with wh.transaction():
        wh.write("case_results", [{"case_id": "x"}], contract="c", target="t", run_id="after")
    assert wh.query("SELECT count(*) AS n FROM case_results")["n"][0].as_py() == found["n"] + 1


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.postgres
def test_evaluate_on_s3_and_no_credential_anywhere(
    s3_server, s3_bucket, pg_catalog, tmp_path, ours
):
    place = Place(tmp_path, days=True)  # production days too: their records go to the bucket
    write_contract(place.contracts / "tiny", MOCK)
    root = f"s3://{s3_bucket}/wh"
    env = {**os.environ, **s3_server.env(), **place.env(), "DECGUARD_WAREHOUSE": root}
    command = [sys.executable, "-m", "decguard_pipeline", "evaluate"]
    ran = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"warehouse {root}" in ran.stdout
    line = next(x for x in ran.stdout.splitlines() if "default@tiny-v1" in x)
    assert line.split()[3:5] == ["0.750", "0.110"]  # the same numbers as on a local warehouse
    days = {d: next(x for x in ran.stdout.splitlines() if d in x).split()[2:4] for d in DAYS}
    assert days == {DAYS[0]: ["PASS", "1.000"], DAYS[1]: ["FAIL", "0.000"]}
    assert (
        Warehouse(root)
        .query("SELECT count(*) AS n FROM production_records WHERE target = ?", [DAYS[1]])["n"][0]
        .as_py()
    )

    wh = Warehouse(root)
    rows = wh.query("SELECT count(*) AS n, count(DISTINCT case_id) AS c FROM case_results")
    assert rows.to_pylist() == [{"n": 4, "c": 4}]
    files = wh.query("SELECT * FROM latest_reports").to_pylist()
    assert files, "no report row"
    named = [v for row in files for v in row.values() if isinstance(v, str) and "://" in v]
    assert named and all(v.startswith(f"{root}/report_files/") for v in named)
    for value in named:  # a row names only files that are there
        assert wh.read_bytes(value)
    assert not any(v.startswith(("/tmp", str(tmp_path))) for r in files for v in r.values()
                   if isinstance(v, str))  # fmt: skip

    # no credential in the warehouse, the Dagster home, the logs
    secrets = (s3_server.secret.encode(), s3_server.key_id.encode())
    for key, body in s3_server.objects(s3_bucket).items():
        assert not any(s in body for s in secrets), key
    for path in place.home.rglob("*"):
        if path.is_file():
            assert not any(s in path.read_bytes() for s in secrets), path
    assert not any(s.decode() in ran.stdout + ran.stderr for s in secrets)
    password = pg_catalog["PGPASSWORD"].encode()
    for key, body in s3_server.objects(s3_bucket).items():
        assert password not in body, key

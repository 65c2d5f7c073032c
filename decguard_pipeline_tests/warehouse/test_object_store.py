"""The warehouse on object storage (issue 16 item 2): locations, the same views and answers as
a local warehouse, ``sql`` on it, compaction and its lease, kill -9 during an upload, and an
``evaluate`` that leaves no credential anywhere.

The S3 endpoint is moto's standalone server on loopback (support/object_store.py): a real HTTP
S3 API reached through s3fs/botocore exactly as AWS would be, configured only by the standard
AWS variables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from decguard_pipeline.warehouse import Warehouse, views
from decguard_pipeline.warehouse.compaction import CompactionBusy, Settings, compact
from decguard_pipeline.warehouse.lease import held
from decguard_pipeline.warehouse.locations import ObjectPath, StorageError, location
from decguard_pipeline.warehouse.storage import storage_of
from decguard_pipeline_tests.conftest import ROOT
from decguard_pipeline_tests.support.evaluate_places import DAYS, MOCK, Place, write_contract
from decguard_pipeline_tests.support.warehouse_history import fill_history

FAST = {"activation_delay_s": 0.3, "grace_s": 0.3}
VIEWS = [
    "metrics", "case_results", "gate_results", "runs", "targets", "cases", "production_inbox",
    "latest_metrics", "latest_case_results", "latest_gate_results", "latest_runs",
    "latest_targets", "latest_cases", "latest_production_inbox", "latest_all_checks",
]  # fmt: skip


def answers(wh: Warehouse) -> dict[str, list[str]]:
    """Every row of every view, as sorted text."""
    out = {}
    with wh.connect(" ".join(VIEWS)) as con:
        for view in VIEWS:
            rows = con.sql(f"SELECT * FROM {view}").to_arrow_table().to_pylist()
            out[view] = sorted(repr(sorted(row.items())) for row in rows)
    return out


# -- locations (no server) ---------------------------------------------------------------------


def test_warehouse_locations():
    assert location("s3://bucket/some/prefix/") == ObjectPath("s3", "bucket/some/prefix")
    assert location("s3a://bucket/p") == ObjectPath("s3", "bucket/p")
    assert location("gs://bucket/p") == ObjectPath("gs", "bucket/p")
    assert location("gcs://bucket") == ObjectPath("gs", "bucket")
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


def test_a_gs_warehouse_goes_through_gcsfs_or_names_its_extra(monkeypatch):
    root = location("gs://bucket/wh")
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        with pytest.raises(StorageError, match=r"decguard-pipeline\[gcs\]"):
            storage_of(root)
        return
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test")
    for name in ("GCE_METADATA_HOST", "GCE_METADATA_IP"):  # any probe stays on loopback
        monkeypatch.setenv(name, "127.0.0.1:9")
    storage = storage_of(root)  # the client falls back to anonymous access
    assert storage.remote and "gs" in storage.fs.protocol


REGION = """\
from decguard_pipeline.warehouse.locations import location
from decguard_pipeline.warehouse.storage import storage_of
fs = storage_of(location("s3://bucket/wh")).fs
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


def test_a_query_gets_the_views_it_names():
    assert views.needed("SELECT * FROM latest_metrics") == {"metrics"}
    assert views.needed("select * from METRICS m join latest_runs r using (run_id)") == {
        "metrics",
        "runs",
    }
    assert set(views.CHECK_TABLES) <= views.needed("SELECT * FROM latest_all_checks")
    assert views.needed("SHOW TABLES") is None  # every view
    assert views.needed(None) is None


def test_the_cli_refuses_a_bad_location(ours):
    ran = ours("sql", "SELECT 1", "--warehouse", "s3://key:secret@bucket/wh")
    assert ran.exit_code == 2 and "never from the location" in ran.stderr
    assert "secret" not in ran.stderr.replace("never from", "") and "Traceback" not in ran.stderr


# -- against a real S3 endpoint ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.s3
def test_same_answers_as_a_local_warehouse_and_compaction(s3_server, s3_bucket, tmp_path):
    today = datetime.now(UTC)  # both histories written at the same times
    local, remote = Warehouse(tmp_path / "wh"), Warehouse(f"s3://{s3_bucket}/team/wh")
    assert remote.remote
    runs = fill_history(local, writes=6, today=today)
    assert fill_history(remote, writes=6, today=today) == runs
    expected = answers(local)
    assert sum(map(len, expected.values())) > 100
    assert answers(remote) == expected

    keys = s3_server.keys(s3_bucket, "team/wh/")
    assert "team/wh/catalog.json" in keys and not any(".staging" in k for k in keys)
    assert any(
        k.startswith("team/wh/metrics/contract=refund/target=default@mock-v1/") for k in keys
    )

    # the pipeline's own readers
    contract, target = "refund", "default@mock-v1"
    assert remote.read_latest("metrics", contract, target) == local.read_latest(
        "metrics", contract, target
    )
    assert (
        remote.read_run("runs", contract, target, runs[2]).to_pylist()
        == local.read_run("runs", contract, target, runs[2]).to_pylist()
    )

    # compaction: the lease keeps a second one out, then every answer stays the same
    with held(remote.root), pytest.raises(CompactionBusy, match="holds its lease"):
        compact(remote, Settings(older_than_days=1, **FAST), log=lambda _: None)
    result = compact(remote, Settings(older_than_days=1, **FAST), log=lambda _: None)
    assert result.tables["metrics"].compacted_written > 0
    compacted = [k for k in s3_server.keys(s3_bucket, "team/wh/metrics/") if "_~" in k]
    assert any("contract=_" not in k for k in compacted)
    assert answers(remote) == expected
    with held(remote.root):  # the lease was released, not left to lapse
        pass


@pytest.mark.slow
@pytest.mark.s3
def test_sql_on_s3_from_the_command_line(s3_server, s3_bucket, ours, tmp_path):
    today = datetime.now(UTC)
    root = f"s3://{s3_bucket}/wh"
    local = Warehouse(tmp_path / "wh")
    fill_history(Warehouse(root), writes=3, today=today)
    fill_history(local, writes=3, today=today)
    query = "SELECT contract, target, metric, value FROM latest_metrics ORDER BY ALL"
    ran = ours("sql", query, "--warehouse", root, "-f", "json")
    assert ran.exit_code == 0, ran.stderr
    there = ours("sql", query, "--warehouse", str(local.root), "-f", "json")
    assert json.loads(ran.stdout) == json.loads(there.stdout) and len(json.loads(ran.stdout)) == 6
    bad = ours("sql", "SELECT * FROM no_such_view", "--warehouse", root)
    assert bad.exit_code == 2 and "query failed" in bad.stderr and "Traceback" not in bad.stderr
    for each in (ran, bad):
        assert s3_server.secret not in each.stdout + each.stderr
    # read-only, and only the warehouse: its own files yes; another bucket, another prefix
    # of the same bucket, a local file, no; and nothing written
    glob = f"{root}/metrics/contract=*/target=*/*.parquet"
    direct = ours("sql", f"SELECT count(*) AS n FROM read_parquet('{glob}')", "--warehouse", root)
    assert direct.exit_code == 0, direct.stderr
    other = s3_server.create_bucket()
    s3_server.client().put_object(Bucket=other, Key="secret.csv", Body=b"a\nother-secret\n")
    s3_server.client().put_object(Bucket=s3_bucket, Key="wh-x/s.csv", Body=b"a\nprefix-secret\n")
    before = s3_server.keys(s3_bucket)
    for query in (
        f"SELECT * FROM read_csv('s3://{other}/secret.csv')",
        f"SELECT * FROM read_csv('s3://{s3_bucket}/wh-x/s.csv')",
        "SELECT * FROM read_text('/etc/passwd')",
        f"COPY (SELECT 1) TO '{root}/metrics/contract=x/target=y/1_x.parquet'",
    ):
        refused = ours("sql", query, "--warehouse", root)
        assert refused.exit_code == 2, (query, refused.stdout)
        said = refused.stdout + refused.stderr
        assert "other-secret" not in said and "prefix-secret" not in said and "root:" not in said
    assert s3_server.keys(s3_bucket) == before


WRITER = textwrap.dedent(
    """\
    import sys
    from decguard_pipeline.warehouse import Warehouse, storage
    from decguard_pipeline_tests.support.warehouse_rows import case_rows

    storage.PART_SIZE = 5 * 2**20  # S3's smallest part: a multipart upload of a few parts
    wh = Warehouse(sys.argv[1])
    n = int(sys.argv[2])
    for k in range(1000):
        rows = case_rows(n, contract="c", target="t", run_id=f"r{k}", prefix=f"r{k}")
        wh.write("case_results", rows, contract="c", target="t", run_id=f"r{k}")
        print(k, flush=True)
    """
)


@pytest.mark.slow
@pytest.mark.s3
def test_kill_9_during_an_upload_leaves_nothing_visible(s3_server, s3_bucket, tmp_path):
    """A writer killed while its multipart upload is under way: the parts it sent are on the
    server, the object is not; ``sql`` counts only the writes that finished."""
    root = f"s3://{s3_bucket}/wh"
    n = 1_300_000  # ~15 MB of Parquet: three parts of 5 MiB
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, root, str(n)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **s3_server.env()},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not s3_server.incomplete_uploads(s3_bucket):
            assert writer.poll() is None, writer.stderr.read()
            assert time.monotonic() < deadline, "no multipart upload started"
            time.sleep(0.05)
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.kill()
        out, _ = writer.communicate()
    finished = len(out.split())
    (pending,) = s3_server.incomplete_uploads(s3_bucket)
    assert pending.startswith("wh/case_results/contract=c/target=t/")
    keys = s3_server.keys(s3_bucket, "wh/case_results/contract=c/")
    assert pending not in keys and len(keys) == finished
    for key in keys:  # every visible object is whole
        data = s3_server.client().get_object(Bucket=s3_bucket, Key=key)["Body"].read()
        assert pq.read_table(pa.BufferReader(data)).num_rows == n

    wh = Warehouse(root)
    (count,) = wh.query("SELECT count(*) AS n FROM case_results").column("n").to_pylist()
    assert count == finished * n
    wh.write("case_results", [], contract="c", target="t", run_id="after")  # still writable


@pytest.mark.slow
@pytest.mark.s3
def test_evaluate_on_s3_and_no_credential_anywhere(s3_server, s3_bucket, tmp_path, ours):
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
    assert s3_server.keys(s3_bucket, f"wh/production_records/contract=tiny/target={DAYS[1]}/")

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

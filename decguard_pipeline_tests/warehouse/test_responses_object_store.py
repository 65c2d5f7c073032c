"""The response cache on object storage (issue 26): a cache given as ``s3://…`` goes to the
bucket (never to a local folder ``s3:``), and a run killed with ``kill -9`` keeps what it was
told up to the publication interval, although an object store has no journal.

The S3 endpoint is moto's standalone server on loopback (support/object_store.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.cli.test_cache import http_contract
from decguard_pipeline_tests.support.counting_server import counting_server
from decguard_pipeline_tests.support.evaluate_places import Place

pytestmark = [pytest.mark.slow, pytest.mark.s3, pytest.mark.postgres]


def stored_answers(root: str) -> int:
    """The answers the cache at ``root`` holds of the test's contract and target."""
    found = Warehouse(root).query(
        "SELECT count(*) AS n FROM responses WHERE contract = 'urgent' "
        "AND target = 'default@model-v1'"
    )
    return int(found["n"][0].as_py())


def test_a_cache_given_as_an_s3_url_is_kept_in_the_bucket(
    s3_server, s3_bucket, pg_catalog, tmp_path, ours, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DECGUARD_CACHE", raising=False)
    root = f"s3://{s3_bucket}/cache"
    with counting_server() as server:
        contract = http_contract(tmp_path / "urgent", server, 30)
        first = ours("test", contract, "--cache", root, "-o", tmp_path / "a.json")
        assert first.exit_code in (0, 1), first.stderr
        assert server.state.total == 30
        server.state.reset()
        second = ours("test", contract, "--cache", root, "-o", tmp_path / "b.json")
        assert second.exit_code == first.exit_code, second.stderr
        assert server.state.total == 0  # the health answer names the version: nothing asked
    cache = json.loads((tmp_path / "b.pipeline.json").read_text())["cache"]
    assert (cache["directory"], cache["answers_from_cache"]) == (root, 30)
    assert f"{root} · model version model-v1" in second.stdout
    assert stored_answers(root) == 30
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.json", "a.pipeline.json", "b.json", "b.pipeline.json", "urgent",
    ]  # fmt: skip

    # $DECGUARD_CACHE takes the URL too; stats and prune work on the bucket
    monkeypatch.setenv("DECGUARD_CACHE", root)
    stats = ours("cache", "stats", "-f", "json")
    assert stats.exit_code == 0, stats.stderr
    (row,) = json.loads(stats.stdout)["partitions"]
    assert (row["contract"], row["target"], row["answers"]) == ("urgent", "default@model-v1", 30)
    pruned = ours("cache", "prune", "--older-than", "0")
    assert pruned.exit_code == 0, pruned.stderr
    assert f"pruned {root}: 30 rows dropped, 0 kept" in pruned.stdout
    assert stored_answers(root) == 0

    # a URL carrying credentials is refused, and the secret is not repeated
    ran = ours("test", contract, "--cache", f"s3://AKIA1:{s3_server.secret}@{s3_bucket}/c")
    assert ran.exit_code == 2 and "credentials come from the environment" in ran.stderr
    assert s3_server.secret not in ran.stderr + ran.stdout
    assert not (tmp_path / "s3:").exists()


def test_a_killed_evaluate_on_s3_keeps_what_it_was_told(s3_server, s3_bucket, pg_catalog, tmp_path):
    """The model answers 200 of 300 cases and then stalls; the evaluation is killed once those
    answers are in the bucket (they must get there while it waits: published every
    ``publish_every_s``), and the next evaluation asks only the 100 others."""
    n, held = 300, 200
    place = Place(tmp_path)
    root = f"s3://{s3_bucket}/wh"
    env = {**os.environ, **s3_server.env(), **place.env(), "DECGUARD_WAREHOUSE": root}
    command = [sys.executable, "-m", "decguard_pipeline", "evaluate"]
    with counting_server() as server:
        http_contract(place.contracts / "urgent", server, n, concurrency=8)
        server.state.hold_after = held
        with (tmp_path / "killed.log").open("w") as log:
            child = subprocess.Popen(command, env=env, stdout=log, stderr=log,
                                     start_new_session=True)  # fmt: skip
        try:
            deadline = time.monotonic() + 300
            stored = 0
            while stored < held:
                assert child.poll() is None, (tmp_path / "killed.log").read_text()
                assert time.monotonic() < deadline, (
                    f"{stored} of the {held} answers received are in the bucket"
                )
                time.sleep(0.5)
                stored = stored_answers(root)
            assert server.state.answered == held and child.poll() is None  # still waiting
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        assert stored == held

        server.state.hold_after = None
        server.state.reset()
        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stdout + again.stderr
        assert server.state.total == n - held  # only what the killed run was not told
        assert set(server.state.received.values()) == {1}
    line = next(x for x in again.stdout.splitlines() if "default@model-v1" in x)
    assert f"{held} cached · {n - held} asked, all answered" in line

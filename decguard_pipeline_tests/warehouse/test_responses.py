"""The ``responses`` table as the response cache's store (issue 13): answers published
atomically as they arrive, journaled so that a killed writer keeps them, found again by key,
expired by age and pruned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from decguard_pipeline.core.cache.answers import Answers
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.responses import JOURNAL_GLOB, ResponseTable, read_journal
from decguard_pipeline.warehouse.responses_upkeep import prune, response_stats

LABELS = ("yes", "no")


def commits(root: Path) -> list[tuple[str, int]]:
    """The writes of the responses table (run, rows), in commit order."""
    found = Warehouse(root).query(
        "SELECT run_id, count(*) AS n FROM responses GROUP BY run_id, recorded_at "
        "ORDER BY min(rowid)"
    )
    return [(r["run_id"], r["n"]) for r in found.to_pylist()]


def key(i: int) -> bytes:
    return i.to_bytes(16, "big")


def answers(n: int, *, start: int = 0, at: float | None = None) -> Answers:
    rng = np.random.default_rng(start)
    p = rng.random(n)
    return Answers(
        keys=[key(start + i) for i in range(n)],
        case_ids=[f"c{start + i}" for i in range(n)],
        labels=[LABELS] * n,
        probs=np.column_stack([p, 1.0 - p]),
        model=["m"] * n,
        model_version=[f"v{(start + i) % 2}" for i in range(n)],
        latency_ms=rng.random(n) * 100,
        prompt_tokens=np.where(np.arange(n) % 3 == 0, np.nan, np.arange(n) + 10.0),
        completion_tokens=np.where(np.arange(n) % 3 == 0, np.nan, 1.0),
        metadata=[{} if i % 4 else {"trace": f"t{i}", "score": 0.5} for i in range(n)],
        answered_at=time.time() if at is None else at,
    )


def store(root: Path, **kw) -> ResponseTable:
    return ResponseTable(
        Warehouse(root),
        contract="tiny",
        target="default@v1",
        run_id=kw.pop("run_id", "run-1"),
        backend="default",
        provider="http",
        version="v1",
        **kw,
    )


def test_kept_answers_are_found_again_exactly(tmp_path):
    written = answers(50)
    first = store(tmp_path)
    assert first.keep(written) == 50
    first.flush()
    assert commits(tmp_path) == [("run-1", 50)]  # one transaction
    again = store(tmp_path, run_id="run-2")
    wanted = [b"nope", *reversed(written.keys), b"other"]
    hits = again.lookup(wanted, 2)
    assert hits.rows.tolist() == list(range(1, 51))
    order = list(reversed(range(50)))
    np.testing.assert_array_equal(hits.probs, written.probs[order])
    np.testing.assert_array_equal(hits.latency_ms, written.latency_ms[order])
    np.testing.assert_array_equal(hits.prompt_tokens, written.prompt_tokens[order])
    assert hits.model_version == [written.model_version[i] for i in order]
    assert hits.metadata == [written.metadata[i] for i in order]
    # the rows are queryable like any warehouse table
    count = Warehouse(tmp_path).query(
        "SELECT count(*) AS n FROM responses WHERE target = 'default@v1'"
    )
    assert count.column("n").to_pylist() == [50]
    # a lookup with another number of labels finds nothing (it cannot be these answers)
    assert len(again.lookup(written.keys, 3)) == 0


def test_answers_are_published_every_few_seconds_not_only_at_the_end(tmp_path):
    table = store(tmp_path, publish_every_s=0.0)
    table.keep(answers(5))
    table.written()  # by the writer thread
    assert commits(tmp_path) == [("run-1", 5)]  # due at once: committed by keep
    slow = store(tmp_path, run_id="run-2", publish_every_s=3600)
    slow.keep(answers(5, start=5))
    slow.written()
    assert commits(tmp_path) == [("run-1", 5)]  # not due: held until flush
    slow.flush()
    assert commits(tmp_path) == [("run-1", 5), ("run-2", 5)]


def test_old_answers_expire(tmp_path):
    table = store(tmp_path)
    table.keep(answers(3, at=time.time() - 10 * 86400))
    table.keep(answers(3, start=3))
    table.flush()
    assert len(store(tmp_path, max_age_days=30).lookup([key(i) for i in range(6)], 2)) == 6
    fresh = store(tmp_path, max_age_days=5).lookup([key(i) for i in range(6)], 2)
    assert fresh.rows.tolist() == [3, 4, 5]


CHILD = """
import os, signal, time
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.responses import ResponseTable
table = ResponseTable(Warehouse({root!r}), contract="tiny", target="default@v1",
                      run_id="killed-run", backend="default", provider="http", version="v1",
                      publish_every_s=3600)
for i in range({n}):
    table.journal({{"key": i.to_bytes(16, "big").hex(), "case_id": f"c{{i}}",
                   "labels": ["yes", "no"], "probabilities": [0.25, 0.75], "model": "m",
                   "model_version": "v1",
                   "latency_ms": 12.5, "prompt_tokens": 7, "completion_tokens": 1,
                   "metadata": {{}}, "answered_at": time.time()}})
print("journaled", flush=True)
if {hold}:
    time.sleep(60)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _child(root: Path, n: int, *, hold: bool) -> subprocess.Popen[str]:
    code = textwrap.dedent(CHILD).format(root=str(root), n=n, hold=hold)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_killed_writer_keeps_every_journaled_answer_and_the_next_run_publishes_them(tmp_path):
    child = _child(tmp_path, 40, hold=False)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    table = store(tmp_path, run_id="next-run")
    journals = list(table.directory.glob(JOURNAL_GLOB))
    assert len(journals) == 1 and not commits(tmp_path)
    # a line cut short by the kill is left out, not an error
    with journals[0].open("ab") as handle:
        handle.write(b'{"key": "00000000000000000000000000000063", "case_id"')
    hits = table.lookup([key(i) for i in range(41)], 2)
    assert hits.rows.tolist() == list(range(40))
    assert hits.prompt_tokens.tolist() == [7.0] * 40
    # committed under the killed run's id, the journal gone
    assert commits(tmp_path) == [("killed-run", 40)]
    assert not list(table.directory.glob(JOURNAL_GLOB))
    assert table.recovered == 40


@pytest.mark.slow
def test_a_live_writers_journal_is_read_but_left_to_it(tmp_path):
    child = _child(tmp_path, 10, hold=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "journaled"
        table = store(tmp_path, run_id="reader")
        assert len(table.lookup([key(i) for i in range(10)], 2)) == 10
        assert len(list(table.directory.glob(JOURNAL_GLOB))) == 1
        assert not commits(tmp_path)
    finally:
        child.kill()
        child.wait(10)
    # once its writer is dead, the next reader adopts it
    store(tmp_path, run_id="after").lookup([key(0)], 2)
    assert commits(tmp_path) == [("killed-run", 10)]


def journal_line(i: int) -> dict:
    return {"key": key(i).hex(), "case_id": f"c{i}", "labels": ["yes", "no"],
            "probabilities": [0.25, 0.75], "model": "m", "model_version": "v1",
            "latency_ms": 12.5, "prompt_tokens": 7, "completion_tokens": None,
            "metadata": {}, "answered_at": 1.7e9}  # fmt: skip


def test_journal_reader_leaves_out_a_torn_tail_and_names_damaged_lines(tmp_path):
    path = tmp_path / ".journal-x.jsonl"
    lines = [json.dumps({"journal": 1, "run_id": "r"})]
    lines += [json.dumps(journal_line(i)) for i in range(3)]
    lines.insert(2, "\x00\x00 not json {")  # line 3
    lines.append(json.dumps({**journal_line(3), "probabilities": [0.5]}))  # line 6
    lines.append(json.dumps({**journal_line(4), "key": "k4"}))  # line 7
    lines.append(json.dumps(journal_line(5)))
    path.write_text("\n".join(lines) + "\n" + '{"key": "k9", "prob')  # cut short by a kill
    journal = read_journal(path)
    assert journal.header["run_id"] == "r"
    assert [r["case_id"] for r in journal.rows] == ["c0", "c1", "c2", "c5"]
    assert journal.bad == [
        (3, "not JSON"),
        (6, "field 'probabilities' is not one number per label"),
        (7, "field 'key' is not 32 hexadecimal digits"),
    ]
    assert journal.describe_bad(path) == (
        f"the response cache's journal {path} line 3 is not an answer (not JSON) and 2 more "
        "line(s): skipped; its answer is asked again"
    )


def test_prune_drops_old_answers_and_duplicates_and_keeps_the_rest(tmp_path):
    table = store(tmp_path)
    table.keep(answers(4, at=time.time() - 40 * 86400))
    table.keep(answers(6, start=4))
    table.flush()
    again = store(tmp_path, run_id="run-2")
    again.keep(answers(2, start=4))  # the same keys answered again: duplicates
    again.flush()
    before = {r["target"]: r for r in response_stats(Warehouse(tmp_path))}["default@v1"]
    assert (before["answers"], before["distinct_keys"]) == (12, 10)
    done = prune(Warehouse(tmp_path), older_than_days=30, run_id="prune-1")
    assert (done.removed, done.kept, done.partitions) == (6, 6, 1)
    after = {r["target"]: r for r in response_stats(Warehouse(tmp_path))}["default@v1"]
    assert (after["answers"], after["distinct_keys"]) == (6, 6)
    hits = store(tmp_path, run_id="run-3").lookup([key(i) for i in range(10)], 2)
    assert hits.rows.tolist() == [4, 5, 6, 7, 8, 9]
    # nothing to drop: nothing deleted
    assert prune(Warehouse(tmp_path), older_than_days=30, run_id="prune-2").partitions == 0


def test_answers_whose_metadata_json_cannot_hold_are_not_kept(tmp_path):
    odd = answers(3)
    odd.metadata = [{"x": object()}, {}, {"y": [1, 2]}]
    table = store(tmp_path)
    assert table.keep(odd) == 2
    table.flush()
    assert store(tmp_path).lookup(odd.keys, 2).rows.tolist() == [1, 2]


def test_stats_of_an_empty_cache(tmp_path):
    assert response_stats(Warehouse(tmp_path)) == []
    assert os.listdir(tmp_path) == []

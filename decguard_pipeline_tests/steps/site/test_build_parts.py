"""Parts of the site build that need no evaluation: the folder it may write into, stale pages
removed, a flip matrix of many labels folded, the served site rebuilt only when the warehouse
changed, and the command's error for a missing warehouse."""

from __future__ import annotations

import pyarrow as pa
import pytest

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.steps.site.build import MARKER, Built, SiteWriter, prepare
from decguard_pipeline.steps.site.compare import MAX_MATRIX_LABELS, OTHER, bounded_matrix
from decguard_pipeline.steps.site.live import CHECK_EVERY_S, LiveSite
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.schema import TABLES


def test_a_folder_of_other_files_is_never_written_into(tmp_path):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    with pytest.raises(DecGuardError, match="not empty and holds no site"):
        prepare(other)
    fresh = tmp_path / "new" / "site"
    prepare(fresh)  # created, and marked
    assert (fresh / MARKER).is_file()
    prepare(fresh)  # a site built before is rebuilt


def test_pages_an_earlier_build_wrote_are_removed(tmp_path):
    prepare(tmp_path / "s")
    first = SiteWriter(tmp_path / "s")
    first.text("contracts/a/index.html", "old")
    first.text("contracts/a/versions/x@1.html", "old")
    second = SiteWriter(tmp_path / "s")
    second.text("contracts/a/index.html", "new")
    second.remove_stale()
    assert (tmp_path / "s/contracts/a/index.html").read_text() == "new"
    assert not (tmp_path / "s/contracts/a/versions").exists()
    assert (tmp_path / "s" / MARKER).is_file()


def test_a_flip_matrix_of_many_labels_keeps_the_busiest_and_every_case():
    k = 30
    labels = [f"l{i}" for i in range(k)]
    matrix = [[(i + j) % 3 for j in range(k)] for i in range(k)]
    matrix[5][5] = 1000  # the busiest label is kept
    folded = bounded_matrix(labels, matrix)
    assert len(folded["labels"]) == MAX_MATRIX_LABELS and folded["labels"][-1] == OTHER
    assert "l5" in folded["labels"] and folded["folded"] == k - (MAX_MATRIX_LABELS - 1)
    assert sum(map(sum, folded["rows"])) == sum(map(sum, matrix))
    small = bounded_matrix(labels[:3], [r[:3] for r in matrix[:3]])
    assert small["folded"] == 0 and small["labels"] == labels[:3]


def _write_run(wh: Warehouse, run_id: str) -> None:
    wh.write("runs", pa.Table.from_pylist([{}], schema=TABLES["runs"]), contract="c",
             target="b@1", run_id=run_id)  # fmt: skip


def test_the_served_site_is_built_again_only_after_new_results(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    _write_run(wh, "r1")
    builds = []
    now = [0.0]
    live = LiveSite(wh, tmp_path / "site", clock=lambda: now[0],
                    build=lambda w, folder: builds.append(folder) or Built(folder))  # fmt: skip
    live.refresh()
    now[0] += CHECK_EVERY_S + 1
    live.refresh()  # nothing new
    assert len(builds) == 1
    _write_run(wh, "r2")
    live.refresh()  # checked a moment ago: not yet
    assert len(builds) == 1
    now[0] += CHECK_EVERY_S + 1
    live.refresh()
    assert len(builds) == 2 and live.error is None


def test_site_build_without_a_warehouse_exits_2(tmp_path, ours):
    ran = ours("site", "build", str(tmp_path / "site"), "--warehouse", str(tmp_path / "none"))
    assert ran.exit_code == 2
    assert "no warehouse at" in ran.stderr and not (tmp_path / "site").exists()


LLM_CONTRACT = """\
schema_version: "0.1"
decision:
  name: route
  type: choice
  description: Which team?
  options: [billing, technical]
backend:
  provider: openai
  model: gpt-test
  base_url: http://127.0.0.1:9/v1
  api_key_env: SITE_TEST_KEY
dataset: cases.jsonl
requirements:
  min_accuracy: 0.5
"""


def test_an_llm_case_shows_its_request_with_secrets_redacted(tmp_path, monkeypatch):
    from decguard_pipeline.core.secrets import forget_secrets
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.steps.site.transcripts import request_builder

    monkeypatch.setenv("SITE_TEST_KEY", "sk-site-test-secret")
    folder = tmp_path / "route"
    folder.mkdir()
    (folder / "decguard.yaml").write_text(LLM_CONTRACT)
    (folder / "cases.jsonl").write_text('{"id": "c1", "input": "hi", "expected": "billing"}\n')
    (entry,) = discover_contracts(str(folder / "decguard.yaml"))
    try:
        rebuild, why = request_builder(entry, "default@gpt-test")
        assert why == "" and rebuild is not None
        shown = rebuild("c1", '"my key is sk-site-test-secret, route me"')
        assert shown["kind"] == "POST /v1/chat/completions"
        assert "route me" in shown["prompt"] and "A) billing" in shown["prompt"]
        assert "sk-site-test-secret" not in shown["text"] + shown["prompt"]
        assert "[REDACTED]" in shown["prompt"]
    finally:
        forget_secrets()
    mock, why = request_builder(None, "default@x")
    assert mock is None and "not found" in why

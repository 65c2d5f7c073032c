"""A contract with ``pipeline.repeats`` against decguard==0.1.1: DecGuard's report is one ask's,
so it equals the reference's report of the same contract without the extension (but for the
contract hash, the producer, time and latencies), the terminal text is DecGuard's followed by
the consistency block, and the reference ``decguard report`` verifies the file."""

from __future__ import annotations

import json

import pytest

from decguard_pipeline_tests.conftest import EXAMPLES, same_text
from decguard_pipeline_tests.support.golden_cases import comparable


@pytest.mark.parametrize("name", ["spam", "refund", "severity"])
def test_report_with_repeats_is_decguards(name, ours, ref, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DECGUARD_CACHE", raising=False)
    source = EXAMPLES / name
    for item in source.iterdir():
        if item.is_file():
            (tmp_path / item.name).write_bytes(item.read_bytes())
    plain = (source / "decguard.yaml").read_text()
    (tmp_path / "decguard.yaml").write_text(plain)
    b = ref("test", "decguard.yaml", "-o", "ref.json")
    (tmp_path / "decguard.yaml").write_text(plain + "\npipeline:\n  repeats: {count: 4}\n")
    a = ours("test", "decguard.yaml", "-o", "ours.json")
    assert a.exit_code == b.exit_code, (a.stderr, b.stderr)
    mine = comparable(json.loads((tmp_path / "ours.json").read_text()))
    theirs = comparable(json.loads((tmp_path / "ref.json").read_text()))
    assert mine["contract"].pop("hash") != theirs["contract"].pop("hash")
    assert mine == theirs
    decguard_text, block = a.stdout.split("\n\n  Consistency  ", 1)
    block, _, final = block.rpartition("\n\n")
    # DecGuard's layout, its final line last, after our section (which has no gate)
    mine_text, ref_text = same_text(decguard_text + "\n\n" + final, b.stdout)
    assert [line for line in mine_text if "sha256:" not in line] == [
        line for line in ref_text if "sha256:" not in line
    ]
    assert block.startswith("4 asks per case")
    sidecar = json.loads((tmp_path / "ours.pipeline.json").read_text())
    assert sidecar["consistency"]["settings"]["count"] == 4
    assert sidecar["consistency"]["unanimous_share"] == 1.0  # the mock is deterministic
    assert ref("report", "ours.json").exit_code == b.exit_code  # verifies

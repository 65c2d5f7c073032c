"""A report split between this process and a forked child (``core.report.halves``) loads
exactly as the whole report does in one process: the same document, the same text, the same
refusal word for word, whatever is tampered with and wherever the cut falls; a cut that is
not between two pairs, a part that does not decode and a child that dies all leave the load
to the one process; no child outlives a load."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import pickle
import random
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.json_limits import ReadAhead, read_document, read_writable
from decguard_pipeline.core.properties import pair_columns, typed_section
from decguard_pipeline.core.properties.summary import Figures
from decguard_pipeline.core.report import halves, struct_verify, typed_records, verify
from decguard_pipeline_tests.conftest import _invoke
from decguard_pipeline_tests.core.properties.test_fast import _copy, _mutate
from decguard_pipeline_tests.support.report_command import ONE_THREAD, run_report
from decguard_pipeline_tests.support.tamper import tampered

NAMES = ["refund", "choice", "noul", "score", "wide"]


class _Seen:
    """What a split load did: each split (False where the document could not be split),
    each child's verdict (whether it held), and how many documents were decoded whole."""

    def __init__(self) -> None:
        self.splits: list[bool] = []
        self.verdicts: list[bool] = []
        self.whole = 0

    @property
    def held(self) -> bool:
        """The load split, the child's pairs held, and nothing was loaded whole."""
        return self.splits == [True] and self.verdicts == [True] and not self.whole


@pytest.fixture(scope="module")
def fresh() -> Iterator[Any]:
    """A fresh interpreter to load split reports in: a test worker has the thread pools of
    other tests' libraries (DuckDB, Arrow), which a fork would copy without their threads,
    and which make ``halves.can_fork`` refuse; the ``report`` command's process has none."""
    context = multiprocessing.get_context("spawn")
    # as the command sets it before NumPy starts: no OpenBLAS threads
    previous = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        with context.Pool(1) as pool:
            yield pool
    finally:
        if previous is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = previous


def _split_load(path: str, share: float, dying: bool) -> tuple[str, _Seen]:
    """In the fresh interpreter: the outcome of loading ``path`` split whatever its size, the
    child's pairs from ``share`` of the document on (``dying``: the child dies instead of
    answering), and what the load did; every child it made is reaped by then."""
    seen, children = _Seen(), []
    decode, start, verdict = halves.decode, halves.OtherHalf.__init__, halves.OtherHalf.verdict
    whole = typed_records.decode

    def decoding(raw: Any) -> Any:
        split = decode(raw)
        seen.splits.append(split is not None)
        return split

    def starting(self: halves.OtherHalf, *args: Any) -> None:
        start(self, *args)
        children.append(self._pid)

    def judging(self: halves.OtherHalf) -> Any:
        asked = self._from_child >= 0  # the child's answer, not the one kept from it
        found = verdict(self)
        if asked:
            seen.verdicts.append(found is not None)
        return found

    def decoding_whole(raw: Any) -> Any:
        seen.whole += 1
        return whole(raw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typed_records, "decode", decoding_whole)
        patch.setattr(halves, "MIN_BYTES", 0)
        patch.setattr(halves, "OWN_SHARE", share)
        patch.setattr(halves, "can_fork", halves.one_thread)  # whatever the CPUs
        patch.setattr(halves, "decode", decoding)
        patch.setattr(halves.OtherHalf, "__init__", starting)
        patch.setattr(halves.OtherHalf, "verdict", judging)
        if dying:
            patch.setattr(pair_columns, "later_half_holds", lambda *args: os._exit(3))
        outcome = _outcome(Path(path), split=True)
    for pid in children:  # each reaped by the load itself
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    return outcome, seen


def _outcome(path: Path, *, split: bool) -> str:
    """The loaded report's text document then its whole document, or the refusal."""
    try:
        report = verify.load_report(path, split=split)
    except ReportError as exc:
        return f"refused {exc}"
    # the text first: its failed pairs come from the child's verdict, the document's pairs
    # are then decoded here
    return f"verified {json.dumps(report.text_document())} {json.dumps(report.document)}"


def _both(fresh: Any, path: Path, share: float, *, dying: bool = False) -> tuple[str, str, _Seen]:
    """(the outcome loaded split, the outcome loaded whole in this process, what the split
    load did)."""
    split, seen = fresh.apply(_split_load, (str(path), share, dying))
    return split, _outcome(path, split=False), seen


def _ahead_load(path: str, spoil: str) -> tuple[str, bool, int, bool]:
    """In the fresh interpreter: the outcome of loading ``path`` split ahead, as the
    ``report`` command does (``struct_verify.load_ahead``), with the rules the child was
    sent then taken for another header's (``spoil``: "key", or "limits"; "" leaves them),
    whether they were sent before the load, how many documents the load then decoded whole,
    and whether the structs verified it (without the verifier's models)."""
    whole: list[int] = []
    by_structs: list[bool] = []
    decode, load_typed = typed_records.decode, struct_verify.load_typed

    def decoding_whole(raw: Any) -> Any:
        whole.append(1)
        return decode(raw)

    def loading_split(*args: Any) -> Any:
        report = load_typed(*args)
        by_structs.append(report is not None)
        return report

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(struct_verify, "load_typed", loading_split)
        patch.setattr(halves, "MIN_BYTES", 0)
        patch.setattr(halves, "can_fork", halves.one_thread)  # whatever the CPUs
        patch.setattr(typed_records, "decode", decoding_whole)
        reading = ReadAhead(Path(path), "report")
        with gc_paused(settle=True):
            ahead = halves.split_ahead(reading)
            later = ahead.split[1] if ahead.split is not None else None
            rules = later.rules if later is not None else None
            if later is not None and rules is not None and spoil == "key":
                spec = dataclasses.replace(rules.key[0], name="another")
                later.rules = dataclasses.replace(rules, key=(spec, *rules.key[1:]))
            elif later is not None and rules is not None and spoil == "limits":
                later.rules = dataclasses.replace(rules, limits={})
            try:
                report = struct_verify.load_ahead(Path(path), reading, ahead)
                outcome = f"verified {json.dumps(report.text_document())} "
                outcome += json.dumps(report.document)
            except ReportError as exc:
                outcome = f"refused {exc}"
    return outcome, rules is not None, len(whole), by_structs == [True]


@pytest.mark.parametrize("spoil", ["", "key", "limits"])
def test_rules_sent_ahead_are_used_only_for_their_header(fresh, reports, spoil):
    path = reports["score"]
    outcome, sent, whole, by_structs = fresh.apply(_ahead_load, (str(path), spoil))
    assert sent  # before the verifier was imported
    assert outcome == _outcome(path, split=False)
    assert whole == (1 if spoil else 0)  # refused: the whole report, in one process
    assert by_structs == (not spoil)


@pytest.mark.parametrize("name", ["refund", "score"])
def test_tampered_headers_and_settings_load_the_commands_way_as_whole(
    fresh, reports, name, tmp_path
):
    """Edits of the header and the properties section: the command's load (the structs,
    then the verifier when they do not plainly hold) gives what the whole load gives."""
    doc = json.loads(reports[name].read_text())
    rng = random.Random(f"structs-{name}")
    seen = {"verified": 0, "refused": 0, "by structs": 0, "by the verifier": 0}
    for attempt in range(40):
        edited, kind = _copy(doc), rng.random()
        if kind < 0.4:
            edited["properties"]["config"] = tampered(edited["properties"]["config"], rng)
        elif kind < 0.55:  # the summaries, the pairs, the skips
            _mutate(edited["properties"], rng)
        else:  # the fields no rule recomputes, more often than the others
            keys = rng.choice([["created_at", "decguard_version", "contract", "backend",
                                "health", "dataset"], list(edited)])  # fmt: skip
            part = {k: edited[k] for k in keys if k not in ("results", "properties")}
            edited.update(tampered(part, rng))
            if rng.random() < 0.2:
                edited.pop("health", None)  # absent: a default, filled in both ways
        path = _write(tmp_path / "r.json", edited)
        outcome, _, _, by_structs = fresh.apply(_ahead_load, (str(path), ""))
        assert outcome == _outcome(path, split=False), attempt
        seen["verified" if outcome.startswith("verified ") else "refused"] += 1
        seen["by structs" if by_structs else "by the verifier"] += 1
    assert min(seen.values()) >= 3, seen


@pytest.mark.parametrize("where", [0.1, 0.9])
@pytest.mark.parametrize("bad", [b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82"])
def test_bytes_that_are_not_utf8_are_refused_the_commands_way_as_whole(
    fresh, reports, tmp_path, where, bad
):
    """The structs' load does not look at the bytes itself: each process's decoder refuses a
    string that is not UTF-8, on either side of the cut, as the verifier does."""
    raw = reports["refund"].read_bytes()
    at = raw.index(b'"input": "', int(len(raw) * where)) + len(b'"input": "')
    path = tmp_path / "r.json"
    path.write_bytes(raw[:at] + bad + raw[at:])
    outcome, _, _, by_structs = fresh.apply(_ahead_load, (str(path), ""))
    assert outcome == _outcome(path, split=False)
    assert outcome.startswith("refused ") and "utf-8" in outcome
    assert not by_structs


def test_settings_deeper_than_a_parser_reads_are_not_sent_ahead(fresh, reports, tmp_path):
    doc = json.loads(reports["refund"].read_text())
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    doc["properties"]["config"]["paraphrase"] = {"source": {"provider": "identity", "x": deep}}
    path = _write(tmp_path / "deep.json", doc)
    outcome, sent, whole, by_structs = fresh.apply(_ahead_load, (str(path), ""))
    assert not sent and not by_structs
    assert outcome == _outcome(path, split=False)
    assert whole == 1  # the split refused: loaded whole, which finds the depth
    assert outcome.startswith("refused") and "recursion limit exceeded" in outcome


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


@pytest.mark.parametrize("share", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("name", NAMES)
def test_split_reports_load_as_whole_ones(fresh, reports, name, share):
    split, whole, seen = _both(fresh, reports[name], share)
    assert seen.held
    assert split.startswith("verified ")
    assert split == whole


def test_failed_pairs_on_both_sides_of_the_cut_are_shown(fresh, reports):
    path = reports["refund"]
    pairs = json.loads(path.read_text())["properties"]["pairs"]
    failed = [i for i, p in enumerate(pairs) if p["violations"]]
    assert len(failed) >= 2
    # cut just before the middle failed pair: failed pairs on both sides
    text = path.read_bytes()
    middle = pairs[failed[len(failed) // 2]]["id"]
    share = (text.index(f'"id": "{middle}"'.encode()) - 40) / len(text)
    split, whole, seen = _both(fresh, path, share)
    assert seen.held
    assert split == whole
    text_document, _ = json.JSONDecoder().raw_decode(split.removeprefix("verified "))
    shown = text_document["properties"]["pairs"]
    assert [p["id"] for p in shown] == [pairs[i]["id"] for i in failed]


@pytest.mark.parametrize("name", ["refund", "score"])
def test_tampered_reports_load_as_whole_ones(fresh, reports, name, tmp_path):
    doc = json.loads(reports[name].read_text())
    rng = random.Random(f"halves-{name}")
    outcomes = {"verified": 0, "refused": 0, "split held": 0, "split refused": 0}
    for attempt in range(30):
        tampered = _copy(doc)
        for _ in range(rng.choice([1, 1, 2])):
            _mutate(tampered["properties"], rng)
        path = _write(tmp_path / "r.json", tampered)
        split, whole, seen = _both(fresh, path, rng.choice([0.3, 0.5, 0.7]))
        assert split == whole, attempt
        outcomes["verified" if split.startswith("verified ") else "refused"] += 1
        outcomes["split held"] += seen.held
        outcomes["split refused"] += seen.verdicts == [False] or seen.splits == [False]
    # both outcomes occur, and the child's verdict both holds and does not
    assert min(outcomes.values()) >= 3, outcomes


def test_pairs_repeated_across_the_cut_are_refused_as_whole(fresh, reports, tmp_path):
    doc = json.loads(reports["refund"].read_text())
    pairs = doc["properties"]["pairs"]
    pairs[-1] = _copy(pairs[0])  # the first pair again, last: one on each side
    path = _write(tmp_path / "r.json", doc)
    split, whole, seen = _both(fresh, path, 0.5)
    assert seen.splits == [True]
    assert split.startswith("refused ")
    assert split == whole


def _nested_ids(doc: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``doc`` with objects that start with an ``id`` inside a pair in the middle (a cut's
    pattern, inside a pair), and a text found just before them."""
    pairs = doc["properties"]["pairs"]
    pairs[len(pairs) // 2]["provenance"] = {"nested-marker": [{"id": 1}, {"id": 2}]}
    return doc, '"nested-marker"'


def test_a_cut_inside_a_pair_is_refused(fresh, reports, tmp_path, monkeypatch):
    doc, before = _nested_ids(json.loads(reports["refund"].read_text()))
    path = _write(tmp_path / "r.json", doc)
    text = path.read_bytes()
    share = text.index(before.encode()) / len(text)
    monkeypatch.setattr(halves, "MIN_BYTES", 0)
    cut = halves.find_cut(bytearray(text), share)
    assert cut is not None and text[cut.comma :].startswith(b",\n")
    assert text.index(before.encode()) < cut.comma < text.index(b'"id": 2')
    split, whole, seen = _both(fresh, path, share)
    assert seen.splits == [False]  # the string came back inside that pair, not after it
    assert split.startswith("verified ")
    assert split == whole


def test_an_end_that_is_not_the_pairs_end_is_refused(fresh, reports, tmp_path):
    doc = json.loads(reports["refund"].read_text())
    section = doc["properties"]
    # skips before the pairs, and the last "skipped" inside the last pair, after a list
    doc["properties"] = {
        "skipped": section.pop("skipped"),
        **section,
    }
    section["pairs"][-1]["provenance"] = {"list": [1], "skipped": [2]}
    path = _write(tmp_path / "r.json", doc)
    split, whole, seen = _both(fresh, path, 0.5)
    assert seen.splits == [False]
    assert split.startswith("verified ")
    assert split == whole


def _errored_pair(number: int) -> dict[str, Any]:
    return {
        "id": f"option_order/x{number}/0", "property": "option_order",
        "case_id": f"x{number}", "sample": 0, "steps": [], "provenance": {}, "input": "x",
        "presentation": None, "result": None,
        "error": {"kind": "original_error", "message": "m"},
        "comparison": None, "violations": [], "reduced": None,
    }  # fmt: skip


def test_a_cut_and_an_end_inside_one_pair_are_refused(fresh, reports, tmp_path):
    doc = json.loads(reports["refund"].read_text())
    section = doc["properties"]
    doc["properties"] = {"skipped": section.pop("skipped"), **section}
    # the last pair holds a list of two pairs, then "skipped": a cut between those two and
    # an end after them make a valid document, with the string inside that pair
    pairs = [_errored_pair(1), _errored_pair(2)]
    section["pairs"][-1]["provenance"] = {"inner-marker": pairs, "skipped": []}
    path = _write(tmp_path / "r.json", doc)
    text = path.read_bytes()
    share = text.index(b'"inner-marker"') / len(text)
    split, whole, seen = _both(fresh, path, share)
    assert seen.splits == [False]  # the string is not the last of the pairs
    assert split.startswith("verified ")
    assert split == whole


def test_a_string_among_the_pairs_is_refused_as_whole(fresh, reports, tmp_path):
    doc = json.loads(reports["refund"].read_text())
    doc["properties"]["pairs"].insert(1, "not a pair")  # where this process decodes
    split, whole, seen = _both(fresh, _write(tmp_path / "r.json", doc), 0.5)
    assert seen.splits == [False]
    assert split.startswith("refused ")
    assert split == whole


def test_values_deeper_than_the_childs_reading_leave_it_to_one_process(fresh, reports, tmp_path):
    doc = json.loads(reports["refund"].read_text())
    pairs = doc["properties"]["pairs"]
    pairs[-1]["steps"] = [{"deep": [[[[[1]]]]]}]  # deeper than the typed reading's Shallow
    path = _write(tmp_path / "r.json", doc)
    split, whole, seen = _both(fresh, path, 0.5)
    assert seen.splits == [True] and seen.verdicts == [False] and seen.whole == 1
    assert split.startswith("verified ")
    assert split == whole


def test_a_child_that_dies_leaves_the_load_to_this_process(fresh, reports):
    split, whole, seen = _both(fresh, reports["noul"], 0.5, dying=True)
    assert seen.splits == [True] and seen.verdicts == [False]
    assert split.startswith("verified ")
    assert split == whole


def test_a_load_that_stops_early_stops_its_child(fresh, reports, tmp_path):
    doc = json.loads(reports["choice"].read_text())
    doc["metrics"]["counts"]["total"] += 1  # refused after the split, before any verdict
    path = _write(tmp_path / "r.json", doc)
    split, whole, seen = _both(fresh, path, 0.5)
    assert seen.splits == [True] and seen.verdicts == []
    assert split.startswith("refused ")
    assert split == whole


def test_small_reports_and_reports_without_pairs_are_not_cut(reports):
    raw = bytearray(reports["refund"].read_bytes())
    assert len(raw) < halves.MIN_BYTES
    assert halves.find_cut(raw, 0.5) is None
    without = raw.replace(b'"skipped"', b'"skipped_"') + b" " * halves.MIN_BYTES
    assert halves.find_cut(without, 0.5) is None


@pytest.mark.parametrize("populate", [True, False])
def test_a_writable_read_has_the_documents_bytes(reports, tmp_path, monkeypatch, populate):
    path = reports["wide"]
    read = read_writable(path, "report", populate=populate)
    assert bytes(read) == read_document(path, "report")
    read[0] = ord(" ")  # writable
    assert bytes(ReadAhead(path, "report").result()) == read_document(path, "report")
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert bytes(read_writable(empty, "report", populate=populate)) == b""
    monkeypatch.setenv("DECGUARD_MAX_REPORT_BYTES", "10")
    with pytest.raises(ReportError) as writable:
        read_writable(path, "report", populate=populate)
    with pytest.raises(ReportError) as plain:
        read_document(path, "report")
    assert str(writable.value) == str(plain.value)
    with pytest.raises(ReportError) as ahead:
        ReadAhead(path, "report").result()
    assert str(ahead.value) == str(plain.value)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_report_command_splits_and_prints_the_same(reports, fmt):
    path = str(reports["refund"])
    ran = run_report(path, "--format", fmt, split=True)
    from decguard_pipeline.cli import cli

    # in this process (the test's worker has threads): loaded whole
    whole = _invoke(cli, ["report", path, "--format", fmt], "decguard-pipeline")
    # verified by the structs: pydantic never imported
    assert ran.stderr == "split\nstructs\npydantic imported: False\n"
    assert (ran.returncode, ran.stdout) == (whole.exit_code, whole.stdout)


def test_figures_come_back_from_the_child_bit_for_bit():
    values = [-0.0, 0.0, 5e-324, 0.1, 1 / 3, 1.0]
    figures = Figures(
        3, ["timeout"], 1, 2, 1, values, values[::-1], values[1:], values[:1], [None, -0.5]
    )
    back = pickle.loads(pickle.dumps(figures))
    assert back == figures
    for field in ("tv", "js", "delta", "confidence"):
        assert all(type(v) is float for v in getattr(back, field))
        assert [struct.pack("<d", v) for v in getattr(back, field)] == [
            struct.pack("<d", v) for v in getattr(figures, field)
        ]


_FROZEN = """
import sys, time
from decguard_pipeline.core.report import halves
halves.MIN_BYTES = 0
start, own = halves.OtherHalf.__init__, halves._decode_own
def starting(self, *args):
    start(self, *args)
    sys.stderr.write(f"child {self._pid}\\n")
    sys.stderr.flush()
def frozen(raw, cut):
    own(raw, cut)
    sys.stderr.write("frozen\\n")
    sys.stderr.flush()
    time.sleep(600)
halves.OtherHalf.__init__ = starting
halves._decode_own = frozen
sys.argv = ["decguard-pipeline", *sys.argv[1:]]
from decguard_pipeline.cli.app import main
main()
"""


def _ended(pid: int) -> bool:
    """Whether process ``pid`` has exited (gone, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.slow
def test_a_report_killed_midway_leaves_no_child_running(reports):
    """kill -9 of ``report`` while its child decodes and waits: the child sees its pipe end
    and exits (it has nothing to write: a report is only read)."""
    command = subprocess.Popen(
        [sys.executable, "-c", _FROZEN, "report", str(reports["refund"])],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ONE_THREAD,
    )
    assert command.stderr is not None
    child = int(command.stderr.readline().split()[1])
    assert command.stderr.readline() == "frozen\n"  # after its own part, before any message
    assert not _ended(child)
    command.kill()
    command.wait()
    for _ in range(1200):  # a liveness bound, not a timing: the child ends at once
        if _ended(child):
            break
        time.sleep(0.1)
    assert _ended(child)


def test_the_labels_sent_first_are_those_of_the_first_result(reports):
    raw = reports["refund"].read_bytes()
    pairs = typed_records.decode(raw).header["properties"].pairs
    assert typed_section.first_labels(pairs) == typed_section._results(pairs)[0].labels
    # no answered pair before a reduced example's: its result's labels
    errored = [p for p in pairs if p.result is None]
    shrunk = next(p for p in pairs if p.reduced is not None)
    reduced_only = [*errored, msgspec.structs.replace(shrunk, result=None)]
    assert reduced_only[-1].reduced.result.labels == ["refund", "reject", "review"]
    assert typed_section.first_labels(reduced_only) == ["refund", "reject", "review"]
    assert typed_section.first_labels(errored) is None

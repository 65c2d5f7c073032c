"""Hostile inputs to every loader end as a clean error naming the file (and the line where
one exists), exit 2, never "internal error": nesting 100,000 levels deep (the decoders recurse
once per level), a lone surrogate (``\\ud800``, which no UTF-8 writer can write), a symbolic
link loop among the contracts. Where DecGuard gives a message, it is DecGuard's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline_tests.conftest import EXAMPLES

DEEP = 100_000
DEEP_LIST = "[" * DEEP + "]" * DEEP


@pytest.fixture
def refund(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copytree(EXAMPLES / "refund", "refund")
    return Path("refund")


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n")


def assert_clean(ran, prefix: str) -> None:
    assert ran.exit_code == 2, ran.stderr
    assert ran.stderr.startswith(f"error: {prefix}"), ran.stderr
    assert "internal error" not in ran.stderr and "Traceback" not in ran.stderr


# -- contracts -------------------------------------------------------------------------------


def test_a_contract_nested_100000_deep_names_its_line(refund, ours):
    text = (refund / "decguard.yaml").read_text()
    line = len(text.splitlines()) + 1
    (refund / "flow.yaml").write_text(text + f"extra: {DEEP_LIST}\n")
    block = ["extra:"] + [" " * (i + 1) + "-" for i in range(600)]
    (refund / "block.yaml").write_text(text + "\n".join(block) + " x\n")
    as_json = json.loads(json.dumps(yaml.safe_load(text)))
    (refund / "deep.json").write_text(json.dumps(as_json)[:-1] + f', "extra": {DEEP_LIST}}}')
    for name, where in (
        ("flow.yaml", f"line {line}, column 207"),  # the top-level mapping is a level
        ("block.yaml", f"line {line + 200}, column 201"),
        ("deep.json", "line 1, column "),
    ):
        for command in ("validate", "test"):
            ran = ours(command, refund / name)
            assert_clean(ran, f"refund/{name}: cannot parse file:\n  nested too deeply to read")
            assert f"(more than 200 levels at {where}" in ran.stderr, ran.stderr


# -- golden datasets -------------------------------------------------------------------------


def test_a_case_nested_too_deeply_is_refused_at_its_line(refund, ours, ref):
    cases = lines_of(refund / "cases.jsonl")
    metadata = '"metadata": {"locale": "en"}'
    for depth in (DEEP, 300):  # both crashed; DecGuard writes 255 levels but cannot read them
        deep = list(cases)
        deep[1] = deep[1].replace(
            metadata, '"metadata": {"locale": "en", "x": ' + "[" * depth + "]" * depth + "}"
        )
        write_lines(refund / "cases.jsonl", deep)
        for command in (["test", "-o", "out.json"], ["fuzz", "-o", "out.json"], ["validate"]):
            ran = ours(command[0], refund / "decguard.yaml", *command[1:])
            assert_clean(ran, "refund/cases.jsonl: line 2: invalid JSON: nested too deeply: ")
            assert "inside more than 198 arrays and objects of its line" in ran.stderr
    shallow = list(cases)
    shallow[1] = shallow[1].replace(
        metadata, '"metadata": {"locale": "en", "x": ' + "[" * 150 + "]" * 150 + "}"
    )
    write_lines(refund / "cases.jsonl", shallow)
    assert ours("test", refund / "decguard.yaml", "-o", "out.json").exit_code == 0
    assert ours("report", "out.json").exit_code == 0  # and read back
    assert ref("report", "out.json").exit_code == 0
    # a .json dataset (a list of cases)
    items = [json.loads(line) for line in cases]
    text = json.dumps(items)
    (refund / "cases.json").write_text(text[:-1] + f', {{"input": "x", "m": {DEEP_LIST}}}]')
    contract = (
        (refund / "decguard.yaml")
        .read_text()
        .replace("dataset: cases.jsonl", "dataset: cases.json")
    )
    (refund / "json.yaml").write_text(contract)
    ran = ours("test", refund / "json.yaml")
    assert_clean(
        ran, "refund/cases.json: invalid JSON: nested too deeply: the value at line 1, column "
    )


def test_a_lone_surrogate_in_a_case(refund, ours, ref):
    cases = lines_of(refund / "cases.jsonl")
    # in the id: DecGuard's message, word for word
    bad = list(cases)
    bad[2] = bad[2].replace('"id": "r3"', '"id": "r\\ud800"')
    write_lines(refund / "cases.jsonl", bad)
    ours_ran, theirs = ours("test", refund / "decguard.yaml"), ref("test", refund / "decguard.yaml")
    assert (ours_ran.exit_code, ours_ran.stderr) == (theirs.exit_code, theirs.stderr)
    assert ours_ran.stderr == (
        "error: refund/cases.jsonl: line 3: invalid case:\n"
        "  id: Input should be a valid string, unable to parse raw data as a unicode string\n"
    )
    # elsewhere (DecGuard fails writing its report): the field is named
    for field, old, new in (
        ("input", '"input": "I changed', '"input": "I \\udc80changed'),
        ("metadata.locale", '"locale": "en"', '"locale": "e\\ud800n"'),
        ("metadata.lo\\ud800cale", '"locale": "en"', '"lo\\ud800cale": "en"'),
    ):
        bad = list(cases)
        bad[2] = bad[2].replace(old, new)
        write_lines(refund / "cases.jsonl", bad)
        ran = ours("test", refund / "decguard.yaml", "-o", "out.json")
        assert_clean(ran, "refund/cases.jsonl: line 3: invalid case:\n")
        assert f"\n  {field}: text with a lone surrogate" in ran.stderr, ran.stderr
    # a pair of surrogate escapes is one character: read as it is
    good = list(cases)
    good[2] = good[2].replace('"locale": "en"', '"locale": "\\ud83d\\ude00"')
    write_lines(refund / "cases.jsonl", good)
    assert ours("test", refund / "decguard.yaml", "-o", "out.json").exit_code == 0


# -- production records ----------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_production_records_nested_too_deeply_or_with_a_lone_surrogate(refund, ours, ref, suffix):
    records = lines_of(refund / "production.jsonl")

    def check(lines: list[str]):
        path = refund / f"records{suffix}"
        if suffix == ".jsonl":
            write_lines(path, lines)
        else:  # a list of records, the hostile one written as it is
            path.write_text("[" + ",\n".join(lines) + "]")
        return ours("check", refund / "decguard.yaml", "-d", path, "-o", "out.json"), path

    where = "line 3" if suffix == ".jsonl" else "record 3"
    for depth in (DEEP, 300):
        deep = list(records)
        deep[2] = deep[2].replace(
            '"metadata": {', '"metadata": {"x": ' + "[" * depth + "]" * depth + ", "
        )
        ran, path = check(deep)
        if suffix == ".jsonl":
            assert_clean(ran, f"{path}: line 3: invalid JSON: nested too deeply: ")
        else:
            assert_clean(ran, f"{path}: invalid JSON: nested too deeply: the value at line 3, ")
    surrogate = list(records)
    surrogate[2] = surrogate[2].replace('"id": "p3"', '"id": "p\\ud800"')
    ran, path = check(surrogate)
    theirs = ref("check", refund / "decguard.yaml", "-d", path)
    assert_clean(ran, f"{path}: {where}: invalid production record:\n")
    assert (ran.exit_code, ran.stderr) == (theirs.exit_code, theirs.stderr)
    for field in ("input", "model"):
        surrogate = list(records)
        surrogate[2] = surrogate[2].replace(f'"{field}": "', f'"{field}": "\\udc00', 1)
        ran, path = check(surrogate)
        assert_clean(ran, f"{path}: {where}: invalid production record:\n  {field}: text with")


# -- stored reports ----------------------------------------------------------------------------


def test_stored_reports_nested_100000_deep_or_with_a_lone_surrogate(refund, ours, ref):
    assert ours("test", refund / "decguard.yaml", "-o", "test.json").exit_code in (0, 1)
    assert ours("fuzz", refund / "decguard.yaml", "-o", "fuzz.json").exit_code in (0, 1)
    args = ("check", refund / "decguard.yaml", "-d", refund / "production.jsonl")
    assert ours(*args, "-o", "check.json").exit_code in (0, 1)
    for name in ("test.json", "fuzz.json", "check.json"):
        text = Path(name).read_text()
        assert '"locale": "en"' in text
        Path(f"deep-{name}").write_text(text.replace('"locale": "en"', f'"locale": {DEEP_LIST}', 1))
        key = '"id": "' if name == "check.json" else '"case_id": "'
        assert key in text
        Path(f"lone-{name}").write_text(text.replace(key, key + "\\ud800", 1))
    for kind in ("deep", "lone"):
        for command in (
            ["report", f"{kind}-test.json"],
            ["diff", "test.json", f"{kind}-test.json"],
            ["replay", f"{kind}-fuzz.json"],
            [*args, "--baseline", f"{kind}-check.json"],
        ):
            ran, theirs = ours(*command), ref(*command)
            name = command[-1]
            what = "production report 0.1" if "check" in name else "0.1 report"
            assert_clean(ran, f"{name}: not a DecGuard {what}:\n  (root): ")
            if kind == "lone":  # DecGuard's message and position
                assert (ran.exit_code, ran.stderr) == (theirs.exit_code, theirs.stderr)


# -- the contracts folder ----------------------------------------------------------------------


def test_symbolic_link_loops_among_the_contracts(tmp_path):
    shutil.copytree(EXAMPLES / "refund", tmp_path / "all" / "refund")
    (tmp_path / "all" / "looped").mkdir()
    (tmp_path / "all" / "looped" / "decguard.yaml").symlink_to("decguard.yaml")  # itself
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    entries = {e.key: e for e in discover_contracts(str(tmp_path / "all"))}
    assert entries["refund"].ok  # the others still load
    assert entries["looped"].error == (
        f"{tmp_path}/all/looped/decguard.yaml: cannot read contract: "
        "Too many levels of symbolic links"
    )  # before: left out without a word
    [entry] = discover_contracts(str(tmp_path / "loop"))
    assert (
        entry.error == f"{tmp_path}/loop: cannot read contract: Too many levels of symbolic links"
    )


@pytest.mark.slow
def test_evaluate_names_a_looping_contracts_path(tmp_path, ours, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    monkeypatch.setenv("DECGUARD_CONTRACTS", str(tmp_path / "loop"))
    ran = ours("evaluate", "--warehouse", tmp_path / "wh")
    assert ran.exit_code == 2
    assert ran.stderr.endswith(
        f"error: loop: {tmp_path}/loop: cannot read contract: Too many levels of symbolic links\n"
    ), ran.stderr

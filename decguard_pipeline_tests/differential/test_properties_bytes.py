"""Byte for byte against decguard 0.1.1: ``fuzz`` and ``test --all`` on generated contracts
(``property_contracts``: every decision type and property, random settings, seeds and
selections) give the same report files (``-o``), the same ``-f json`` output and the same
terminal text as the reference, once what legitimately differs (the producer version,
timestamps and measured latencies) is neutralised. The property pairs of our files are
encoded a batch at a time: these compare the bytes, not the parsed documents."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from decguard_pipeline_tests.support.property_contracts import commands, normalised_text, write

_VERSION = re.compile(r'"decguard_version": "[^"]*"')


def _normalised(text: str) -> str:
    """Versions, latencies and the program a hint names (ours says `decguard-pipeline replay`
    where DecGuard says `decguard replay`) neutralised."""
    text = text.replace("`decguard-pipeline ", "`decguard ")
    return _VERSION.sub('"decguard_version": V', normalised_text(text))


def _same_bytes(ours, ref, tmp_path: Path, seeds: range) -> int:
    compared = 0
    for seed in seeds:
        contract = write(tmp_path, seed)
        os.chdir(contract.parent)
        for number, args in enumerate(commands(seed)):
            mine, theirs = f"ours{number}.json", f"ref{number}.json"
            for extra, files in (
                (["-f", "json"], None),
                ([], None),
                (["-o", mine], mine),
            ):
                a = ours(*args, *extra)
                b = ref(*args, *(extra if files is None else ["-o", theirs]))
                assert (a.exit_code, a.stderr.replace(mine, theirs)) == (b.exit_code, b.stderr)
                assert _normalised(a.stdout) == _normalised(b.stdout), (seed, args, extra)
                if files is not None:
                    assert _normalised((contract.parent / mine).read_text()) == _normalised(
                        (contract.parent / theirs).read_text()
                    ), (seed, args)
                compared += 1
    return compared


@pytest.mark.parametrize("first", [0, 8, 16])
def test_generated_contracts_match_the_reference_byte_for_byte(ours, ref, tmp_path, first):
    here = os.getcwd()
    try:
        assert _same_bytes(ours, ref, tmp_path, range(first, first + 8)) == 8 * 4 * 3
    finally:
        os.chdir(here)


# seeds 1000-1149 in six slices of 25: one slice is ~20 s, so `make test`'s workers
# (pytest-xdist) share the sweep instead of one of them running all of it at the end
@pytest.mark.slow
@pytest.mark.parametrize("first", range(1000, 1150, 25))
def test_a_wide_sweep_matches_the_reference_byte_for_byte(ours, ref, tmp_path, first):
    here = os.getcwd()
    try:
        _same_bytes(ours, ref, tmp_path, range(first, first + 25))
    finally:
        os.chdir(here)

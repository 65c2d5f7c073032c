"""Side-by-side comparison of fuzz reports and terminal layouts of the two CLIs."""

from __future__ import annotations

import json

from decguard_pipeline_tests.conftest import same_text
from decguard_pipeline_tests.support.fuzz_scenarios import (
    first_difference,
    normalised,
)


def assert_same_report(a_text: str, b_text: str) -> dict:
    mine, theirs = normalised(json.loads(a_text)), normalised(json.loads(b_text))
    assert mine == theirs, first_difference(mine, theirs)
    return mine


def assert_same_layout(a_text: str, b_text: str) -> None:
    mine, theirs = same_text(a_text, b_text)
    assert mine == theirs

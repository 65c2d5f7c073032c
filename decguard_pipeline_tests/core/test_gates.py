"""Checks of one gate measured on several parts (suites, segments) combined into one."""

from __future__ import annotations

from decguard_pipeline.core.gates import combine_checks, make_check

FIELDS = ("part", "status", "value")


def part(name: str, value: float | None, comparison: str = ">=", level: str = "requirement"):
    check = make_check("min_accuracy", "accuracy", comparison, 0.8, value, level=level)  # type: ignore[arg-type]
    return {**check, "part": name}


def test_the_worst_failing_part_decides_and_every_failure_is_told():
    rows = [part("en", 0.9), part("it", 0.5), part("de", 0.7)]
    combined = combine_checks(rows, "min_accuracy", parts="parts", fields=FIELDS)
    assert (combined["part"], combined["value"], combined["status"]) == ("it", 0.5, "fail")
    assert combined["level"] == "requirement"
    assert combined["message"] == ("accuracy 0.5 violates >= 0.8; accuracy 0.7 violates >= 0.8")
    assert combined["parts"] == [
        {"part": "en", "status": "pass", "value": 0.9},
        {"part": "it", "status": "fail", "value": 0.5},
        {"part": "de", "status": "fail", "value": 0.7},
    ]


def test_a_missing_value_is_the_worst_and_upper_bounds_rank_the_other_way():
    low = [part("a", 0.1, "<="), part("b", 0.6, "<="), part("c", None, "<=")]
    assert combine_checks(low, "g", parts="p", fields=FIELDS)["part"] == "c"
    assert combine_checks(low[:2], "g", parts="p", fields=FIELDS)["part"] == "b"


def test_all_passing_gives_the_worst_parts_message_and_warnings_stay_warnings():
    rows = [part("en", 0.95, level="warning"), part("it", 0.85, level="warning")]
    combined = combine_checks(
        rows, "min_accuracy", parts="parts", fields=FIELDS, message=lambda c: c["part"]
    )
    assert (combined["status"], combined["message"], combined["level"]) == ("pass", "it", "warning")
    failing = [part("en", 0.95, level="warning"), part("it", 0.5, level="warning")]
    combined = combine_checks(failing, "min_accuracy", parts="parts", fields=FIELDS)
    assert (combined["status"], combined["level"]) == ("warn", "warning")

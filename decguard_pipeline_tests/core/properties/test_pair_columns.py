"""The property settings a forked child judges its pairs with (``limits.Limits``, plain
values made from the validated models) judge exactly as the models do, and the child of the
``report`` command never has pydantic: it forks before the verifier is imported."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

import msgspec
import numpy as np
import pytest

from decguard_pipeline.core.contract.properties import (
    Inversion,
    LabelFormat,
    Monotonic,
    OptionOrder,
    Paraphrase,
    Properties,
    Rewrite,
)
from decguard_pipeline.core.properties import pair_columns, typed_section
from decguard_pipeline.core.properties.compare import COMPARISON_FIELDS, judge, tolerance_violations
from decguard_pipeline.core.properties.limits import Limits, MonotonicLimits, limits_of
from decguard_pipeline.core.properties.pairs import OriginalColumns
from decguard_pipeline.core.properties.schema import PropertyRunModel
from decguard_pipeline.core.properties.summary import figures_by_property
from decguard_pipeline.core.report import typed_records, verify
from decguard_pipeline.core.result_structs import Shallow
from decguard_pipeline_tests.core.properties.test_fast import TOLERANCE, _errored, _stored
from decguard_pipeline_tests.support.report_command import ONE_THREAD

NAMES = ["refund", "choice", "noul", "score", "wide"]


def _settings(rng: random.Random) -> list[object]:
    def limit() -> float | None:
        return rng.choice([None, 0.0, 0.05, 0.1, 0.5, 1.0])

    made: list[object] = []
    for _ in range(40):
        limits = {
            "max_tv_distance": limit(),
            "max_js_divergence": limit(),
            "max_abs_delta": limit(),
            "max_confidence_delta": limit(),
            "max_flip_rate": limit(),
        }
        if all(value is None for value in limits.values()):
            limits["max_flip_rate"] = 0.0
        made.append(OptionOrder(**limits))
        made.append(LabelFormat(**limits))
        made.append(Paraphrase(**limits))
        made.append(Inversion(rewrites=(Rewrite(find="not ", replace=""),), **limits))
        made.append(
            Monotonic(
                field="amount",
                direction=rng.choice(["increasing", "decreasing"]),
                max_level_decrease=rng.choice([0.0, 0.5, 1.0]),
                max_flip_rate=limit(),
            )
        )
    return made


def _comparison(rng: random.Random) -> dict[str, object]:
    labels = ["low", "mid", "high"]
    before, after = rng.choice(labels), rng.choice(labels)
    return {
        "tv_distance": rng.random(),
        "js_divergence": rng.random() / 2,
        "max_abs_delta": rng.random(),
        "confidence_delta": rng.uniform(-1, 1),
        "selected_before": before,
        "selected_after": after,
        "flipped": before != after,
        "rank_changed": rng.random() < 0.3,
        "level_delta": rng.choice([-2.0, -1.0, -0.5, 0.0, 1.0]),
    }


def test_limits_judge_every_comparison_as_the_settings_do():
    rng = random.Random(20261207)
    settings = _settings(rng)
    comparisons = [_comparison(rng) for _ in range(200)]
    found = 0
    for config in settings:
        limits = limits_of(config)  # type: ignore[arg-type]
        assert isinstance(limits, MonotonicLimits) == isinstance(config, Monotonic)
        for comparison in comparisons:
            expected = judge(config, comparison)  # type: ignore[arg-type]
            assert judge(limits, comparison) == expected
            assert tolerance_violations(limits, comparison) == tolerance_violations(
                config,  # type: ignore[arg-type]
                comparison,
            )
            found += bool(expected)
    assert found > 1000  # the comparisons break the limits often enough to tell


def test_limits_of_a_setting():
    assert limits_of(OptionOrder(max_tv_distance=0.1)) == Limits(
        "invariant", None, {"max_tv_distance": 0.1}
    )
    monotonic = limits_of(Monotonic(field="amount", direction="decreasing"))
    assert monotonic == MonotonicLimits(
        "monotonic", None, {"max_level_decrease": 0.0}, "decreasing", 0.0
    )


@pytest.mark.parametrize("name", NAMES)
def test_a_childs_verdict_is_the_same_with_limits_as_with_the_settings(reports, name):
    report = verify.load_report(reports[name])
    raw = reports[name].read_bytes()
    section = typed_records.decode(raw).header["properties"]
    enabled = Properties.model_validate(section.config).enabled()
    originals = OriginalColumns.of(report.results)
    pairs = section.pairs[len(section.pairs) // 3 :]
    with_models = pair_columns.later_half_holds(pairs, enabled, originals)
    limits = {key: limits_of(config) for key, config in enabled.items()}
    with_limits = pair_columns.later_half_holds(pairs, limits, originals)
    assert with_models is not None and with_limits is not None
    assert np.array_equal(with_models.hashes, with_limits.hashes)
    assert (with_models.figures, with_models.failed) == (with_limits.figures, with_limits.failed)


_WATCHED = """
import sys
from decguard_pipeline.core.properties import pair_columns
from decguard_pipeline.core.report import halves
halves.MIN_BYTES = 0
start, holds = halves.OtherHalf.__init__, pair_columns.later_half_holds
def starting(self, *args):
    sys.stderr.write(f"fork: pydantic {'pydantic' in sys.modules}\\n")
    start(self, *args)
def holding(*args):
    verdict = holds(*args)
    sys.stderr.write(f"child: pydantic {'pydantic' in sys.modules}, held {verdict is not None}\\n")
    return verdict
halves.OtherHalf.__init__ = starting
pair_columns.later_half_holds = holding
sys.argv = ["decguard-pipeline", *sys.argv[1:]]
from decguard_pipeline.cli.app import main
main()
"""


def test_the_report_commands_child_never_imports_pydantic(reports):
    ran = subprocess.run(
        [sys.executable, "-c", _WATCHED, "report", str(reports["refund"])],
        capture_output=True,
        text=True,
        check=False,
        env=ONE_THREAD,
    )
    lines = sorted(ran.stderr.splitlines())
    assert lines == ["child: pydantic False, held True", "fork: pydantic False"]
    assert ran.returncode in (0, 1)


def _section(reports, name: str, errored: bool = False):
    """A report's properties section as typed records and as the schema's dicts, its enabled
    properties and its verified case results."""
    section, results = _stored(reports[name])
    if errored:
        section = _errored(section, results, random.Random(name))
    typed = msgspec.json.decode(json.dumps(section), type=typed_section.TypedSection[Shallow])
    dicts = PropertyRunModel.model_validate(
        section, context={"probability_tolerance": TOLERANCE}
    ).model_dump(mode="json")
    enabled = Properties.model_validate(section["config"]).enabled()
    return typed, dicts, enabled, results


@pytest.mark.parametrize("errored", [False, True], ids=["answered", "errored"])
@pytest.mark.parametrize("name", NAMES)
def test_matched_figures_are_those_of_the_stored_comparisons(reports, name, errored):
    typed, dicts, enabled, results = _section(reports, name, errored)
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    names = [s["property"] for s in dicts["summaries"]]
    for pairs, skipped, access in (
        (typed.pairs, typed.skipped, pair_columns.STRUCTS),
        (dicts["pairs"], dicts["skipped"], pair_columns.DICTS),
    ):
        found = pair_columns.matched(pairs, skipped, enabled, results, row_of, access)
        assert found is not None
        stored = figures_by_property(names, enabled, pairs, get=access.get)
        assert found.figures(names, enabled, pairs, access) == stored
    if errored:
        assert any(p.error is not None for p in typed.pairs)


def _nudged(value: object) -> list[object]:
    """Values a stored comparison field might hold instead of ``value``, equal or not."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, float):
        return [math.nextafter(value, 2.0), -value, value + 0.0, None]
    if isinstance(value, str):
        return [value + " ", value.upper()]
    return [0.0, None]


@pytest.mark.parametrize("name", NAMES)
def test_typed_comparisons_are_compared_as_their_dicts_are(reports, name):
    typed, _, enabled, results = _section(reports, name)
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    found = pair_columns.matched(typed.pairs, [], enabled, results, row_of, pair_columns.STRUCTS)
    assert found is not None and found.compared
    rng = random.Random(name)
    tried = refused = 0
    for prop, computed in found.compared.items():
        held = [p.comparison for p in typed.pairs if p.property == prop and p.comparison]
        assert pair_columns.struct_comparisons_equal(held, computed)
        for field in COMPARISON_FIELDS:
            row = rng.randrange(len(held))
            for value in _nudged(getattr(held[row], field)):
                edited = [msgspec.structs.replace(c) for c in held]
                setattr(edited[row], field, value)
                dicts = msgspec.to_builtins(edited)
                expected = pair_columns.dict_comparisons_equal(dicts, computed)
                assert pair_columns.struct_comparisons_equal(edited, computed) == expected
                tried, refused = tried + 1, refused + (not expected)
    assert refused > tried // 2  # most edits change the comparison; a few (-0.0) do not


@pytest.mark.parametrize("errored", [False, True], ids=["answered", "errored"])
@pytest.mark.parametrize("name", NAMES)
def test_what_pairs_hold_found_is_what_matched_reads(reports, name, errored):
    typed, _, enabled, results = _section(reports, name, errored)
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    held = typed_section.pairs_hold(typed.pairs, None, TOLERANCE)
    assert held is not None and held.labels == list(results.spec.labels)

    def match(found: typed_section.Held | None) -> pair_columns.Matched | None:
        access = pair_columns.STRUCTS
        return pair_columns.matched(
            typed.pairs, typed.skipped, enabled, results, row_of, access, found
        )

    alone, helped = match(None), match(held)
    assert alone is not None and helped is not None
    assert alone.compared.keys() == helped.compared.keys()
    for name_, computed in alone.compared.items():
        assert computed.columns() == helped.compared[name_].columns()
    # its rows are the results' probabilities, read in place of theirs: others are refused
    moved = held.probabilities.copy()
    moved[len(moved) // 2] = moved[len(moved) // 2][::-1]
    assert match(typed_section.Held(held.labels, moved)) is None
    # and its labels must be the report's
    assert match(typed_section.Held(held.labels[::-1], held.probabilities)) is None

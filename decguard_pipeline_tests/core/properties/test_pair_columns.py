"""The property settings a forked child judges its pairs with (``limits.Limits``, plain
values made from the validated models) judge exactly as the models do, and the child of the
``report`` command never has pydantic: it forks before the verifier is imported."""

from __future__ import annotations

import random
import subprocess
import sys

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
from decguard_pipeline.core.properties import pair_columns
from decguard_pipeline.core.properties.compare import judge, tolerance_violations
from decguard_pipeline.core.properties.limits import Limits, MonotonicLimits, limits_of
from decguard_pipeline.core.properties.pairs import OriginalColumns
from decguard_pipeline.core.report import typed_records, verify
from decguard_pipeline_tests.core.properties.test_halves import _ONE_THREAD

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
        env=_ONE_THREAD,
    )
    lines = sorted(ran.stderr.splitlines())
    assert lines == ["child: pydantic False, held True", "fork: pydantic False"]
    assert ran.returncode in (0, 1)

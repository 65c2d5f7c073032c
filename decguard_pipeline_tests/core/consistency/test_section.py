"""The ``consistency`` section (core/consistency/section.py): a case with an error in any
repetition is counted and left out of every measure; the text block says so."""

from __future__ import annotations

import numpy as np
import pytest

from decguard_pipeline.core.consistency.section import consistency_section, render_consistency
from decguard_pipeline.core.contract.repeats import RepeatsSettings
from decguard_pipeline_tests.support.golden_results import make_results

A, B, C = [0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]


def test_errored_cases_are_counted_and_left_out():
    expected = [0, 1, 2, 0]
    asks = [
        make_results([A, B, C, A], expected),
        make_results([A, B, C, A], expected, errored=np.array([0, 1, 0, 0])),
        make_results([B, B, C, A], expected, errored=np.array([0, 1, 0, 0])),
    ]
    section = consistency_section(asks, RepeatsSettings(count=3, max_case_ids=5))
    assert section["errors_by_repetition"] == [0, 1, 1]
    assert section["cases_with_errors"] == 1 and section["cases_measured"] == 3
    assert section["asks"] == 12 and section["extra_asks"] == 8
    # measured: c0 (a, a, b), c2 (c, c, c), c3 (a, a, a)
    assert section["unanimous_share"] == pytest.approx(2 / 3)
    assert section["pairwise_agreement"] == pytest.approx((1 / 3 + 1 + 1) / 3)
    assert section["agreement_with_report"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert section["label_flips"] == {"a": 1, "b": 1, "c": 0}
    assert section["inconsistent_cases"] == 1 and section["inconsistent_case_ids"] == ["c0"]
    assert section["settings"] == {"count": 3, "max_case_ids": 5}
    text = render_consistency(section)
    assert "3 of 4 cases measured" in text
    assert "1 cases left out: an ask errored (errors per repetition: 0, 1, 1)" in text
    assert "1 cases changed label (label flips: a 1, b 1): c0" in text


def test_every_case_errored_gives_null_measures():
    errored = np.array([1, 1])
    asks = [make_results([A, B], [0, 1]), make_results([A, B], [0, 1], errored=errored)]
    section = consistency_section(asks, RepeatsSettings(count=2))
    assert section["cases_measured"] == 0
    assert section["unanimous_share"] is None and section["mean_tv_distance"] is None
    assert "unanimous n/a" in render_consistency(section)


def test_every_measure_is_in_the_metrics_catalog():
    from decguard_pipeline.core.consistency.section import MEASURES
    from decguard_pipeline.core.metric_catalog import CATALOG

    listed = {m.name.split(" ")[0] for m in CATALOG if m.where == "consistency"}
    assert {*MEASURES, "label_flips"} <= listed
    section = consistency_section(
        [make_results([A, B], [0, 1]), make_results([B, B], [0, 1])], RepeatsSettings(count=2)
    )
    assert set(MEASURES) <= set(section)

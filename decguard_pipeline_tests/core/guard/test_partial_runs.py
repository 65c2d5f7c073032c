"""Run states from the drop rate: the boundaries are inclusive where docs/metrics.md says so."""

from __future__ import annotations

import pytest

from decguard_pipeline.core.guard.partial_runs import NORMAL, PARTIAL, WARNING, run_state


@pytest.mark.parametrize(
    ("rate", "state"),
    [(0.0, NORMAL), (0.049, NORMAL), (0.05, WARNING), (0.2, WARNING), (0.2001, PARTIAL)],
)
def test_run_state_boundaries(rate, state):
    assert run_state(rate) == state

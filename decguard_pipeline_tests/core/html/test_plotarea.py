"""Round axis ticks (``plotarea.nice_ticks``) and where values land in a plot area."""

from __future__ import annotations

import pytest

from decguard_pipeline.core.html.plotarea import Frame, nice_ticks


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (0.0, 0.3, [0.0, 0.1, 0.2, 0.3]),
        (0.0, 0.27, [0.0, 0.1, 0.2, 0.3]),
        (1630.0, 3000.0, [1500.0, 2000.0, 2500.0, 3000.0]),
        (0.0, 0.95, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0.05, 0.95, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0.0, 12345.0, [0.0, 2500.0, 5000.0, 7500.0, 10000.0, 12500.0]),
        (0.5, 0.5, [0.44, 0.46, 0.48, 0.5, 0.52, 0.54, 0.56]),  # a tenth either side
        (0.0, 0.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    ],
)
def test_nice_ticks_cover_the_range_with_round_steps(low, high, ticks):
    assert nice_ticks(low, high) == ticks


def test_frame_maps_its_edges_and_keeps_unit_integers_integers():
    frame = Frame(left=10, top=20, width=100, height=50, x0=2.0, x1=4.0, y0=0.0, y1=10.0)
    assert (frame.x(2.0), frame.x(4.0), frame.x(3.0)) == (10, 110, 60)
    assert (frame.y(0.0), frame.y(10.0)) == (70, 20)
    unit = Frame()
    assert repr(unit.x(0)) == "52" and repr(unit.y(1)) == "34"

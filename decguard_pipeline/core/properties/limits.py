"""What judging a property's comparisons reads of its settings, free of pydantic.

The settings' models (``core.contract.properties``) and structs
(``core.contract.settings_structs``) carry the same attributes; a forked child that checks
part of a stored report's pairs (``core.report.halves``) is sent these instead, made from
the settings this process read, so that it imports neither to unpickle them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

MONOTONIC = "monotonic"


class PropertyRules(Protocol):
    """A property's per-case limits and flip rule: a settings model or :class:`Limits`."""

    @property
    def relation(self) -> str: ...

    @property
    def max_flip_rate(self) -> float | None: ...

    def tolerances(self) -> dict[str, float]: ...


def is_monotonic(config: PropertyRules) -> bool:
    """Whether ``config`` is the monotonic property's (its comparisons have level deltas)."""
    return config.relation == MONOTONIC


@dataclass(frozen=True)
class Limits:
    """A property's rules as plain values (:func:`limits_of`)."""

    relation: str
    max_flip_rate: float | None
    limits: dict[str, float]

    def tolerances(self) -> dict[str, float]:
        return dict(self.limits)


@dataclass(frozen=True)
class MonotonicLimits(Limits):
    """The monotonic property's, with its direction (only it has one: ``getattr(config,
    "direction", ...)`` tells the two apart, as it does for the models)."""

    direction: str
    max_level_decrease: float


def limits_of(config: PropertyRules) -> Limits:
    """The rules of a validated settings model, as plain values.

    >>> from decguard_pipeline.core.contract.properties import OptionOrder
    >>> limits_of(OptionOrder(max_tv_distance=0.1))
    Limits(relation='invariant', max_flip_rate=None, limits={'max_tv_distance': 0.1})
    """
    if is_monotonic(config):
        return MonotonicLimits(
            config.relation,
            config.max_flip_rate,
            config.tolerances(),
            direction=config.direction,  # type: ignore[attr-defined]
            max_level_decrease=config.max_level_decrease,  # type: ignore[attr-defined]
        )
    return Limits(config.relation, config.max_flip_rate, config.tolerances())

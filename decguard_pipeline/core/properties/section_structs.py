"""The small parts of a stored ``properties`` section (``fuzz``, ``config``, ``summaries``)
checked and normalised without pydantic: ``typed_section.checked``'s work, with the structs
of ``core.contract.settings_structs`` and :class:`Summary` in place of the models. What the
structs refuse goes to the models."""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from decguard_pipeline.core.contract.names import PropertyName
from decguard_pipeline.core.contract.settings_structs import (
    Fuzz,
    Properties,
    Strict,
    dumped,
    read,
)
from decguard_pipeline.core.properties.typed_section import normalised


class Summary(Strict, kw_only=True):
    """``properties.schema.SummaryModel``."""

    property: PropertyName
    level: str
    relation: str
    n_cases: int
    n_transformed: int
    n_skipped: int
    n_errors: int
    errors_by_kind: dict[str, int]
    n_evaluated: int
    n_violations: int
    violation_rate: float | None
    n_flips: int
    flip_rate: float | None
    mean_tv_distance: float | None
    max_tv_distance: float | None
    max_js_divergence: float | None
    max_abs_delta: float | None
    max_abs_confidence_delta: float | None
    max_level_decrease: float | None = None
    n_reduced: int


class Checked(NamedTuple):
    section: dict[str, Any]  # as ``typed_section.checked`` makes it
    config: Properties  # its settings, read


def checked(section: Any) -> Checked | None:
    """``typed_section.checked(section)`` and the section's settings, or None when the
    structs do not plainly accept its small parts."""
    fuzz = read(section.fuzz, Fuzz)
    config = read(section.config, Properties)
    summaries = read(section.summaries, list[Summary])  # type: ignore[arg-type]
    if fuzz is None or config is None or summaries is None:
        return None
    parts = (dumped(fuzz), dumped(config), msgspec.to_builtins(summaries))
    return Checked(normalised(section, *parts), config)

"""The provider-independent :class:`DecisionSpec` (made from a contract's ``decision``
section, or from a stored report's header). Free of pydantic: reading a report needs it
before, and in a process without, the models (``core.report.halves``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DecisionSpec:
    """What is asked: name, type and the canonical label order (probabilities, reports and
    tie-breaking all follow it, whatever order a backend answered in)."""

    name: str
    type: str
    labels: tuple[str, ...]
    description: str | None = None

    def with_labels(self, labels: tuple[str, ...]) -> DecisionSpec:
        return DecisionSpec(self.name, self.type, labels, self.description)

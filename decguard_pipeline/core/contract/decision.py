"""The ``decision`` section, made into the provider-independent ``DecisionSpec``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.contract.types import NAME_PATTERN
from decguard_pipeline.core.validation import Strict

DECISION_TYPES = ("choice", "noul", "score")


def _labels_are_clean(labels: tuple[str, ...]) -> tuple[str, ...]:
    for label in labels:
        if not label or label != label.strip():
            raise ValueError(f"labels must be non-empty and have no surrounding spaces: {label!r}")
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ValueError(f"duplicate labels: {repeated}")
    return labels


def _numbers_to_text(value: Any) -> Any:
    # Score levels are usually written as bare numbers in YAML (1..5); labels are strings.
    if isinstance(value, list | tuple):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


class _Decision(Strict):
    type: str
    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None

    @property
    def labels_in_order(self) -> tuple[str, ...]:
        raise NotImplementedError

    def spec(self) -> DecisionSpec:
        return DecisionSpec(self.name, self.type, self.labels_in_order, self.description)


class ChoiceDecision(_Decision):
    type: Literal["choice"]
    options: tuple[str, ...] = Field(min_length=2)

    _clean = field_validator("options")(_labels_are_clean)

    @property
    def labels_in_order(self) -> tuple[str, ...]:
        return self.options


class NoulDecision(_Decision):
    type: Literal["noul"]
    labels: tuple[str, str] = ("yes", "no")  # positive label first

    _clean = field_validator("labels")(_labels_are_clean)

    @property
    def labels_in_order(self) -> tuple[str, ...]:
        return self.labels


class ScoreDecision(_Decision):
    type: Literal["score"]
    levels: tuple[str, ...] = Field(min_length=2)  # lowest first

    _text = field_validator("levels", mode="before")(_numbers_to_text)
    _clean = field_validator("levels")(_labels_are_clean)

    @property
    def labels_in_order(self) -> tuple[str, ...]:
        return self.levels


Decision = Annotated[ChoiceDecision | NoulDecision | ScoreDecision, Field(discriminator="type")]

"""The ``properties`` (metamorphic relations) and ``fuzz`` sections."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from decguard_pipeline.core.contract.names import (
    DEFAULT_FRAGMENTS,
    LABEL_STYLES,
    LabelStyle,
    enabled_settings,
    missing_limit,
    set_tolerances,
    untrimmed_aliases,
)
from decguard_pipeline.core.contract.types import NAME_PATTERN, Level, NonNegative, Probability
from decguard_pipeline.core.validation import Strict

Fragment = Annotated[str, Field(min_length=1)]


class PropertySettings(Strict):
    """Settings every property has."""

    relation: ClassVar[str] = "invariant"
    types: ClassVar[tuple[str, ...]] = ("choice", "noul", "score")
    reducible: ClassVar[bool] = False

    enabled: bool = True
    level: Level = "requirement"
    max_flip_rate: Probability | None = None
    max_violation_rate: Probability = 0.0

    def tolerances(self) -> dict[str, float]:
        """Per-case limits that are set, in violation order."""
        return {}


class _DistributionLimits(PropertySettings):
    max_tv_distance: Probability | None = None
    max_js_divergence: Probability | None = None
    max_abs_delta: Probability | None = None
    max_confidence_delta: Probability | None = None

    @model_validator(mode="after")
    def _some_limit(self) -> _DistributionLimits:
        problem = missing_limit(self)
        if problem:
            raise ValueError(problem)
        return self

    def tolerances(self) -> dict[str, float]:
        return set_tolerances(self)


class OptionOrder(_DistributionLimits):
    types: ClassVar[tuple[str, ...]] = ("choice", "noul")
    reducible: ClassVar[bool] = True

    samples: int = Field(default=3, ge=1, le=100)


class LabelFormat(_DistributionLimits):
    reducible: ClassVar[bool] = True

    styles: tuple[LabelStyle, ...] = LABEL_STYLES
    aliases: dict[str, tuple[str, ...]] = {}
    samples: int = Field(default=2, ge=1, le=100)

    @field_validator("aliases")
    @classmethod
    def _trimmed(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        problem = untrimmed_aliases(value)
        if problem:
            raise ValueError(problem)
        return value


class IrrelevantContext(_DistributionLimits):
    reducible: ClassVar[bool] = True

    fragments: tuple[Fragment, ...] = Field(default=DEFAULT_FRAGMENTS, min_length=1)
    insertions: int = Field(default=1, ge=1, le=10)
    samples: int = Field(default=2, ge=1, le=100)


class RepeatedContext(_DistributionLimits):
    reducible: ClassVar[bool] = True

    fragments: tuple[Fragment, ...] = Field(default=DEFAULT_FRAGMENTS, min_length=1)
    repeats: int = Field(default=3, ge=2, le=20)
    samples: int = Field(default=1, ge=1, le=100)


class Whitespace(_DistributionLimits):
    reducible: ClassVar[bool] = True

    edits: int = Field(default=3, ge=1, le=20)
    samples: int = Field(default=2, ge=1, le=100)


class ParaphraseSource(BaseModel):
    """Paraphrase provider; keys besides ``provider`` are its own settings."""

    model_config = ConfigDict(extra="allow", frozen=True)

    provider: str = Field(default="identity", pattern=NAME_PATTERN)

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class Paraphrase(_DistributionLimits):
    source: ParaphraseSource = ParaphraseSource()
    samples: int = Field(default=1, ge=1, le=20)


class Rewrite(Strict):
    find: str = Field(min_length=1)
    replace: str


class Inversion(_DistributionLimits):
    relation: ClassVar[str] = "swapped"
    types: ClassVar[tuple[str, ...]] = ("noul",)

    rewrites: tuple[Rewrite, ...] = Field(min_length=1)
    samples: int = Field(default=1, ge=1, le=20)


class Monotonic(PropertySettings):
    relation: ClassVar[str] = "monotonic"
    types: ClassVar[tuple[str, ...]] = ("score",)

    field: str = Field(min_length=1)
    direction: Literal["increasing", "decreasing"] = "increasing"
    deltas: tuple[Annotated[float, Field(gt=0.0)], ...] = Field(default=(1.0,), min_length=1)
    max_level_decrease: NonNegative = 0.0

    def tolerances(self) -> dict[str, float]:
        return {"max_level_decrease": self.max_level_decrease}


AnyProperty = (
    OptionOrder
    | LabelFormat
    | IrrelevantContext
    | RepeatedContext
    | Whitespace
    | Paraphrase
    | Inversion
    | Monotonic
)


class Properties(Strict):
    """Metamorphic properties; a property is enabled by being present (and not disabled)."""

    option_order: OptionOrder | None = None
    label_format: LabelFormat | None = None
    irrelevant_context: IrrelevantContext | None = None
    repeated_context: RepeatedContext | None = None
    whitespace: Whitespace | None = None
    paraphrase: Paraphrase | None = None
    inversion: Inversion | None = None
    monotonic: Monotonic | None = None

    def enabled(self) -> dict[str, AnyProperty]:
        """Enabled properties in the fixed property order."""
        return enabled_settings(self)


class Fuzz(Strict):
    seed: int = Field(default=0, ge=0, lt=2**63)
    text_field: str | None = None
    minimize: bool = True
    max_minimize_calls: int = Field(default=32, ge=0, le=1000)

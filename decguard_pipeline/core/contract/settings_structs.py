"""A contract's ``properties``, ``fuzz``, ``evaluation`` and golden gates settings as msgspec
structs: the models of :mod:`properties`, :mod:`evaluation` and :mod:`gates`, read without
pydantic.

``report`` checks a big stored report without importing pydantic (its import and the
models' first build are 0.15-0.2 s of the command's CPU). These structs accept part of what
the models accept, JSON's own types only (no numeric strings, no integral floats for
integers, no ``"yes"`` for true), and give the same values, the same methods and the same
normalised dict (:func:`dumped`, the models' ``model_dump(mode="json")``). What they refuse
goes to the models, which accept it or say what is wrong. A differential test holds them to
the models.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from decguard_pipeline.core.contract.names import (
    DEFAULT_FRAGMENTS,
    LABEL_STYLES,
    LabelStyle,
    enabled_settings,
    missing_limit,
    set_gates,
    set_tolerances,
    untrimmed_aliases,
)

# pydantic's patterns are Rust's, whose ``$`` is the end of the text: Python's ``\Z``
NAME = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")]
Probability = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
NonNegative = Annotated[float, msgspec.Meta(ge=0.0)]
Level = Literal["requirement", "warning"]
Fragments = Annotated[list[Annotated[str, msgspec.Meta(min_length=1)]], msgspec.Meta(min_length=1)]


def _count(low: int, high: int) -> Any:
    return Annotated[int, msgspec.Meta(ge=low, le=high)]


class Strict(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A settings struct: a misspelt key is refused, as the models refuse it."""


class PropertySettingsStruct(Strict, kw_only=True):
    relation: ClassVar[str] = "invariant"
    types: ClassVar[tuple[str, ...]] = ("choice", "noul", "score")
    reducible: ClassVar[bool] = False

    enabled: bool = True
    level: Level = "requirement"
    max_flip_rate: Probability | None = None
    max_violation_rate: Probability = 0.0

    def tolerances(self) -> dict[str, float]:
        return {}


class _DistributionLimits(PropertySettingsStruct, kw_only=True):
    max_tv_distance: Probability | None = None
    max_js_divergence: Probability | None = None
    max_abs_delta: Probability | None = None
    max_confidence_delta: Probability | None = None

    def __post_init__(self) -> None:
        problem = missing_limit(self)
        if problem:
            raise ValueError(problem)

    def tolerances(self) -> dict[str, float]:
        return set_tolerances(self)


class OptionOrder(_DistributionLimits, kw_only=True):
    types: ClassVar[tuple[str, ...]] = ("choice", "noul")
    reducible: ClassVar[bool] = True

    samples: _count(1, 100) = 3  # type: ignore[valid-type]


class LabelFormat(_DistributionLimits, kw_only=True):
    reducible: ClassVar[bool] = True

    styles: list[LabelStyle] = msgspec.field(default_factory=lambda: list(LABEL_STYLES))
    aliases: dict[str, list[str]] = {}
    samples: _count(1, 100) = 2  # type: ignore[valid-type]

    def __post_init__(self) -> None:
        problem = untrimmed_aliases(self.aliases)
        if problem:
            raise ValueError(problem)
        super().__post_init__()


class IrrelevantContext(_DistributionLimits, kw_only=True):
    reducible: ClassVar[bool] = True

    fragments: Fragments = msgspec.field(default_factory=lambda: list(DEFAULT_FRAGMENTS))
    insertions: _count(1, 10) = 1  # type: ignore[valid-type]
    samples: _count(1, 100) = 2  # type: ignore[valid-type]


class RepeatedContext(_DistributionLimits, kw_only=True):
    reducible: ClassVar[bool] = True

    fragments: Fragments = msgspec.field(default_factory=lambda: list(DEFAULT_FRAGMENTS))
    repeats: _count(2, 20) = 3  # type: ignore[valid-type]
    samples: _count(1, 100) = 1  # type: ignore[valid-type]


class Whitespace(_DistributionLimits, kw_only=True):
    reducible: ClassVar[bool] = True

    edits: _count(1, 20) = 3  # type: ignore[valid-type]
    samples: _count(1, 100) = 2  # type: ignore[valid-type]


class Paraphrase(_DistributionLimits, kw_only=True):
    # the provider and its own settings, as the model keeps them: ``provider`` first
    source: dict[str, Any] = msgspec.field(default_factory=lambda: {"provider": "identity"})
    samples: _count(1, 20) = 1  # type: ignore[valid-type]

    def __post_init__(self) -> None:
        provider = msgspec.convert(self.source.get("provider", "identity"), NAME)
        self.source = {"provider": provider, **self.source}
        super().__post_init__()


class Rewrite(Strict, kw_only=True):
    find: Annotated[str, msgspec.Meta(min_length=1)]
    replace: str


class Inversion(_DistributionLimits, kw_only=True):
    relation: ClassVar[str] = "swapped"
    types: ClassVar[tuple[str, ...]] = ("noul",)

    rewrites: Annotated[list[Rewrite], msgspec.Meta(min_length=1)]
    samples: _count(1, 20) = 1  # type: ignore[valid-type]


class Monotonic(PropertySettingsStruct, kw_only=True):
    relation: ClassVar[str] = "monotonic"
    types: ClassVar[tuple[str, ...]] = ("score",)

    field: Annotated[str, msgspec.Meta(min_length=1)]
    direction: Literal["increasing", "decreasing"] = "increasing"
    deltas: Annotated[list[Annotated[float, msgspec.Meta(gt=0.0)]], msgspec.Meta(min_length=1)] = (
        msgspec.field(default_factory=lambda: [1.0])
    )
    max_level_decrease: NonNegative = 0.0

    def tolerances(self) -> dict[str, float]:
        return {"max_level_decrease": self.max_level_decrease}


class Properties(Strict, kw_only=True):
    option_order: OptionOrder | None = None
    label_format: LabelFormat | None = None
    irrelevant_context: IrrelevantContext | None = None
    repeated_context: RepeatedContext | None = None
    whitespace: Whitespace | None = None
    paraphrase: Paraphrase | None = None
    inversion: Inversion | None = None
    monotonic: Monotonic | None = None

    def enabled(self) -> dict[str, PropertySettingsStruct]:
        """Enabled properties in the fixed property order."""
        return enabled_settings(self)


class Fuzz(Strict, kw_only=True):
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] = 0
    text_field: str | None = None
    minimize: bool = True
    max_minimize_calls: _count(0, 1000) = 32  # type: ignore[valid-type]


class Evaluation(Strict, kw_only=True):
    confidence_threshold: Probability | None = None
    calibration_bins: _count(1, 1000) = 10  # type: ignore[valid-type]
    probability_tolerance: Annotated[float, msgspec.Meta(gt=0.0, le=0.1)] = 1e-3
    max_concurrency: _count(1, 256) = 4  # type: ignore[valid-type]


class Gates(Strict, kw_only=True):
    min_accuracy: Probability | None = None
    min_macro_f1: Probability | None = None
    max_nll: NonNegative | None = None
    max_brier: Annotated[float, msgspec.Meta(ge=0.0, le=2.0)] | None = None
    max_ece: Probability | None = None
    min_coverage: Probability | None = None
    max_abstention_rate: Probability | None = None
    min_selective_accuracy: Probability | None = None
    max_error_rate: Probability | None = None
    max_latency_p95_ms: NonNegative | None = None
    max_ordinal_mae: NonNegative | None = None

    def configured(self) -> dict[str, float]:
        """The gates that are set, in field order."""
        return set_gates(self, self.__struct_fields__)


def read(value: Any, kind: type[msgspec.Struct]) -> Any:
    """``value`` (plain JSON values) as ``kind``, or None when it is not plainly that."""
    try:
        return msgspec.convert(value, kind, strict=True)
    except (msgspec.ValidationError, RecursionError):
        return None


def dumped(struct: msgspec.Struct) -> dict[str, Any]:
    """``struct`` as its model's ``model_dump(mode="json")``: every field, in order."""
    return msgspec.to_builtins(struct)  # type: ignore[no-any-return]

"""The Decision Contract, schema 0.1."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from decguard_pipeline.core.contract.decision import Decision
from decguard_pipeline.core.contract.evaluation import Evaluation
from decguard_pipeline.core.contract.extensions import PipelineSection
from decguard_pipeline.core.contract.gates import Gates, Production, Regression
from decguard_pipeline.core.contract.policy import Policy
from decguard_pipeline.core.contract.properties import Fuzz, Properties
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.contract.types import NAME_PATTERN, Name
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.core.validation import Strict

SCHEMA_VERSION = "0.1"
DEFAULT_BACKEND = "default"
_NEEDS_THRESHOLD = ("min_coverage", "max_abstention_rate", "min_selective_accuracy")


class BackendConfig(BaseModel):
    """A backend: ``provider``, optional ``model``; every other key is a provider setting."""

    model_config = ConfigDict(extra="allow", frozen=True)

    provider: str = Field(pattern=NAME_PATTERN)
    model: str | None = None

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class Contract(Strict):
    schema_version: str
    decision: Decision
    backend: BackendConfig
    backends: dict[Name, BackendConfig] = {}
    dataset: str | None = None
    evaluation: Evaluation = Evaluation()
    requirements: Gates = Gates()
    warnings: Gates = Gates()
    properties: Properties = Properties()
    fuzz: Fuzz = Fuzz()
    regression: Regression = Regression()
    production: Production = Production()
    policy: Policy | None = None
    # decguard_pipeline extensions (absent in DecGuard contracts; see extensions.py)
    pipeline: PipelineSection | None = None

    @field_validator("schema_version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError(
                f'must be a string such as "{SCHEMA_VERSION}" (quote it in YAML), got {value!r}'
            )
        if value != SCHEMA_VERSION:
            raise ValueError(
                f"unsupported schema_version {value!r}; this DecGuard supports {SCHEMA_VERSION!r}"
            )
        return value

    @field_validator("backends")
    @classmethod
    def _default_is_reserved(cls, value: dict[str, BackendConfig]) -> dict[str, BackendConfig]:
        if DEFAULT_BACKEND in value:
            raise ValueError(f"{DEFAULT_BACKEND!r} is reserved for the top-level 'backend'")
        return value

    @model_validator(mode="after")
    def _gates_fit_decision(self) -> Contract:
        for section in ("requirements", "warnings"):
            configured = getattr(self, section).configured()
            if self.evaluation.confidence_threshold is None:
                needing = [gate for gate in _NEEDS_THRESHOLD if gate in configured]
                if needing:
                    raise ValueError(
                        f"{section}.{needing[0]} needs evaluation.confidence_threshold to be set"
                    )
            if "max_ordinal_mae" in configured and self.decision.type != "score":
                raise ValueError(f"{section}.max_ordinal_mae only applies to score decisions")
        return self

    @model_validator(mode="after")
    def _properties_fit_decision(self) -> Contract:
        for name, config in self.properties.enabled().items():
            if self.decision.type not in config.types:
                raise ValueError(
                    f"properties.{name} applies to {' and '.join(config.types)} decisions, "
                    f"not {self.decision.type}"
                )
        label_format = self.properties.label_format
        if label_format is not None:
            unknown = sorted(set(label_format.aliases) - set(self.labels))
            if unknown:
                raise ValueError(f"properties.label_format.aliases: unknown labels {unknown}")
        return self

    @model_validator(mode="after")
    def _production_threshold(self) -> Contract:
        p = self.production
        sections = (p.requirements, p.warnings, p.segment_requirements, p.segment_warnings)
        if self.evaluation.confidence_threshold is None and any(
            "min_threshold_coverage" in s.configured() for s in sections
        ):
            raise ValueError(
                "production min_threshold_coverage needs evaluation.confidence_threshold to be set"
            )
        return self

    @model_validator(mode="after")
    def _policy_backends_exist(self) -> Contract:
        if self.policy is None:
            return self
        names = self.backend_names()
        for index, route in enumerate(self.policy.routes):
            if route.backend is not None and route.backend not in names:
                raise ValueError(
                    f"policy.routes.{index}.backend: unknown backend {route.backend!r}; "
                    f"the contract defines: {', '.join(names)}"
                )
        return self

    @property
    def labels(self) -> tuple[str, ...]:
        return self.decision.labels_in_order

    def spec(self) -> DecisionSpec:
        return self.decision.spec()

    def backend_names(self) -> list[str]:
        return [DEFAULT_BACKEND, *self.backends]

    def backend_config(self, name: str | None = None) -> BackendConfig:
        if name is None or name == DEFAULT_BACKEND:
            return self.backend
        if name not in self.backends:
            raise ContractError(
                f"unknown backend {name!r}; the contract defines: {', '.join(self.backend_names())}"
            )
        return self.backends[name]

"""Decision Contracts (schema 0.1): models, loading and hashing.

The names below are imported from their modules when first used (PEP 562): a command that
reads a stored report needs the report header's models (``Evaluation``, ``Gates``), not the
whole contract's, its YAML loader or its extension sections."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decguard_pipeline.core.contract.decision import DECISION_TYPES
    from decguard_pipeline.core.contract.evaluation import Evaluation
    from decguard_pipeline.core.contract.gates import (
        Gates,
        Production,
        ProductionGates,
        Regression,
        RegressionGates,
        SegmentGates,
    )
    from decguard_pipeline.core.contract.loader import (
        LoadedContract,
        contract_hash,
        load_contract,
        parse_contract,
        parse_text,
    )
    from decguard_pipeline.core.contract.model import (
        DEFAULT_BACKEND,
        SCHEMA_VERSION,
        BackendConfig,
        Contract,
    )
    from decguard_pipeline.core.contract.names import PROPERTY_NAMES
    from decguard_pipeline.core.contract.policy import Policy, Route
    from decguard_pipeline.core.contract.properties import Fuzz, Properties, PropertySettings
    from decguard_pipeline.core.contract.spec import DecisionSpec


_HOMES = {
    "decision": ("DECISION_TYPES",),
    "evaluation": ("Evaluation",),
    "gates": (
        "Gates", "Production", "ProductionGates", "Regression", "RegressionGates", "SegmentGates",
    ),
    "loader": ("LoadedContract", "contract_hash", "load_contract", "parse_contract", "parse_text"),
    "model": ("DEFAULT_BACKEND", "SCHEMA_VERSION", "BackendConfig", "Contract"),
    "policy": ("Policy", "Route"),
    "names": ("PROPERTY_NAMES",),
    "properties": ("Fuzz", "Properties", "PropertySettings"),
    "spec": ("DecisionSpec",),
}  # fmt: skip
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "DECISION_TYPES",
    "DEFAULT_BACKEND",
    "PROPERTY_NAMES",
    "SCHEMA_VERSION",
    "BackendConfig",
    "Contract",
    "DecisionSpec",
    "Evaluation",
    "Fuzz",
    "Gates",
    "LoadedContract",
    "Policy",
    "Production",
    "ProductionGates",
    "Properties",
    "PropertySettings",
    "Regression",
    "RegressionGates",
    "Route",
    "SegmentGates",
    "contract_hash",
    "load_contract",
    "parse_contract",
    "parse_text",
]


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

"""Decision Contracts (schema 0.1): models, loading and hashing."""

from decguard_pipeline.core.contract.decision import DECISION_TYPES, DecisionSpec
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
    Evaluation,
)
from decguard_pipeline.core.contract.policy import Policy, Route
from decguard_pipeline.core.contract.properties import (
    PROPERTY_NAMES,
    Fuzz,
    Properties,
    PropertySettings,
)

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

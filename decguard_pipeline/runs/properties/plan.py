"""Which properties run with which settings, and the transformed cases they generate
(DecGuard §9.2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.contract.decision import DecisionSpec
from decguard_pipeline.core.contract.properties import AnyProperty, Fuzz, Properties
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.errors import BackendError, ContractError, DecGuardError
from decguard_pipeline.core.properties.pairs import pair_id, skip_doc
from decguard_pipeline.core.properties.rng import case_stream
from decguard_pipeline.core.properties.transforms import (
    Mutation,
    NotApplicable,
    Transform,
    make_transform,
)
from decguard_pipeline.runs.properties.paraphrase import Paraphraser


@dataclass(frozen=True)
class PropertyPlan:
    """Effective ``fuzz`` settings (CLI overrides applied) and the properties to run.

    ``config`` is what the report stores as ``properties.config``: the contract's whole
    section, or only the properties named with ``--property``."""

    fuzz: Fuzz
    config: Properties

    @property
    def seed(self) -> int:
        return self.fuzz.seed

    @property
    def enabled(self) -> dict[str, AnyProperty]:
        return self.config.enabled()

    @property
    def minimizes(self) -> bool:
        return self.fuzz.minimize and self.fuzz.max_minimize_calls > 0


def select_properties(properties: Properties, only: Sequence[str] | None) -> Properties:
    enabled = properties.enabled()
    if only:
        unknown = [name for name in only if name not in enabled]
        if unknown:
            raise ContractError(
                f"property {unknown[0]!r} is not enabled in the contract; enabled: "
                + (", ".join(enabled) or "none")
            )
        properties = Properties(**{name: getattr(properties, name) for name in only})
    if not properties.enabled():
        raise ContractError("the contract enables no properties; add a 'properties' section")
    return properties


def plan_properties(
    loaded: LoadedContract,
    properties: Sequence[str] | None,
    *,
    seed: int | None,
    minimize: bool | None,
) -> PropertyPlan:
    """Check the selection before any backend call and fix the effective settings."""
    contract = loaded.contract
    config = select_properties(contract.properties, properties)
    updates: dict[str, Any] = {}
    if seed is not None:
        updates["seed"] = seed
    if minimize is not None:
        updates["minimize"] = minimize
    return PropertyPlan(contract.fuzz.model_copy(update=updates), config)


def build_transforms(
    plan: PropertyPlan, spec: DecisionSpec, paraphraser: Paraphraser | None
) -> dict[str, Transform]:
    transforms = {}
    for name, config in plan.enabled.items():
        if name == "paraphrase":
            assert paraphraser is not None
            transforms[name] = make_transform(
                name, config, spec, plan.fuzz,
                paraphrase=lambda text, case_id, n, seed: paraphraser.paraphrase(
                    text, case_id=case_id, n=n, seed=seed
                ),
                provenance=paraphraser.provenance,
                provider=paraphraser.provider,
            )  # fmt: skip
        else:
            transforms[name] = make_transform(name, config, spec, plan.fuzz)
    return transforms


@dataclass
class Planned:
    """One transformed case to evaluate: a mutation, or the error that prevented one."""

    property: str
    row: int  # dataset row of the original case
    case_id: str
    sample: int
    mutation: Mutation | None
    error: tuple[str, str] | None = None  # (kind, message) raised while generating

    @property
    def id(self) -> str:
        return pair_id(self.property, self.case_id, self.sample)


def _generation_error(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, BackendError):  # e.g. the paraphrase provider failed for this case
        return exc.kind, str(exc)
    if isinstance(exc, DecGuardError):
        raise exc  # configuration problems abort the run
    return "exception", f"{type(exc).__name__}: {exc}"  # a buggy plugin must not drop cases


def generate_pairs(
    plan: PropertyPlan,
    transforms: dict[str, Transform],
    case_ids: Sequence[str],
    inputs: Sequence[DecisionInput],
) -> tuple[list[Planned], list[dict[str, str]]]:
    """Every (property, case) in fixed property order and dataset order: its distinct
    mutations, one errored pair, or a skip with its reason."""
    planned: list[Planned] = []
    skipped: list[dict[str, str]] = []
    for name, transform in transforms.items():
        for row, (case_id, original) in enumerate(zip(case_ids, inputs, strict=True)):
            try:
                mutations = transform.generate(
                    case_id, original, case_stream(plan.seed, name, case_id)
                )
            except NotApplicable as exc:
                skipped.append(skip_doc(name, case_id, str(exc)))
                continue
            except Exception as exc:
                planned.append(Planned(name, row, case_id, 0, None, _generation_error(exc)))
                continue
            planned.extend(
                Planned(name, row, case_id, k, mutation) for k, mutation in enumerate(mutations)
            )
    return planned, skipped

"""Which properties run with which settings, and the transformed cases they generate
(DecGuard §9.2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.contract.properties import AnyProperty, Fuzz, Properties
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.errors import BackendError, ContractError, DecGuardError
from decguard_pipeline.core.properties import bulk
from decguard_pipeline.core.properties.pairs import skip_doc
from decguard_pipeline.core.properties.transform import Presentation, Steps, Transform
from decguard_pipeline.core.properties.transforms import NotApplicable, make_transform
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
class PlannedPairs:
    """The transformed cases to evaluate, column-wise, in fixed property order and dataset
    order: pair ``i`` is sample ``sample[i]`` of case ``row[i]`` for ``property[i]``, with
    its mutation, or the error (kind, message) that prevented one (then its steps are
    empty, its input is the original and it has no presentation)."""

    id: list[str] = field(default_factory=list)  # ``<property>/<case id>/<sample>``
    property: list[str] = field(default_factory=list)
    row: list[int] = field(default_factory=list)  # dataset row of the original case
    case_id: list[str] = field(default_factory=list)
    sample: list[int] = field(default_factory=list)
    steps: list[Steps] = field(default_factory=list)
    input: list[DecisionInput] = field(default_factory=list)
    presentation: list[Presentation | None] = field(default_factory=list)
    provenance: list[dict[str, Any]] = field(default_factory=list)
    error: list[tuple[str, str] | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.property)


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
) -> tuple[PlannedPairs, list[dict[str, str]]]:
    """Every (property, case) in fixed property order and dataset order: its distinct
    mutations, one errored pair, or a skip with its reason."""
    out = PlannedPairs()
    skipped: list[dict[str, str]] = []
    for name, transform in transforms.items():
        entries: list[tuple[int, list[Any]]] = []  # (dataset row, its transformations)
        errors: dict[int, tuple[str, str]] = {}  # dataset row -> error (kind, message)
        for row, generated in bulk.generate_all(transform, plan.seed, case_ids, inputs):
            if isinstance(generated, NotApplicable):
                skipped.append(skip_doc(name, case_ids[row], str(generated)))
            elif isinstance(generated, Exception):
                errors[row] = _generation_error(generated)
                entries.append((row, [((), inputs[row], None, {})]))  # one errored pair
            else:
                entries.append((row, generated))
        # the property's pairs, column by column
        rows = [row for row, generated in entries for _ in generated]
        samples = [k for _, generated in entries for k in range(len(generated))]
        cases = [case_ids[row] for row in rows]
        # pair ids (``pair_id``), written out: one f-string per pair
        out.id.extend([f"{name}/{case}/{k}" for case, k in zip(cases, samples, strict=True)])
        out.property.extend([name] * len(rows))
        out.row.extend(rows)
        out.case_id.extend(cases)
        out.sample.extend(samples)
        flat = [item for _, generated in entries for item in generated]
        if flat:
            steps, values, shown, provenance = zip(*flat, strict=True)
            out.steps.extend(steps)
            out.input.extend(values)
            out.presentation.extend(shown)
            out.provenance.extend(provenance)
        out.error.extend([errors.get(row) for row in rows] if errors else [None] * len(rows))
    return out, skipped

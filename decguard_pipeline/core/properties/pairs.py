"""Documents of the report's ``properties`` section (DecGuard §9.6), as JSON-ready dicts in
DecGuard's field order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.properties.compare import Comparisons, compare, direction_of
from decguard_pipeline.core.properties.limits import PropertyRules
from decguard_pipeline.core.results import CaseResults

if TYPE_CHECKING:  # the transformations (and their hashing RNG) only where they are made
    from decguard_pipeline.core.contract.properties import Fuzz, Properties
    from decguard_pipeline.core.properties.transform import Presentation, Steps


def pair_id(property_name: str, case_id: str, sample: int) -> str:
    """``<property>/<case id>/<sample>``: also the ``case_id`` of the transformed request."""
    return f"{property_name}/{case_id}/{sample}"


def presentation_doc(presentation: Presentation | None) -> list[list[str]] | None:
    return None if presentation is None else [[shown, label] for shown, label in presentation]


def pair_doc(
    *,
    property_name: str,
    case_id: str,
    sample: int,
    steps: Steps,
    provenance: dict[str, Any],
    value: DecisionInput,
    presentation: Presentation | None,
    result: dict[str, Any] | None = None,
    error: dict[str, str] | None = None,
    comparison: dict[str, Any] | None = None,
    violations: list[str] | None = None,
    reduced: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": pair_id(property_name, case_id, sample),
        "property": property_name,
        "case_id": case_id,
        "sample": sample,
        "steps": list(steps),
        "provenance": provenance,
        "input": value,
        "presentation": presentation_doc(presentation),
        "result": result,
        "error": error,
        "comparison": comparison,
        "violations": violations or [],
        "reduced": reduced,
    }


def reduced_doc(
    steps: Steps,
    value: DecisionInput,
    presentation: Presentation | None,
    result: dict[str, Any],
    comparison: dict[str, Any],
    violations: list[str],
    backend_calls: int,
) -> dict[str, Any]:
    return {
        "steps": list(steps),
        "input": value,
        "presentation": presentation_doc(presentation),
        "result": result,
        "comparison": comparison,
        "violations": violations,
        "backend_calls": backend_calls,
    }


def skip_doc(property_name: str, case_id: str, reason: str) -> dict[str, str]:
    return {"property": property_name, "case_id": case_id, "reason": reason}


def error_doc(kind: str, message: str) -> dict[str, str]:
    return {"kind": kind, "message": message}


def section_doc(
    seed: int,
    fuzz: Fuzz,
    config: Properties,
    summaries: list[dict[str, Any]],
    pairs: list[dict[str, Any]],
    skipped: list[dict[str, str]],
) -> dict[str, Any]:
    return {
        "seed": seed,
        "fuzz": fuzz.model_dump(mode="json"),
        "config": config.model_dump(mode="json"),
        "summaries": summaries,
        "pairs": pairs,
        "skipped": skipped,
    }


def result_probabilities(results: list[dict[str, Any]], k: int) -> np.ndarray:
    """``(m, k)`` matrix of stored DecisionResults (probabilities are in canonical order)."""
    out = np.empty((len(results), k))
    for row, result in enumerate(results):
        out[row] = [float(v) for v in result["probabilities"].values()]
    return out


@dataclass(frozen=True)
class OriginalColumns:
    """The columns of a report's results (its original cases) that checking its pairs
    reads, as ``CaseResults`` names them: what a child checking a share of the pairs is
    sent (``core.report.halves``), a fraction of the whole results."""

    spec: DecisionSpec
    backend: str
    provider: str
    case_ids: list[str]
    probs: np.ndarray
    selected: np.ndarray

    @property
    def labels(self) -> tuple[str, ...]:
        return self.spec.labels

    @classmethod
    def of(cls, results: CaseResults) -> OriginalColumns:
        return cls(
            results.spec, results.backend, results.provider, results.case_ids, results.probs,
            results.selected,
        )  # fmt: skip


def compare_with_originals(
    config: PropertyRules,
    originals: CaseResults | OriginalColumns,
    rows: list[int],
    after: np.ndarray,
) -> Comparisons:
    """Compare transformed decisions with the original decisions of dataset ``rows``."""
    index = np.asarray(rows, dtype=np.int64)
    return compare(
        originals.probs[index],
        after,
        originals.selected[index],
        originals.labels,
        relation=config.relation,
        direction=direction_of(config),
        score=originals.spec.type == "score",
    )

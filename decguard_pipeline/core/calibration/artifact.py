"""``calibrator.json``: a fitted calibrator as a file, and the rules for applying one.

The document (``calibrator_version`` 0.1) records what was fitted (``method``,
``parameters``, the ``logits`` it reads), for which decision (``contract``: name, labels,
hash) and which model (``target`` = ``<backend>@<model_version>``, and ``backend``: name,
provider, model, model version), on which data (``data``: the split, the dataset and its hash,
the number of calibration cases and a sha256 of exactly what was fitted on), how ``auto``
chose (``selection``), the conformal threshold (``conformal``), the suggested
``abstain_below`` and the held-out before/after numbers. It carries no timestamp: fitting the
same answers again writes the same bytes.

A calibrator is a fact about one model version: :func:`check_target` refuses to apply it to
decisions of another backend, model version or label set (``CalibratorError``, exit 2). A
backend that reports no model version is matched on its model name.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from decguard_pipeline.core.calibration.calibrators import Calibrator
from decguard_pipeline.core.calibration.logits import SOURCES
from decguard_pipeline.core.errors import CalibratorError
from decguard_pipeline.core.validation import format_errors

VERSION = "0.1"
UNVERSIONED = "unversioned"


def target_of(backend: str, model_version: str | None, model: str | None = None) -> str:
    """``<backend>@<model_version>``; an unversioned model is named by its model name, as the
    pipeline's targets name it."""
    return f"{backend}@{model_version or model or UNVERSIONED}"


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class BackendIdentity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    provider: str
    model: str | None = None
    model_version: str | None = None


class ContractIdentity(_Loose):
    name: str
    labels: tuple[str, ...] = Field(min_length=1)
    hash: str | None = None


class ConformalThreshold(_Loose):
    method: Literal["lac", "aps"]
    alpha: float = Field(gt=0.0, lt=1.0)
    q_hat: float | None  # null: +inf (too few calibration cases: every label in every set)
    n_calibration: int = Field(ge=0)
    route: Literal["accept", "abstain", "fallback", "human_review"] | None = None
    backend: str | None = None


class CalibratorDocument(_Loose):
    calibrator_version: Literal["0.1"]
    contract: ContractIdentity
    target: str
    backend: BackendIdentity
    method: Literal["temperature", "vector", "isotonic", "histogram"]
    parameters: dict[str, Any]
    logits: Literal["backend_logprobs", "log_probabilities"]
    conformal: ConformalThreshold | None = None


@dataclass(frozen=True)
class LoadedCalibrator:
    """A verified ``calibrator.json``: the document, its calibrator and where it came from."""

    path: str
    document: dict[str, Any]
    calibrator: Calibrator
    labels: tuple[str, ...]
    backend: BackendIdentity
    logits: str
    conformal: ConformalThreshold | None

    @property
    def target(self) -> str:
        return str(self.document["target"])

    @property
    def method(self) -> str:
        return self.calibrator.method

    def note(self) -> dict[str, Any]:
        """Who calibrated a decision: what a result's metadata and a report say."""
        return {"method": self.method, "target": self.target, "file": self.path}


def _parameters_problem(document: CalibratorDocument) -> str | None:
    """Why ``parameters`` cannot be applied to the labels, or None."""
    k = len(document.contract.labels)
    p = document.parameters

    def numbers(value: Any, n: int | None = None) -> bool:
        ok = isinstance(value, list) and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in value
        )
        return ok and (n is None or len(value) == n)

    if document.method == "temperature":
        t = p.get("temperature")
        if not (isinstance(t, int | float) and not isinstance(t, bool) and 0 < t < math.inf):
            return "temperature must be a positive number"
    elif document.method == "vector":
        if not numbers(p.get("scale"), k) or not numbers(p.get("bias"), k):
            return f"scale and bias must be {k} numbers each (one per label)"
    elif document.method == "isotonic":
        xs, ys = p.get("thresholds"), p.get("values")
        if not (isinstance(xs, list) and isinstance(ys, list) and len(xs) == len(ys) == k):
            return f"thresholds and values must hold one list per label ({k})"
        for x, y in zip(xs, ys, strict=True):
            if not numbers(x) or not numbers(y, len(x)) or not x or sorted(x) != x:
                return "each label's thresholds must be ascending numbers, one value each"
    elif document.method == "histogram":
        values = p.get("values")
        if not (isinstance(values, list) and len(values) == k and values):
            return f"values must hold one list per label ({k})"
        bins = len(values[0])
        if not bins or not all(numbers(row, bins) for row in values):
            return "values must be one list of numbers per label, all of one length"
    return None


def load_calibrator(path: str | Path) -> LoadedCalibrator:
    """Read and check a ``calibrator.json``; ``CalibratorError`` naming the file and field."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CalibratorError(f"{path}: cannot read calibrator: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise CalibratorError(f"{path}: not a calibrator file: invalid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise CalibratorError(f"{path}: not a calibrator file: expected a JSON object")
    try:
        document = CalibratorDocument.model_validate(raw)
    except ValidationError as exc:
        raise CalibratorError(
            f"{path}: invalid calibrator:\n" + format_errors(exc, prefix="")
        ) from exc
    problem = _parameters_problem(document)
    if problem is not None:
        raise CalibratorError(f"{path}: invalid calibrator:\n  parameters: {problem}")
    return LoadedCalibrator(
        path=str(path),
        document=raw,
        calibrator=Calibrator(document.method, dict(document.parameters)),
        labels=document.contract.labels,
        backend=document.backend,
        logits=document.logits,
        conformal=document.conformal,
    )


def check_labels(calibrator: LoadedCalibrator, labels: Iterable[str]) -> None:
    labels = tuple(labels)
    if labels != calibrator.labels:
        raise CalibratorError(
            f"{calibrator.path}: calibrator was fitted on labels {list(calibrator.labels)},"
            f" this decision has {list(labels)}"
        )


def check_target(
    calibrator: LoadedCalibrator,
    *,
    backend: str,
    model_versions: Iterable[str | None],
    model: str | None,
) -> None:
    """Refuse decisions of another backend or model version (``model_versions``: every
    version the decisions report). A calibrator of an unversioned model applies only to
    unversioned decisions of the same model name."""
    fitted = calibrator.backend
    where = f"{calibrator.path}: calibrator for {calibrator.target}"
    if backend != fitted.name:
        raise CalibratorError(
            f"{where} cannot calibrate backend {backend!r}: it was fitted on backend"
            f" {fitted.name!r}'s answers"
        )
    versions = set(model_versions)
    other = sorted(str(v) for v in versions if v is not None and v != fitted.model_version)
    if other:
        raise CalibratorError(
            f"{where} cannot calibrate model version {', '.join(other)}: a calibrator is"
            f" fitted on one model version's answers; fit one for this version with"
            f" `decguard-pipeline calibrate`"
        )
    if None in versions and fitted.model_version is not None:
        raise CalibratorError(
            f"{where} cannot calibrate answers without a model version: nothing says they"
            f" are {fitted.model_version}'s"
        )
    if fitted.model_version is None and model != fitted.model:
        raise CalibratorError(
            f"{where} (model {fitted.model!r}, no model version) cannot calibrate model {model!r}"
        )


def describe_logits(source: str) -> str:
    return SOURCES[source]

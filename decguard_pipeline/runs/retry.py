"""``--retry-errors REPORT``: the answers a stored report already holds, so that a run asks
only the cases that errored in it and writes a complete new report.

The report is loaded and verified as ``decguard report`` verifies it; it must be for the
same decision, the same backend (name and provider) and the same dataset (its ``sha256``)
as the run, and its answers must have been made with everything that keys the response
cache as this run's backend has it (provider, model, every setting that changes answers,
the decision: ``Identity.fingerprint``, recorded in the report's sidecar as
``answered_with``; a report without one must be of this very contract, by its hash), else
the run stops with exit 2 before asking anything, naming what differs. Its decided results are
replayed as the model gave them (probabilities, model, version, latency, metadata; from a
report whose decisions a calibrator made, the raw answers its notes kept): golden results by
case id, property pairs by pair id, each only for the very request it answered
(same input, same options shown). Errored results are asked again; so is anything the report
cannot answer (a minimisation search of a property run, whose intermediate answers no report
keeps; with ``--cache`` those come from the cache).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from decguard_pipeline.core.cache.answers import Hits
from decguard_pipeline.core.cache.key import (
    ANSWERED_WITH,
    fingerprint_differences,
    input_bytes,
)
from decguard_pipeline.core.calibration.notes import raw_answer
from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.decision import DecisionInput, DecisionRequest
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.sidecar import sidecar_path
from decguard_pipeline.core.report.verify import load_report

NAN = float("nan")


def file_hash(path: Path) -> str:
    """DecGuard's dataset hash: ``sha256:`` of the file's bytes."""
    with path.open("rb") as handle:
        return "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()


class ReportAnswers:
    """The decided results of a stored report, as answers to replay."""

    name = "report"

    def __init__(
        self,
        path: str | Path,
        report: Report,
        inputs: dict[str, DecisionInput],
        answered_with: dict[str, Any] | None = None,
    ):
        """``inputs``: the dataset's input per case id (the report's results carry none; the
        dataset is the report's, its hash was checked); ``answered_with``: the fingerprint
        of the backend that answered it, from its sidecar (None: not recorded)."""
        self.path = str(path)
        self.answered_with = answered_with
        self.contract_hash = report.document["contract"]["hash"]
        labels = report.results.labels
        self.labels = labels
        # request id -> (input, labels shown, probabilities in shown order, result fields)
        self._answers: dict[str, tuple[bytes, tuple[str, ...], list[float], tuple[Any, ...]]]
        self._answers = {}
        results = report.results
        probs = results.probs.tolist()
        for i, case_id in enumerate(results.case_ids):
            if results.selected[i] < 0 or case_id not in inputs:
                continue
            # a calibrated report: the backend's own answer, as its note kept it
            values, metadata = raw_answer(probs[i], results.result_metadata[i], labels)
            self._answers[case_id] = (
                input_bytes(inputs[case_id]),
                labels,
                values,
                (float(results.latency_ms[i]), results.model[i], results.model_version[i],
                 metadata),
            )  # fmt: skip
        section = report.document.get("properties") or {}
        for pair in section.get("pairs") or []:
            result = pair.get("result")
            if result is None:
                continue
            presentation = pair.get("presentation")
            shown = labels if presentation is None else tuple(s for s, _ in presentation)
            order = labels if presentation is None else tuple(label for _, label in presentation)
            values = [float(result["probabilities"][label]) for label in order]
            self._answers[pair["id"]] = (
                input_bytes(pair["input"]),
                shown,
                values,
                (float(result["latency_ms"]), result["model"], result["model_version"],
                 result["metadata"]),
            )  # fmt: skip

    def __len__(self) -> int:
        return len(self._answers)

    def check_backend(self, fingerprint: dict[str, Any], loaded: LoadedContract) -> None:
        """ContractError (exit 2) unless the report was answered by a backend keyed as
        ``fingerprint`` (this run's): its answers and this run's would be two models'."""
        if self.answered_with is None:
            if self.contract_hash == loaded.hash:
                return
            raise ContractError(
                f"--retry-errors {self.path}: the report does not record the settings it was "
                f"answered with (no {ANSWERED_WITH!r} in {sidecar_path(self.path).name}), and "
                f"its contract ({self.contract_hash[:19]}) is not this one "
                f"({loaded.hash[:19]}); retrying errors needs the same backend settings: "
                "run without --retry-errors"
            )
        differ = fingerprint_differences(self.answered_with, fingerprint)
        if differ:
            raise ContractError(
                f"--retry-errors {self.path}: the report was answered with another "
                f"{', '.join(differ)} than this run's backend; retrying errors needs the "
                "answers of the same backend settings: run without --retry-errors"
            )

    def lookup_requests(self, requests: Sequence[DecisionRequest], k: int) -> Hits:
        rows: list[int] = []
        probs: list[list[float]] = []
        fields: list[tuple[Any, ...]] = []
        for i, (case_id, decision, value) in enumerate(requests):
            known = self._answers.get(case_id)
            if known is None or known[1] != decision.labels or len(known[2]) != k:
                continue
            if known[0] != input_bytes(value):  # same id, another request (minimisation)
                continue
            rows.append(i)
            probs.append(known[2])
            fields.append(known[3])
        if not rows:
            return Hits.empty(k, source="report")
        n = len(rows)
        return Hits(
            rows=np.asarray(rows, dtype=np.intp),
            probs=np.asarray(probs, dtype=float).reshape(n, k),
            latency_ms=np.asarray([f[0] for f in fields], dtype=float),
            model=[f[1] for f in fields],
            model_version=[f[2] for f in fields],
            metadata=[f[3] for f in fields],
            prompt_tokens=np.full(n, NAN),  # a DecGuard report keeps no tokens
            completion_tokens=np.full(n, NAN),
            source="report",
        )


def retry_source(
    path: str | Path, loaded: LoadedContract, dataset: Path, backend: str
) -> ReportAnswers:
    """The answers of the report at ``path`` for a run of ``loaded`` on ``dataset`` with the
    backend named ``backend``; ContractError (exit 2) when the report is not for that run."""
    from decguard_pipeline.core.dataset import load_dataset

    report = load_report(path)
    doc = report.document
    spec = loaded.contract.spec()
    contract = doc["contract"]
    if (contract["name"], contract["type"], tuple(contract["labels"])) != (
        spec.name,
        spec.type,
        spec.labels,
    ):
        raise ContractError(
            f"--retry-errors {path}: the report is for decision {contract['name']!r} "
            f"({contract['type']}: {', '.join(contract['labels'])}), this contract decides "
            f"{spec.name!r} ({spec.type}: {', '.join(spec.labels)})"
        )
    current = file_hash(dataset)
    stored = doc["dataset"]["hash"]
    if stored != current:
        raise ContractError(
            f"--retry-errors {path}: the report's dataset ({doc['dataset']['path']}, "
            f"{stored}) is not this run's dataset ({dataset}, {current}); retrying errors "
            "needs the same cases"
        )
    provider = loaded.contract.backend_config(backend).provider
    if (doc["backend"]["name"], doc["backend"]["provider"]) != (backend, provider):
        raise ContractError(
            f"--retry-errors {path}: the report's backend is {doc['backend']['name']!r} "
            f"({doc['backend']['provider']}), this run's is {backend!r} ({provider}); pass "
            f"--backend {doc['backend']['name']}"
        )
    data = load_dataset(dataset, spec)
    inputs = dict(zip(data.ids, data.inputs, strict=True))
    return ReportAnswers(path, report, inputs, recorded_fingerprint(path, doc))


def recorded_fingerprint(path: str | Path, doc: dict[str, Any]) -> dict[str, Any] | None:
    """The ``answered_with`` section of the report's own sidecar (same report name and
    ``created_at``), else None."""
    import orjson

    from decguard_pipeline.core.json_limits import max_bytes

    sidecar = sidecar_path(path)
    try:
        if sidecar.stat().st_size > max_bytes():
            return None
        found = orjson.loads(sidecar.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not (
        isinstance(found, dict)
        and found.get("report") == Path(path).name
        and found.get("created_at") == doc.get("created_at")
        and isinstance(found.get(ANSWERED_WITH), dict)
    ):
        return None
    return found[ANSWERED_WITH]


def run_dataset(loaded: LoadedContract, *, suite: str | None, dataset: Path | None) -> Path:
    """The dataset a ``test``/``fuzz`` run evaluates first (the one its report is about)."""
    from decguard_pipeline.core.guard.extension import guard_enabled
    from decguard_pipeline.runs.guard import plan_datasets

    path: Path | None = Path(dataset) if dataset is not None else None
    if guard_enabled(loaded.contract) or suite is not None:
        path = plan_datasets(loaded, suite=suite, dataset=dataset)[0][1]
    if path is None:
        if loaded.contract.dataset is None:
            raise ContractError(
                f"{loaded.path}: no dataset given; set 'dataset' in the contract or pass --dataset"
            )
        path = loaded.resolve(loaded.contract.dataset)
    return path

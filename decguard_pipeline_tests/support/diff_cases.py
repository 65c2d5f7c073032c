"""Generated diff scenarios (contracts, gates, report pairs) and the normalisation the diff
comparisons against decguard 0.1.1 share."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

LABELS = {"choice": ("refund", "reject", "review"), "noul": ("spam", "ham"),
          "score": ("1", "2", "3", "4")}  # fmt: skip


DECISION = {
    "choice": "  type: choice\n  options: [refund, reject, review]",
    "noul": "  type: noul\n  labels: [spam, ham]",
    "score": "  type: score\n  levels: [1, 2, 3, 4]",
}


ERROR_KINDS = ("timeout", "unavailable", "invalid_response", "backend_error", "exception")


ALL_GATES = {
    "max_answer_flip_rate": 0.1,
    "max_accuracy_drop": 0.0,
    "max_macro_f1_drop": 0.05,
    "max_ece_increase": 0.02,
    "max_brier_increase": 0.01,
    "max_nll_increase": 0.1,
    "max_mean_tv_distance": 0.1,
    "max_mean_confidence_shift": 0.05,
    "max_error_rate_increase": 0.05,
    "max_latency_p95_increase_ms": 5.0,
    "max_segment_accuracy_drop": 0.1,
}


def contract_text(kind: str, *, extra: str = "") -> str:
    labels = LABELS[kind]
    uniform = ", ".join(f'"{label}": {1 / len(labels)!r}' for label in labels)
    head = f'schema_version: "0.1"\ndecision:\n  name: gen_{kind}\n{DECISION[kind]}\n'
    return head + f"backend:\n  provider: mock\n  default: {{{uniform}}}\n" + extra


def gates_yaml(gates: dict[str, float], indent: str = "  ") -> str:
    return "".join(f"{indent}{gate}: {limit}\n" for gate, limit in gates.items())


def _distribution(rng: np.random.Generator, k: int, expected: int | None) -> list[float]:
    style = rng.integers(0, 6)
    if style == 0:  # certain answer: zeros exercise the JS branches
        p = np.zeros(k)
        p[rng.integers(0, k)] = 1.0
    elif style == 1:  # an exact tie between the first two labels
        p = np.zeros(k)
        p[:2] = 0.5
    elif style == 2 and expected is not None:  # leaning to the right answer
        p = rng.dirichlet(np.ones(k))
        p[expected] += 2.0
        p /= p.sum()
    else:
        p = rng.dirichlet(np.full(k, 0.7))
    return [round(float(v), 6) for v in p]


def _metadata(rng: np.random.Generator, i: int) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    locale = ["en", "de", "fr", "ja", "zz"][int(rng.integers(0, 5))]
    if locale != "zz":
        meta["locale"] = locale
    meta["tier"] = [1, 2, 2.5, True, None][int(rng.integers(0, 5))]
    if i % 7 == 0:
        meta["tier"] = {"b": [1, "é"], "a": 1}
    if i % 5 == 0:
        meta["région"] = "Île-de-France"
    return meta


def reference_records(
    rng: np.random.Generator,
    kind: str,
    ids: list[str],
    *,
    p_error: float,
    p_unlabeled: float,
    model: str,
    backend: str = "default",
    base: dict[str, Any] | None = None,
) -> list[Any]:
    """Case records as the reference's runner would make them. With ``base`` (id -> record)
    the answers follow the baseline's on most cases, so flips stay realistic."""
    from decguard.decisions import DecisionResult
    from decguard.runner import CaseError, CaseRecord

    labels = LABELS[kind]
    k = len(labels)
    records = []
    for i, case_id in enumerate(ids):
        old = (base or {}).get(case_id)
        if old is not None and rng.random() < 0.85:
            expected, inp, meta = old.expected, old.input, dict(old.metadata)
        else:
            expected = None if rng.random() < p_unlabeled else labels[int(rng.integers(0, k))]
            inp: Any = f"case {case_id}: " + "word " * int(rng.integers(1, 30))
            if i % 4 == 0:
                inp = {"text": f"naïve case {case_id}", "n": i, "tags": ["a", "b"]}
            meta = _metadata(rng, i)
        if rng.random() < p_error:
            error = CaseError(kind=ERROR_KINDS[int(rng.integers(0, 5))], message=f"failed {i}")
            records.append(
                CaseRecord(case_id=case_id, input=inp, expected=expected, metadata=meta,
                           error=error)
            )  # fmt: skip
            continue
        if old is not None and old.result is not None and rng.random() < 0.6:
            probs = [old.result.probabilities[label] for label in labels]
            if rng.random() < 0.5:
                probs = [round(v * 0.9 + 0.1 / k, 6) for v in probs]
        else:
            exp_index = None if expected is None else labels.index(expected)
            probs = _distribution(rng, k, exp_index)
        best = 0
        for j in range(1, k):
            if probs[j] > probs[best]:
                best = j
        result = DecisionResult(
            case_id=case_id,
            decision=f"gen_{kind}",
            decision_type=kind,
            labels=labels,
            probabilities=dict(zip(labels, probs, strict=True)),
            selected=labels[best],
            confidence=probs[best],
            backend=backend,
            provider="mock",
            model=model,
            model_version=None,
            latency_ms=float(rng.gamma(2.0, 3.0)),
            metadata={},
        )
        records.append(
            CaseRecord(case_id=case_id, input=inp, expected=expected, metadata=meta,
                       result=result)
        )  # fmt: skip
    return records


def write_reference_report(
    path: Path, contract: Path, records: list[Any], *, dataset_hash: str, model: str,
    backend: str = "default",
) -> Path:  # fmt: skip
    from decguard.backends.base import BackendMetadata
    from decguard.contracts.loader import load_contract
    from decguard.reports.model import DatasetInfo, build_report, write_report

    labeled = sum(r.expected is not None for r in records)
    report = build_report(
        load_contract(contract),
        DatasetInfo(path="cases.jsonl", hash=dataset_hash, n_cases=len(records),
                    n_labeled=labeled),
        BackendMetadata(name=backend, provider="mock", model=model, details={"rules": 0}),
        records,
    )  # fmt: skip
    write_report(report, path)
    return path


def generated_pair(
    tmp: Path,
    seed: int,
    kind: str = "choice",
    *,
    n: int = 60,
    overlap: float = 1.0,
    p_error: tuple[float, float] = (0.08, 0.08),
    p_unlabeled: float = 0.2,
    shuffle: bool = False,
    report_contract: str = "",
) -> tuple[Path, Path]:
    """A baseline and a candidate report of the same decision, built by the reference."""
    rng = np.random.default_rng(seed)
    tmp.mkdir(parents=True, exist_ok=True)
    contract = tmp / f"report-{kind}.yaml"
    contract.write_text(contract_text(kind, extra=report_contract), encoding="utf-8")
    ids = [f"c{i:03d}" for i in range(n)]
    base_records = reference_records(
        rng, kind, ids, p_error=p_error[0], p_unlabeled=p_unlabeled, model="m-1"
    )
    keep = round(n * overlap)
    cand_ids = ids[n - keep :] + [f"new{i}" for i in range(n - keep)]
    if shuffle:
        cand_ids = [cand_ids[i] for i in rng.permutation(len(cand_ids))]
    cand_records = reference_records(
        rng, kind, cand_ids, p_error=p_error[1], p_unlabeled=p_unlabeled, model="m-2",
        backend="cand", base={r.case_id: r for r in base_records},
    )  # fmt: skip
    same = overlap == 1.0 and not shuffle
    base = write_reference_report(
        tmp / f"base-{seed}.json", contract, base_records, dataset_hash="sha256:" + "a" * 64,
        model="m-1",
    )  # fmt: skip
    cand = write_reference_report(
        tmp / f"cand-{seed}.json", contract, cand_records,
        dataset_hash="sha256:" + ("a" if same else "b") * 64, model="m-2", backend="cand",
    )  # fmt: skip
    return base, cand


def normal_json(text: str) -> dict[str, Any]:
    doc = json.loads(text)
    doc.pop("created_at")
    doc.pop("decguard_version")
    return doc


def normal_text(text: str) -> str:
    return re.sub(r"^DecGuard \S+ ·", "DecGuard V ·", text)

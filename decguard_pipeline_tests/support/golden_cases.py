"""Generated golden-set cases and contracts for the side-by-side tests against decguard 0.1.1, and
the report normalisation that makes two tools' reports comparable."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

WORDS = (
    "refund",
    "reject",
    "review",
    "outage",
    "degraded",
    "delayed",
    "typo",
    "spam",
    "ham",
    "urgent",
    "calm",
    "angry",
    "billing",
    "shipping",
    "technical",
    "parcel",
    "blender",
    "screen",
    "invoice",
    "colour",
    "price",
    "lid",
    "tracking",
    "winner",
    "money",
    "raffle",
    "office",
    "meeting",
    "train",
    "window",
    "plant",
    "desk",
    "corridor",
    "biscuits",
)


LABEL_POOL = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "Refund",
    "reject",
    "high",
    "low",
    "médium",
    "ünder",
)


BINS = (1, 3, 10, 1000)


LEVEL_GATES = ("min_coverage", "max_abstention_rate", "min_selective_accuracy")


GATE_RANGES = {
    "min_accuracy": 1.0,
    "min_macro_f1": 1.0,
    "max_nll": 5.0,
    "max_brier": 2.0,
    "max_ece": 1.0,
    "min_coverage": 1.0,
    "max_abstention_rate": 1.0,
    "min_selective_accuracy": 1.0,
    "max_error_rate": 1.0,
    "max_ordinal_mae": 3.0,
}


def _distribution(rng: random.Random, labels: list[str], *, tie: bool = False) -> dict[str, Any]:
    """A distribution over ``labels`` that passes the mock's load-time check (1e-3)."""
    k = len(labels)
    if tie:  # two leading labels share the top probability: ties go to the first
        top = round(rng.uniform(0.5 / k + 0.3 / k, 0.5), 3)
        rest = 1.0 - 2 * top
        values = [top, top] + [rest / (k - 2)] * (k - 2) if k > 2 else [0.5, 0.5]
        rng.shuffle(values)
    else:
        raw = [rng.random() ** 2 + 1e-3 for _ in labels]
        total = sum(raw)
        digits = rng.choice((2, 3, 6, 17))
        values = [round(v / total, digits) for v in raw]
        values[-1] = round(1.0 - sum(values[:-1]), digits)
        if values[-1] < 0:
            values = [1.0] + [0.0] * (k - 1)
    if rng.random() < 0.1:  # off by a little: inside the load tolerance, maybe not the run's
        values[0] = values[0] + rng.choice((4e-4, -4e-4, 9e-4))
        values[0] = max(values[0], 0.0)
    if rng.random() < 0.1:  # ints are numbers too
        values = [1] + [0] * (k - 1)
    return dict(zip(labels, values, strict=True))


def _decision(rng: random.Random) -> tuple[dict[str, Any], list[str], Any]:
    kind = rng.choice(("choice", "noul", "score"))
    if kind == "choice":
        labels = rng.sample(LABEL_POOL, rng.randint(2, 6))
        return {"name": "pick", "type": kind, "options": labels}, labels, labels
    if kind == "noul":
        if rng.random() < 0.5:
            return {"name": "is-it", "type": kind}, ["yes", "no"], None
        labels = rng.sample(LABEL_POOL, 2)
        return {"name": "is-it", "type": kind, "labels": labels}, labels, labels
    k = rng.randint(2, 5)
    if rng.random() < 0.6:
        levels: list[Any] = list(range(1, k + 1))
        return {"name": "level", "type": kind, "levels": levels}, [str(v) for v in levels], levels
    labels = ["none", "low", "mid", "high", "max"][:k]
    return {"name": "level", "type": kind, "levels": labels}, labels, labels


def _mock(rng: random.Random, labels: list[str], model: str | None) -> dict[str, Any]:
    backend: dict[str, Any] = {"provider": "mock"}
    if model is not None:
        backend["model"] = model
    rules = []
    for word in rng.sample(WORDS, rng.randint(0, 6)):
        tie = rng.random() < 0.15
        contains = word if rng.random() < 0.8 else f"  {word.upper()} "
        rules.append({"contains": contains, "probabilities": _distribution(rng, labels, tie=tie)})
    if rules:
        backend["rules"] = rules
    if rng.random() < 0.5:
        backend["default"] = _distribution(rng, labels)
    if rng.random() < 0.4:
        backend["seed"] = rng.randint(0, 10**6)
    if rng.random() < 0.3:
        backend["position_bias"] = rng.choice((0.05, 0.1, 0.3, 1.0))
    if rng.random() < 0.2:
        backend["model_version"] = f"v{rng.randint(1, 9)}"
    return backend


def _input(rng: random.Random, objects: bool) -> Any:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
    if rng.random() < 0.1:
        text = "  " + text.upper() + "\n\t" + rng.choice(WORDS)
    if not objects:
        return text
    value: dict[str, Any] = {"text": text, "users": rng.randint(0, 10**5)}
    if rng.random() < 0.3:
        value["nested"] = {"ünï": [1, 2.5, None, True], "w": rng.choice(WORDS)}
    return value


def generate(seed: int) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """A contract (as a dict), its cases and the dataset suffix, from one seed."""
    rng = random.Random(seed)
    decision, labels, written_levels = _decision(rng)
    contract: dict[str, Any] = {"schema_version": "0.1", "decision": decision}
    contract["backend"] = _mock(rng, labels, rng.choice((None, "m-1", "model.v2")))
    if rng.random() < 0.4:
        contract["backends"] = {"alt": _mock(rng, labels, "alt")}
    evaluation: dict[str, Any] = {}
    threshold = None
    if rng.random() < 0.6:
        threshold = rng.choice((0.0, 0.5, 0.8, 0.9, 1.0, round(rng.random(), 2)))
        evaluation["confidence_threshold"] = threshold
    if rng.random() < 0.7:
        evaluation["calibration_bins"] = rng.choice((*BINS, rng.randint(1, 40)))
    if rng.random() < 0.3:
        evaluation["probability_tolerance"] = rng.choice((1e-4, 5e-4, 1e-3, 0.02, 0.1))
    if rng.random() < 0.3:
        evaluation["max_concurrency"] = rng.randint(1, 16)
    if evaluation:
        contract["evaluation"] = evaluation
    for section in ("requirements", "warnings"):
        gates: dict[str, Any] = {}
        for gate, top in GATE_RANGES.items():
            if rng.random() < 0.25:
                if gate in LEVEL_GATES and threshold is None:
                    continue
                if gate == "max_ordinal_mae" and decision["type"] != "score":
                    continue
                gates[gate] = round(rng.uniform(0, top), rng.choice((1, 2, 4)))
        if rng.random() < 0.2:  # far from any measured latency: never flips
            gates["max_latency_p95_ms"] = rng.choice((1e6, 0))
        if gates:
            contract[section] = gates

    objects = (decision["type"] == "score" and rng.random() < 0.6) or rng.random() < 0.1
    n = rng.randint(1, 40)
    cases = []
    for i in range(n):
        case: dict[str, Any] = {"input": _input(rng, objects)}
        if rng.random() < 0.7:
            case["id"] = f"c{i}-{rng.randint(0, 99)}" if rng.random() < 0.5 else f"case {i}"
        if rng.random() < 0.8:
            index = rng.randrange(len(labels))
            if written_levels is not None and isinstance(written_levels[index], int):
                case["expected"] = written_levels[index]
            else:
                case["expected"] = labels[index]
        if rng.random() < 0.3:
            case["metadata"] = {"locale": rng.choice(("en", "it")), "n": i}
        cases.append(case)
    # ids given for some cases only must still be unique with the generated case-<n> ones
    seen: set[str] = set()
    for i, case in enumerate(cases, start=1):
        case_id = case.get("id", f"case-{i}")
        if case_id in seen:
            case["id"] = f"u{i}"
        seen.add(case.get("id", f"case-{i}"))
    return contract, cases, rng.choice((".jsonl", ".json"))


def write_inputs(tmp: Path, seed: int) -> tuple[Path, Path, dict[str, Any]]:
    contract, cases, suffix = generate(seed)
    dataset = tmp / f"cases{suffix}"
    if suffix == ".jsonl":
        dataset.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases))
    else:
        dataset.write_text(json.dumps(cases, indent=1, ensure_ascii=False))
    contract["dataset"] = dataset.name
    path = tmp / ("decguard.json" if seed % 3 == 0 else "decguard.yaml")
    if path.suffix == ".json":
        path.write_text(json.dumps(contract, indent=2, ensure_ascii=False))
    else:
        import yaml

        path.write_text(yaml.safe_dump(contract, allow_unicode=True, sort_keys=False))
    return path, dataset, contract


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """A report without what legitimately differs: producer, timestamp, measured latency."""
    doc = json.loads(json.dumps(doc))
    doc.pop("decguard_version")
    doc.pop("created_at")
    doc["metrics"].pop("latency")
    for record in doc["results"]:
        if record["result"] is not None:
            record["result"].pop("latency_ms")
    for check in doc["checks"]:
        if check["gate"] == "max_latency_p95_ms":
            check.pop("value")
            check.pop("message")
    return doc

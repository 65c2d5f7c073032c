"""Seeded generator of property contracts and datasets (no tests here).

Shared by the byte-level differential tests (``test_properties_bytes.py``) and the
before/after check ``bench/properties_identity.py``. One seed gives one contract directory:
a decision type (choice with 2-8 options, noul, score), mock backends (rules, default, the
hashed fallback, position_bias, a second backend), a dataset of texts with several sentences
and whitespace runs (objects with a text and a number for score decisions; empty texts,
missing fields, duplicates, cases without id), and every property the type allows with
random settings: samples, insertions, styles, aliases, edits, fragments, rewrites, deltas,
limits and flip rates, seeds and minimisation budgets. ``commands(seed)`` lists the CLI
argument lists to run on it (fuzz and test --all, other backends, seeds, selections).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

WORDS = (
    "refund", "reject", "review", "parcel", "blender", "damaged", "never", "arrived",
    "changed", "mind", "invoice", "price", "winner", "spam", "outage", "slow", "urgent",
    "calm", "tracking", "lid", "screen", "money", "back", "please", "is", "not", "the",
)  # fmt: skip
LABEL_POOL = (
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "Refund",
    "reject", "review", "high", "low", "médium", "ünder", "B) two",
)  # fmt: skip
SEPARATORS = (" ", " ", " ", "  ", "\n", "\t", " \n ")
ENDS = (".", ".", "!", "?", "")
STYLES = ("upper", "lower", "capitalized", "lettered", "numbered", "quoted", "bracketed")
LIMITS = ("max_tv_distance", "max_js_divergence", "max_abs_delta", "max_confidence_delta")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.3:
        words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice(ENDS)


def _text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.04:
        return ""
    if roll < 0.07:
        return rng.choice(("   ", "\n"))
    parts = [_sentence(rng) for _ in range(rng.randint(1, 4))]
    text = "".join(p + rng.choice(SEPARATORS) for p in parts[:-1]) + parts[-1]
    if rng.random() < 0.1:
        text = rng.choice((" ", "\n")) + text
    return text


def _probabilities(rng: random.Random, labels: list[str]) -> dict[str, float]:
    weights = [rng.choice((1, 2, 3, 5, 8, 13, 40)) for _ in labels]
    total = sum(weights)
    values = [round(w / total, 4) for w in weights]
    values[-1] = round(1.0 - sum(values[:-1]), 4)
    return dict(zip(labels, values, strict=True))


def _mock(rng: random.Random, labels: list[str], model: str) -> dict[str, Any]:
    backend: dict[str, Any] = {"provider": "mock", "model": model, "seed": rng.randint(0, 99)}
    rules = [
        {"contains": rng.choice(WORDS), "probabilities": _probabilities(rng, labels)}
        for _ in range(rng.choice((0, 0, 1, 2, 3)))
    ]
    if rules:
        backend["rules"] = rules
    if rng.random() < 0.4:
        backend["default"] = _probabilities(rng, labels)
    if rng.random() < 0.6:
        backend["position_bias"] = rng.choice((0.01, 0.05, 0.1, 0.2, 0.5))
    if rng.random() < 0.2:
        backend["model_version"] = f"v{rng.randint(1, 9)}"
    return backend


def _limits(rng: random.Random, *, flips: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in rng.sample(LIMITS, rng.randint(0, 3)):
        out[key] = rng.choice((0.0, 0.001, 0.01, 0.03, 0.05, 0.1, 0.3, 1.0))
    if flips and (not out or rng.random() < 0.4):
        out["max_flip_rate"] = rng.choice((0.0, 0.1, 0.5))
    if rng.random() < 0.3:
        out["max_violation_rate"] = rng.choice((0.1, 0.5, 1.0))
    if rng.random() < 0.2:
        out["level"] = "warning"
    return out


def _properties(
    rng: random.Random, kind: str, labels: list[str], texts: list[str]
) -> dict[str, Any]:
    props: dict[str, Any] = {}
    fragments = rng.choice((None, ["Noise here.", "The sky is blue."], ["x"], ["One. Two."]))
    if kind != "score" and rng.random() < 0.8:
        props["option_order"] = {"samples": rng.randint(1, 6), **_limits(rng)}
    if rng.random() < 0.8:
        config: dict[str, Any] = {"samples": rng.randint(1, 5), **_limits(rng)}
        if rng.random() < 0.5:
            config["styles"] = rng.sample(STYLES, rng.randint(1, 4))
        if rng.random() < 0.5:
            config["aliases"] = {
                label: [f"{label} {suffix}" for suffix in rng.sample(("x", "y", "zz"), k)]
                for label in rng.sample(labels, rng.randint(1, len(labels)))
                if (k := rng.randint(1, 2))
            }
        props["label_format"] = config
    if rng.random() < 0.8:
        config = {"samples": rng.randint(1, 4), "insertions": rng.randint(1, 4), **_limits(rng)}
        if fragments:
            config["fragments"] = fragments
        props["irrelevant_context"] = config
    if rng.random() < 0.7:
        config = {"samples": rng.randint(1, 3), "repeats": rng.randint(2, 5), **_limits(rng)}
        if fragments:
            config["fragments"] = fragments
        props["repeated_context"] = config
    if rng.random() < 0.8:
        props["whitespace"] = {
            "samples": rng.randint(1, 4), "edits": rng.randint(1, 5), **_limits(rng)
        }  # fmt: skip
    if rng.random() < 0.6:
        source = rng.choice(({"provider": "identity"}, {"provider": "file", "path": "para.jsonl"}))
        props["paraphrase"] = {"source": source, "samples": rng.randint(1, 3), **_limits(rng)}
    if kind == "noul" and rng.random() < 0.8:
        finds = sorted({w for t in texts for w in t.split()[:3] if w}) or ["never"]
        rewrites = [
            {"find": f, "replace": rng.choice(("not " + f, f.upper(), f, ""))}
            for f in rng.sample(finds, min(len(finds), rng.randint(1, 3)))
        ]
        props["inversion"] = {"rewrites": rewrites, "samples": rng.randint(1, 3), **_limits(rng)}
    if kind == "score" and rng.random() < 0.9:
        props["monotonic"] = {
            "field": "users",
            "direction": rng.choice(("increasing", "decreasing")),
            "deltas": rng.sample([1, 2.5, 10, 1000.5, 0.25], rng.randint(1, 3)),
            "max_level_decrease": rng.choice((0.0, 0.05, 0.5)),
            **({"max_flip_rate": rng.choice((0.0, 0.2))} if rng.random() < 0.5 else {}),
        }
    if not props:
        props["whitespace"] = {"max_tv_distance": 0.0}
    return props


def _cases(rng: random.Random, kind: str, labels: list[str], n: int) -> list[dict[str, Any]]:
    cases = []
    for i in range(n):
        text = _text(rng)
        value: Any = text
        if kind == "score" and rng.random() < 0.85:
            value = {"text": text, "users": rng.choice((0, 3, 7, 50, 2.5, 1e6))}
            roll = rng.random()
            if roll < 0.08:
                del value["text"]
            elif roll < 0.16:
                value["users"] = rng.choice((True, "many", None))
            elif roll < 0.22:
                del value["users"]
        case: dict[str, Any] = {"id": f"c{i}", "input": value}
        if rng.random() < 0.05:
            del case["id"]
        if rng.random() < 0.8:
            case["expected"] = rng.choice(labels)
        cases.append(case)
    if cases and rng.random() < 0.3:  # a repeated input under another id
        cases.append({**cases[0], "id": f"dup{n}"})
    return cases


def generate(seed: int, *, n_cases: int | None = None) -> dict[str, str]:
    """File name -> text of the contract directory of ``seed``."""
    rng = random.Random(seed)
    kind = rng.choice(("choice", "choice", "noul", "score"))
    decision: dict[str, Any] = {"name": f"d{seed}", "type": kind}
    if kind == "choice":
        labels = rng.sample(LABEL_POOL, rng.randint(2, 8))
        decision["options"] = labels
    elif kind == "noul":
        labels = rng.choice((["yes", "no"], ["spam", "ham"], ["Urgent", "calm"]))
        decision["labels"] = labels
    else:
        labels = [str(level) for level in range(1, rng.randint(2, 5) + 1)]
        decision["levels"] = [int(level) for level in labels]
    cases = _cases(rng, kind, labels, n_cases or rng.randint(3, 30))
    texts = [c["input"] if isinstance(c["input"], str) else "" for c in cases]
    contract: dict[str, Any] = {
        "schema_version": "0.1",
        "decision": decision,
        "backend": _mock(rng, labels, "m1"),
        "backends": {"other": _mock(rng, labels, "m2")},
        "dataset": "cases.jsonl",
        "fuzz": {
            "seed": rng.choice((0, 1, 42, rng.randint(0, 2**62))),
            "minimize": rng.random() < 0.8,
            "max_minimize_calls": rng.choice((0, 1, 3, 8, 32, 100)),
        },
        "properties": _properties(rng, kind, labels, texts),
    }
    if kind == "score":
        contract["fuzz"]["text_field"] = "text"
    paraphrases = [
        {"id": c["id"], "paraphrases": [t + " indeed", t.upper()][: rng.randint(1, 2)]}
        for c, t in zip(cases, texts, strict=True)
        if "id" in c and t.strip() and rng.random() < 0.5
    ]
    return {
        # JSON is YAML: no YAML writer needed, and every value round-trips exactly
        "decguard.yaml": json.dumps(contract, ensure_ascii=False, indent=1) + "\n",
        "cases.jsonl": "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases),
        "para.jsonl": "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in paraphrases),
    }


def write(root: Path, seed: int, *, n_cases: int | None = None) -> Path:
    """The contract directory of ``seed`` under ``root``; returns the contract's path."""
    folder = root / f"gen{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in generate(seed, n_cases=n_cases).items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder / "decguard.yaml"


def commands(seed: int) -> list[list[str]]:
    """CLI arguments to run on the contract of ``seed`` (relative to its directory)."""
    rng = random.Random(-seed - 1)
    enabled = list(json.loads(generate(seed)["decguard.yaml"])["properties"])
    out = [["fuzz", "decguard.yaml"], ["test", "decguard.yaml", "--all"]]
    extra = rng.choice(
        (["-b", "other"], ["--seed", str(rng.randint(0, 10**6))], ["--no-minimize"], ["--minimize"])
    )
    selection = [
        arg for name in rng.sample(enabled, rng.randint(1, len(enabled))) for arg in ("-p", name)
    ]
    out.append(["fuzz", "decguard.yaml", *extra])
    out.append(["test", "decguard.yaml", "--all", *selection])
    return out


_VARYING = [
    # measured per call or per run: legitimately different between two runs
    (
        re.compile(r'("(?:latency_ms|mean_ms|p50_ms|p90_ms|p95_ms|p99_ms|max_ms)": )[-0-9.e+]+'),
        r"\1L",
    ),
    (re.compile(r'("created_at": )"[^"]*"'), r"\1T"),
    (
        re.compile(
            r'("metric": "latency_p95_ms",\n\s*"comparison": "<=",\n\s*"threshold": '
            r'[-0-9.e+]+,\n\s*"value": )[-0-9.e+]+'
        ),
        r"\1L",
    ),
    (re.compile(r"latency_p95_ms [-0-9.e+]+"), "latency_p95_ms L"),
    (re.compile(r"DecGuard \S+ ·"), "DecGuard V ·"),
    (re.compile(r"Latency ms .*"), "Latency ms L"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00"), "T"),
]


def normalised_text(text: str) -> str:
    """A report, sidecar or terminal output with latencies and timestamps neutralised; every
    other byte is kept."""
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    return text

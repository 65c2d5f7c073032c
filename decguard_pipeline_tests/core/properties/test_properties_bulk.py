"""The column-wise property path against its scalar definitions: bulk generation against
``Transform.generate`` case by case, the bulk random stream against ``Rng``, the text
surgery on split texts against ``insert_fragments`` / ``replace_whitespace``, column-wise
judging and summaries against ``judge`` / ``summarize``, and report files written a batch of
pairs at a time against the document encoded in one piece."""

from __future__ import annotations

import random
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson
import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.contract.properties import Properties
from decguard_pipeline.core.properties import typed_section
from decguard_pipeline.core.properties.bulk import _sample_rows, generate_all
from decguard_pipeline.core.properties.compare import compare, judge, judge_many
from decguard_pipeline.core.properties.rng import (
    Rng,
    StreamValues,
    draws,
    sample_from,
    stream_key,
    stream_keys,
    swaps_to_sample,
)
from decguard_pipeline.core.properties.summary import (
    compared_figures,
    summarize,
    summarize_columns,
    summary_of,
)
from decguard_pipeline.core.properties.text import (
    insert_fragments,
    insert_into_parts,
    piece_bounds,
    replace_at_bounds,
    replace_whitespace,
    sentence_parts,
    whitespace_order,
    whitespace_pieces,
    whitespace_runs,
)
from decguard_pipeline.core.properties.transform import Transform
from decguard_pipeline.core.report import jsonio
from decguard_pipeline.runs.golden import decide_dataset, make_backend, resolve_dataset
from decguard_pipeline.runs.properties import plan_properties
from decguard_pipeline.runs.properties.paraphrase import create_paraphraser
from decguard_pipeline.runs.properties.plan import build_transforms
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support import property_contracts

# --- the random stream in bulk -------------------------------------------------------------


def test_stream_keys_and_values_equal_the_scalar_stream():
    rng = random.Random(4)
    ids = [f"c{i}" for i in range(40)] + ["ü-case", "", "a\x1fb"]
    keys = stream_keys(2**63 - 1, "whitespace", ids)
    assert keys == [stream_key(2**63 - 1, "whitespace", case_id) for case_id in ids]
    counts = [rng.randint(0, 80) for _ in keys]  # beyond the 64 counters built in advance
    values = StreamValues(keys, counts)
    flat = [v for key, n in zip(keys, counts, strict=True) for v in draws(key, n)]
    for key, n in zip(keys, counts, strict=True):
        stream = Rng(2**63 - 1, "whitespace", ids[keys.index(key)])
        assert draws(key, n) == [
            int.from_bytes(b, "big") for b in _blocks(key, n)
        ]  # the definition: first 16 bytes of SHA-256(key ‖ counter)
        assert [stream.below(97) for _ in range(n)] == [v % 97 for v in draws(key, n)]
    for n in (1, 2, 3, 7, 719, 2**31 - 1, 2**32 - 1, 2**32, 2**63, 2**64 + 3):
        assert values.mod(n).tolist() == [v % n for v in flat], n
    moduli = np.array([rng.randint(1, 5000) for _ in flat])
    assert values.mod(moduli).tolist() == [v % int(m) for v, m in zip(flat, moduli, strict=True)]
    positions = np.array(rng.sample(range(len(flat)), 50))
    assert values.mod_at(positions, 13).tolist() == [flat[p] % 13 for p in positions.tolist()]
    with pytest.raises(ValueError):
        values.mod(0)


def _blocks(key: bytes, n: int) -> list[bytes]:
    import hashlib

    return [hashlib.sha256(key + i.to_bytes(8, "big")).digest()[:16] for i in range(n)]


def test_samples_from_values_equal_rng_sample():
    rng = random.Random(9)
    for trial in range(300):
        m, k = rng.randint(1, 30), rng.randint(0, 35)
        parts = (trial, "option_order", f"c{trial}")
        expected = Rng(*parts).sample(range(m), k)
        assert sample_from(draws(stream_key(*parts), min(k, m)), m, k) == expected
    for e in (1, 2, 3, 5):  # many samples at once
        m = np.array([rng.randint(e, 12) for _ in range(200)])
        offsets = np.array([[rng.randrange(int(mm) - i) for i in range(e)] for mm in m])
        assert _sample_rows(offsets).tolist() == [swaps_to_sample(o) for o in offsets.tolist()]


# --- text surgery on split texts -----------------------------------------------------------

TEXTS = ["", "one", "One. Two! Three? Four", "a.  b.\n\nc.", " lead. trail. ", "x!\ty?\nz", "...",
         "a\u00a0b\u2003 c.\r\nd\u3000"]  # fmt: skip


def test_insertions_into_split_text_equal_insert_fragments():
    rng = random.Random(2)
    for text in TEXTS * 20:
        parts = sentence_parts(text)
        boundaries = len(parts) // 2 + 2
        steps = sorted(
            ({"at": rng.randrange(boundaries), "text": rng.choice(["F.", "G g"])}
             for _ in range(rng.randint(0, 4))),
            key=lambda step: step["at"],
        )  # fmt: skip
        ats, fragments = [s["at"] for s in steps], [s["text"] for s in steps]
        assert insert_into_parts(parts, ats, fragments) == insert_fragments(text, steps)


def test_whitespace_at_bounds_equals_replace_whitespace():
    rng = random.Random(3)
    for text in TEXTS * 20:
        targets: list[Any] = ["start", *range(len(whitespace_runs(text))), "end"]
        chosen = rng.sample(targets, rng.randint(0, len(targets)))
        steps = sorted(({"at": t, "ws": rng.choice([" ", "\n", "\t\t"])} for t in chosen),
                       key=whitespace_order)  # fmt: skip
        ats, spaces = [s["at"] for s in steps], [s["ws"] for s in steps]
        bounds = piece_bounds(whitespace_pieces(text))
        assert replace_at_bounds(text, bounds, ats, spaces) == replace_whitespace(text, steps)


# --- generation of whole datasets ----------------------------------------------------------


def _generated(transform: Transform, seed: int, ids: list[str], inputs: list[Any]) -> list[Any]:
    """What the bulk path (``bulk.generate_all``) gives for every case, errors included."""
    return _listed(generate_all(transform, seed, ids, inputs))


def _listed(generated: Any) -> list[Any]:
    out = []
    for row, made in generated:
        if isinstance(made, Exception):
            out.append((row, type(made).__name__, str(made)))
        else:
            out.append((row, [(list(steps), value, shown, prov) for steps, value, shown, prov
                              in made]))  # fmt: skip
    return out


def _transforms(contract: Path) -> tuple[Any, Any, dict[str, Transform]]:
    loaded = load_contract(contract)
    data = resolve_dataset(loaded, None)
    plan = plan_properties(loaded, None, seed=None, minimize=None)
    paraphrase = plan.enabled.get("paraphrase")
    paraphraser = None
    if paraphrase is not None:
        paraphraser = create_paraphraser(paraphrase.source, base_dir=loaded.path.parent)
    return data, plan, build_transforms(plan, loaded.contract.spec(), paraphraser)


@pytest.mark.parametrize("first", range(0, 120, 30))
def test_bulk_generation_equals_generate_case_by_case(tmp_path, first):
    """Every property of generated contracts (all decision types, object inputs, empty and
    missing texts, aliases that collide, more than six options...): ``generate_many`` gives
    what ``generate`` gives for each case with its own stream, errors and skips included."""
    seen = set()
    for seed in range(first, first + 30):
        data, plan, transforms = _transforms(property_contracts.write(tmp_path, seed))
        for name, transform in transforms.items():
            bulk = _generated(transform, plan.seed, data.ids, data.inputs)
            scalar = _generated_scalar(transform, plan.seed, data.ids, data.inputs)
            assert bulk == scalar, (seed, name)
            seen.add(name)
    assert {"option_order", "label_format", "irrelevant_context", "whitespace"} <= seen


def _generated_scalar(transform: Transform, seed: int, ids: list[str], inputs: list[Any]):
    """The definition: ``generate`` per case with its own stream (``generate_many``)."""
    return _listed(transform.generate_many(seed, ids, inputs))


def test_bulk_generation_of_the_examples_at_scale(tmp_path):
    """The refund example's properties on 500 varied texts (two or three sentences, runs of
    every kind of whitespace)."""
    rng = random.Random(8)
    words = ["damaged", "never arrived", "changed my mind", "price", "x"]
    folder = tmp_path / "refund"
    folder.mkdir()
    text = (EXAMPLES / "refund" / "decguard.yaml").read_text()
    (folder / "decguard.yaml").write_text(text)
    with (folder / "cases.jsonl").open("w") as out:
        for i in range(500):
            sentences = [f"{rng.choice(words)} {i}{rng.choice('.!?')}" for _ in range(3)]
            value = rng.choice([" ", "  ", "\n", "\t", " \n"]).join(sentences[: rng.randint(1, 3)])
            out.write(orjson.dumps({"id": f"c{i}", "input": value}).decode() + "\n")
    data, plan, transforms = _transforms(folder / "decguard.yaml")
    for name, transform in transforms.items():
        assert _generated(transform, plan.seed, data.ids, data.inputs) == _generated_scalar(
            transform, plan.seed, data.ids, data.inputs
        ), name


# --- judging and summaries column-wise -----------------------------------------------------


def _random_config(rng: random.Random, kind: str) -> Any:
    keys = ["max_tv_distance", "max_js_divergence", "max_abs_delta", "max_confidence_delta"]
    limits = {key: rng.choice([0.0, 0.01, 0.1, 0.5]) for key in rng.sample(keys, rng.randint(0, 3))}
    flips = {} if limits and rng.random() < 0.4 else {"max_flip_rate": rng.choice([0.0, 0.2])}
    if kind == "monotonic":
        settings = {"field": "u", "direction": rng.choice(["increasing", "decreasing"]),
                    "max_level_decrease": rng.choice([0.0, 0.05, 0.3]), **flips}  # fmt: skip
    elif kind == "inversion":
        settings = {"rewrites": [{"find": "a", "replace": "b"}], **limits, **flips}
    else:
        settings = {**limits, **flips}
    return getattr(Properties(**{kind: settings}), kind)


def _distributions(rng: random.Random, m: int, k: int) -> np.ndarray:
    rows = []
    for _ in range(m):
        weights = [rng.choice([0.0, rng.random(), 0.5]) for _ in range(k)]
        weights[rng.randrange(k)] += 0.1
        rows.append([w / sum(weights) for w in weights])
    return np.array(rows).reshape(m, k)


def test_judging_and_summaries_column_wise_equal_one_by_one():
    rng = random.Random(5)
    for trial in range(400):
        kind = rng.choice(["option_order", "inversion", "monotonic", "whitespace"])
        k = 2 if kind == "inversion" else rng.randint(2, 5)
        m = rng.randint(0, 50)
        before, after = _distributions(rng, m, k), _distributions(rng, m, k)
        after[: m // 3] = before[: m // 3]  # unchanged answers too
        config = _random_config(rng, kind)
        comparisons = compare(
            before, after, np.argmax(before, axis=1) if m else np.zeros(0, int),
            tuple(f"l{i}" for i in range(k)), relation=config.relation,
            direction=getattr(config, "direction", "increasing"), score=kind == "monotonic",
        )  # fmt: skip
        records = comparisons.records()
        verdicts = judge_many(config, comparisons)
        assert verdicts == [judge(config, record) for record in records], trial
        pairs = [
            {"comparison": record, "error": None, "violations": found, "reduced": None}
            for record, found in zip(records, verdicts, strict=True)
        ] + [{"comparison": None, "error": {"kind": "timeout"}, "violations": [], "reduced": None}]
        assert summarize_columns(kind, config, comparisons, pairs, 2, 9) == summarize(
            kind, config, pairs, 2, 9
        ), trial
        if m and rng.random() < 0.2:  # a stored comparison without a level: refused alike
            records[rng.randrange(m)]["level_delta"] = None
        # the stored comparisons as typed records (a loaded report's) summarise alike
        typed = msgspec.convert(records, list[typed_section._Comparison])
        counts = (len(pairs), ["timeout"], 0)
        typed_summary = _outcome(_typed_summary, kind, config, typed, counts)
        assert typed_summary == _outcome(summarize, kind, config, pairs, 2, 9), trial


def _typed_summary(kind: str, config: Any, typed: Any, counts: Any) -> dict[str, Any]:
    """The summary of typed comparisons (a loaded report's), 2 skipped of 9 cases."""
    return summary_of(kind, config, compared_figures(config, typed, counts, get=attrgetter), 2, 9)


def _outcome(call: Any, *args: Any, **kwargs: Any) -> Any:
    """What ``call`` returns, or the message of the TypeError it raises."""
    try:
        return call(*args, **kwargs)
    except TypeError as exc:
        return str(exc)


# --- report files written a batch of pairs at a time --------------------------------------


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.35:
        return rng.choice([1, -2, 0.1, 1e-05, 3.5e20, 'é\u2028\x1f"x', None, True, [], {}])
    if roll < 0.65:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {f"k{i}é": _value(rng, depth + 1) for i in range(rng.randint(0, 4))}


@pytest.mark.parametrize("big", [False, True])
def test_chunked_pairs_give_the_bytes_of_one_encoding(tmp_path, big):
    """The pairs are encoded a batch at a time, yet the file holds exactly the bytes of the
    document encoded in one piece (results streamed), including when an integer beyond 64
    bits makes the standard library's encoder write some of it (its floats read 1e-05
    where orjson writes 0.00001)."""
    rng = random.Random(7 + big)
    for trial in range(60):
        pairs = [_value(rng) for _ in range(rng.choice([0, 1, 63, 64, 65, 200]))]
        results = [_value(rng) for _ in range(rng.choice([0, 1, 64, 65]))]
        document = {"a": _value(rng), "results": None, "z": 1e-05,
                    "properties": {"seed": 1, "pairs": pairs, "skipped": []}}  # fmt: skip
        if big:
            where = rng.choice([document, *(p for p in pairs if isinstance(p, dict)), None])
            if isinstance(where, dict):
                where["big"] = 2**70
        chunked, whole = tmp_path / f"c{trial}.json", tmp_path / f"w{trial}.json"
        jsonio.write_document(
            chunked, document, stream_key="results", items=lambda r=results: iter(r),
            chunked=(("properties", "pairs"),),
        )  # fmt: skip
        jsonio.write_document(whole, document, stream_key="results", items=iter(results))
        assert chunked.read_bytes() == whole.read_bytes(), trial
        assert orjson.loads(chunked.read_bytes().replace(b"1180591620717411303424", b"0"))


# --- the mock remembers answers per text, within a run -------------------------------------


def test_mock_answers_are_the_same_with_and_without_its_memory(tmp_path):
    loaded = load_contract(EXAMPLES / "refund" / "decguard.yaml")
    data = resolve_dataset(loaded, None)
    for name in ("default", "order_sensitive"):
        first = decide_dataset(loaded, data, make_backend(loaded, name))
        backend = make_backend(loaded, name)
        decide_dataset(loaded, data, backend)  # every text remembered
        again = decide_dataset(loaded, data, backend)
        assert np.array_equal(first.probs, again.probs)
        assert backend._matched  # type: ignore[attr-defined]

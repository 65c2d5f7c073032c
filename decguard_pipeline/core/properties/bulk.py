"""Transformations of a whole dataset at once: ``Transform.generate_many`` for the properties
that draw from the random stream, equal to calling ``generate`` case by case.

What every case shares is built once (the orders and label variants with their
presentations, the fragment lists); a property's draws for all cases are hashed in one pass
and reduced modulo whatever each draw picks from, column-wise (``rng.StreamValues``); each
text is split once for all its samples. Only the assembly of each case's steps and texts is
a loop. ``test_properties_bulk.py`` holds every function here to ``generate``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.properties.rng import StreamValues, stream_keys, swaps_to_sample
from decguard_pipeline.core.properties.text import (
    EDGE_VARIANTS,
    RUN_VARIANTS,
    NotApplicable,
    insert_into_parts,
    replace_at_spans,
    sentence_parts,
    whitespace_spans,
)

if TYPE_CHECKING:
    from decguard_pipeline.core.properties.transforms import (
        Generated,
        GeneratedCase,
        LabelFormatTransform,
        OptionOrderTransform,
        Presentation,
        Steps,
        Transform,
        WhitespaceTransform,
        _InsertionTransform,
    )

_AT = itemgetter("at")


def option_orders(
    transform: OptionOrderTransform,
    seed: int,
    case_ids: Sequence[str],
    inputs: Sequence[DecisionInput],
) -> Iterator[GeneratedCase]:
    """Up to six options: every case samples from the same list of orders (all but the
    identity), so each order's steps and presentation are built once. The sampled orders
    are distinct and none is the identity: nothing to filter."""
    n = len(transform.spec.labels)
    identity = tuple(range(n))
    orders = [p for p in itertools.permutations(identity) if p != identity]
    made = [transform.apply("", ({"order": list(order)},)) for order in orders]
    shapes = [(m.steps, m.presentation) for m in made]
    return _sampled(transform, seed, case_ids, inputs, shapes, filtered=False)


def label_formats(
    transform: LabelFormatTransform,
    seed: int,
    case_ids: Sequence[str],
    inputs: Sequence[DecisionInput],
) -> Iterator[GeneratedCase]:
    """The label variants are the same for every case: each one's presentation is built
    once; a case's sample is then filtered as ``generate`` filters it (a variant may show
    the canonical labels, or the same labels as another)."""
    shapes = [(steps, transform.apply("", steps).presentation) for steps in transform.variants()]
    return _sampled(transform, seed, case_ids, inputs, shapes, filtered=True)


def _sampled(
    transform: Transform,
    seed: int,
    case_ids: Sequence[str],
    inputs: Sequence[DecisionInput],
    shapes: list[tuple[Steps, Presentation | None]],
    *,
    filtered: bool,
) -> Iterator[GeneratedCase]:
    """Each case: ``rng.sample(shapes, samples)`` (``min(samples, m)`` draws, draw ``i``
    modulo ``m - i``), the case's input shown each sampled way."""
    m, n = len(shapes), len(case_ids)
    k = min(transform.config.samples, m)
    offsets: list[list[int]] = [[] for _ in range(n)]
    if k:
        values = StreamValues(stream_keys(seed, transform.name, case_ids), [k] * n)
        offsets = values.mod(np.tile(m - np.arange(k), n)).reshape(n, k).tolist()
    for row, (original, drawn) in enumerate(zip(inputs, offsets, strict=True)):
        chosen = drawn if k == 1 else swaps_to_sample(drawn)
        generated: list[Generated] = [(shapes[i][0], original, shapes[i][1], {}) for i in chosen]
        if filtered:
            try:
                generated = transform.filtered(original, generated)
            except NotApplicable as exc:
                yield row, exc
                continue
        yield row, generated


def _texts(
    transform: Transform, inputs: Sequence[DecisionInput], *, non_empty: bool
) -> tuple[list[str | None], dict[int, Exception]]:
    """The text each case's transformation edits, or (in ``failed``) why there is none."""
    texts: list[str | None] = []
    failed: dict[int, Exception] = {}
    for row, original in enumerate(inputs):
        try:
            text = transform.text_of(original)
            if non_empty and not text.strip():
                raise NotApplicable("text is empty")
        except Exception as exc:
            failed[row] = exc
            text = None
        texts.append(text)
    return texts, failed


def insertions(
    transform: _InsertionTransform,
    seed: int,
    case_ids: Sequence[str],
    inputs: Sequence[DecisionInput],
) -> Iterator[GeneratedCase]:
    """Per sample, the fragment draws (modulo the number of fragments), then one position
    draw per inserted fragment (modulo the case's sentence count + 1)."""
    texts, failed = _texts(transform, inputs, non_empty=True)
    fragments = transform.config.fragments
    n_fragments, n_positions = transform.fragment_draws(), transform.position_draws()
    per_sample = n_fragments + n_positions
    count = transform.config.samples * per_sample
    rows = [row for row in range(len(inputs)) if row not in failed]
    parts = [sentence_parts(texts[row]) for row in rows]  # type: ignore[arg-type]
    boundaries = np.array([len(p) // 2 + 2 for p in parts], dtype=np.int64)  # sentences + 1
    is_fragment = np.tile(np.arange(per_sample) < n_fragments, transform.config.samples)
    moduli = np.where(is_fragment, len(fragments), boundaries[:, None])
    values = StreamValues(stream_keys(seed, transform.name, [case_ids[r] for r in rows]),
                          [count] * len(rows))  # fmt: skip
    drawn = values.mod(moduli.reshape(-1)).reshape(len(rows), count).tolist() if rows else []
    assembled = iter(zip(parts, drawn, strict=True))
    for row, original in enumerate(inputs):
        if row in failed:
            yield row, failed[row]
            continue
        case_parts, case_draws = next(assembled)
        generated: list[Generated] = []
        for start in range(0, count, per_sample):
            picks = case_draws[start : start + n_fragments]
            spots = case_draws[start + n_fragments : start + per_sample]
            steps = sorted(transform.placed([fragments[i] for i in picks], spots), key=_AT)
            ordered = tuple(steps)
            changed = transform.with_text(original, insert_into_parts(case_parts, ordered))
            generated.append((ordered, changed, None, {}))
        try:
            yield row, transform.filtered(original, generated)
        except NotApplicable as exc:
            yield row, exc


def whitespace(
    transform: WhitespaceTransform,
    seed: int,
    case_ids: Sequence[str],
    inputs: Sequence[DecisionInput],
) -> Iterator[GeneratedCase]:
    """Per sample: ``rng.sample(targets, edits)`` over start, the whitespace runs and end
    (draw ``i`` modulo ``targets - i``), then a variant per chosen target (modulo that
    target's number of variants). Targets are numbered in text order, which is also the
    order ``whitespace_order`` sorts steps in."""
    texts, failed = _texts(transform, inputs, non_empty=False)
    samples, edits = transform.config.samples, transform.config.edits
    starts, ends = EDGE_VARIANTS["start"], EDGE_VARIANTS["end"]
    # a run's replacements: the variants other than itself (all of them for other runs)
    others = {run: tuple(v for v in RUN_VARIANTS if v != run) for run in RUN_VARIANTS}
    rows = [row for row in range(len(inputs)) if row not in failed]
    spans = [whitespace_spans(texts[row]) for row in rows]  # type: ignore[arg-type]
    targets = [len(s) + 2 for s in spans]
    picked = [min(edits, t) for t in targets]  # targets each sample takes
    counts = [samples * 2 * e for e in picked]
    values = StreamValues(stream_keys(seed, transform.name, [case_ids[r] for r in rows]), counts)
    # the sample draws' moduli: targets - i for draw i of a sample (its variant draws get 1)
    case_of = np.repeat(np.arange(len(rows)), counts)
    at = np.arange(len(values)) - values.offsets[:-1][case_of]  # draw number in its case
    width = np.asarray(picked, dtype=np.int64)[case_of]  # draws per half sample
    within = at % (2 * width)
    moduli = np.where(within < width, np.asarray(targets, dtype=np.int64)[case_of] - within, 1)
    offsets = values.mod(moduli).tolist()
    by_size = {size: values.mod(size).tolist() for size in
               {len(starts), len(ends), *map(len, others.values()), len(RUN_VARIANTS)}}  # fmt: skip
    assembled = iter(zip(spans, targets, picked, values.offsets.tolist(), strict=False))
    for row, original in enumerate(inputs):
        if row in failed:
            yield row, failed[row]
            continue
        case_spans, t, e, first = next(assembled)
        text: str = texts[row]  # type: ignore[assignment]
        generated: list[Generated] = []
        for start in range(first, first + samples * 2 * e, 2 * e):
            chosen = swaps_to_sample(offsets[start : start + e])
            steps: list[tuple[int, dict[str, Any]]] = []
            for target, draw in zip(chosen, range(start + e, start + 2 * e), strict=True):
                if target == 0:
                    step = {"at": "start", "ws": starts[by_size[len(starts)][draw]]}
                elif target == t - 1:
                    step = {"at": "end", "ws": ends[by_size[len(ends)][draw]]}
                else:
                    s, end = case_spans[target - 1]
                    variants = others.get(text[s:end], RUN_VARIANTS)
                    step = {"at": target - 1, "ws": variants[by_size[len(variants)][draw]]}
                steps.append((target, step))
            steps.sort(key=_FIRST)
            ordered = tuple(step for _, step in steps)
            changed = transform.with_text(original, replace_at_spans(text, case_spans, ordered))
            generated.append((ordered, changed, None, {}))
        try:
            yield row, transform.filtered(original, generated)
        except NotApplicable as exc:
            yield row, exc


_FIRST = itemgetter(0)

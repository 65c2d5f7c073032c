"""Transformations of a whole dataset at once: :func:`generate_all` is ``Transform.generate_many``
column-wise for the properties that draw from the random stream, equal to calling ``generate``
case by case.

What every case shares is built once (the orders and label variants with their
presentations, the fragment lists); a property's draws for all cases are hashed in one pass
and reduced modulo whatever each draw picks from, column-wise (``rng.StreamValues``); each
text is split once for all its samples. Only the assembly of each case's steps and texts is
a loop. ``test_properties_bulk.py`` holds every function here to ``generate``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from itertools import chain, repeat
from operator import itemgetter

import numpy as np

from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.properties.rng import StreamValues, stream_keys
from decguard_pipeline.core.properties.text import (
    EDGE_VARIANTS,
    RUN_VARIANTS,
    NotApplicable,
    insert_into_parts,
    piece_bounds,
    replace_at_bounds,
    sentence_parts,
    whitespace_pieces,
)
from decguard_pipeline.core.properties.transform import (
    Generated,
    GeneratedCase,
    Presentation,
    Steps,
    Transform,
)
from decguard_pipeline.core.properties.transforms import (
    LabelFormatTransform,
    OptionOrderTransform,
    WhitespaceTransform,
    _InsertionTransform,
)

_AT = itemgetter("at")


def generate_all(
    transform: Transform, seed: int, case_ids: Sequence[str], inputs: Sequence[DecisionInput]
) -> Iterator[GeneratedCase]:
    """Every case's transformations, as ``transform.generate_many`` gives them: column-wise
    for the properties with a bulk path, case by case for the others."""
    if isinstance(transform, OptionOrderTransform):
        if len(transform.spec.labels) > transform.ENUMERATE_UP_TO:  # shuffles: case by case
            return transform.generate_many(seed, case_ids, inputs)
        return option_orders(transform, seed, case_ids, inputs)
    if isinstance(transform, LabelFormatTransform):
        return label_formats(transform, seed, case_ids, inputs)
    if isinstance(transform, _InsertionTransform):
        return insertions(transform, seed, case_ids, inputs)
    if isinstance(transform, WhitespaceTransform):
        return whitespace(transform, seed, case_ids, inputs)
    return transform.generate_many(seed, case_ids, inputs)


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
    modulo ``m - i``), the case's input shown each sampled way. As the input is the case's
    own for every shape, ``generate``'s filter keeps the same shapes for the same sample:
    it is applied once per distinct sample."""
    m, n = len(shapes), len(case_ids)
    k = min(transform.config.samples, m)
    chosen: list[list[int]] = [[] for _ in range(n)]
    if k:
        values = StreamValues(stream_keys(seed, transform.name, case_ids), [k] * n)
        offsets = values.mod(np.tile(m - np.arange(k), n)).reshape(n, k)
        chosen = _sample_rows(offsets).tolist()
    kept: dict[tuple[int, ...], list[int] | NotApplicable] = {}
    for row, (original, picks) in enumerate(zip(inputs, chosen, strict=True)):
        if filtered:
            key = tuple(picks)
            found = kept.get(key)
            if found is None:
                found = kept[key] = _kept(transform, shapes, picks)
            if isinstance(found, NotApplicable):
                yield row, found
                continue
            picks = found
        yield row, [(shapes[i][0], original, shapes[i][1], {}) for i in picks]


def _kept(
    transform: Transform, shapes: list[tuple[Steps, Presentation | None]], picks: list[int]
) -> list[int] | NotApplicable:
    """The picks ``generate``'s filter keeps for an input shown as ``shapes`` (the same for
    every input: what differs between two picks, or from the input, is the presentation)."""
    marker = object()  # stands for the input
    generated = [(shapes[i][0], marker, shapes[i][1], {}) for i in picks]
    try:
        survivors = transform.filtered(marker, generated)  # type: ignore[arg-type]
    except NotApplicable as exc:
        return exc
    return [pick for pick, item in zip(picks, generated, strict=True) if any(
        item is survivor for survivor in survivors
    )]  # fmt: skip


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
    samples = transform.config.samples
    count = samples * per_sample
    rows = [row for row in range(len(inputs)) if row not in failed]
    parts = [sentence_parts(texts[row]) for row in rows]  # type: ignore[arg-type]
    boundaries = np.array([len(p) // 2 + 2 for p in parts], dtype=np.int64)  # sentences + 1
    is_fragment = np.tile(np.arange(per_sample) < n_fragments, samples)
    moduli = np.where(is_fragment, len(fragments), boundaries[:, None])
    values = StreamValues(stream_keys(seed, transform.name, [case_ids[r] for r in rows]),
                          [count] * len(rows))  # fmt: skip
    drawn = values.mod(moduli.reshape(-1)).reshape(len(rows) * samples, per_sample)
    # per sample: the positions in order (a stable sort: insertions at the same boundary
    # keep their draw order) and the fragment each one inserts
    spots = drawn[:, n_fragments:]
    order = np.argsort(spots, axis=1, kind="stable")
    ats = np.take_along_axis(spots, order, axis=1).tolist()
    picks = drawn[:, :n_fragments]
    if n_fragments == n_positions:  # a fragment per position
        picks = np.take_along_axis(picks, order, axis=1)
    else:  # one fragment for every position
        picks = np.repeat(picks[:, :1], n_positions, axis=1)
    texts_of = np.asarray(fragments, dtype=object)[picks].tolist() if len(picks) else []
    assembled = iter(zip(parts, range(0, len(ats), samples), strict=True))
    with_text, filtered = transform.with_text, transform.filtered
    for row, original in enumerate(inputs):
        if row in failed:
            yield row, failed[row]
            continue
        case_parts, first = next(assembled)
        plain = type(original) is str  # the edited text is the input
        generated: list[Generated] = []
        for sample_ats, sample_texts in zip(
            ats[first : first + samples], texts_of[first : first + samples], strict=True
        ):
            ordered = tuple([
                {"at": at, "text": text} for at, text in zip(sample_ats, sample_texts, strict=True)
            ])  # fmt: skip
            changed = insert_into_parts(case_parts, sample_ats, sample_texts)
            value = changed if plain else with_text(original, changed)
            generated.append((ordered, value, None, {}))
        try:
            yield row, filtered(original, generated)
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
    order ``whitespace_order`` sorts steps in. Which targets, in which order, and which
    variant each gets are worked out for all samples at once; a loop then writes the steps
    and texts."""
    texts, failed = _texts(transform, inputs, non_empty=False)
    samples, edits = transform.config.samples, transform.config.edits
    rows = [row for row in range(len(inputs)) if row not in failed]
    # each text cut once at its runs (C loops: split, lengths, the kind of each run)
    pieces = [whitespace_pieces(texts[row]) for row in rows]  # type: ignore[arg-type]
    n_runs = [len(p) // 2 for p in pieces]
    targets = np.array(n_runs, dtype=np.int64) + 2
    picked = np.minimum(edits, targets)  # targets each sample takes
    values = StreamValues(
        stream_keys(seed, transform.name, [case_ids[r] for r in rows]),
        (samples * 2 * picked).tolist(),
    )
    # Each sample is 2e draws (e = picked): e target draws (modulo targets - i), then e
    # variant draws. Samples are grouped by e (every case has the same e unless its text
    # has fewer targets than ``edits``).
    sample_case = np.repeat(np.arange(len(rows)), samples)
    sample_start = (values.offsets[:-1][sample_case]
                    + np.tile(np.arange(samples), len(rows)) * 2 * picked[sample_case])  # fmt: skip
    # the variants a target may get: start, end, each kind of run (one of RUN_VARIANTS, or
    # any other run), as rows of a table padded with ""
    kinds = {run: k for k, run in enumerate(RUN_VARIANTS)}
    choices = [EDGE_VARIANTS["start"], EDGE_VARIANTS["end"]]
    choices += [tuple(v for v in RUN_VARIANTS if v != run) for run in RUN_VARIANTS]
    choices.append(RUN_VARIANTS)  # a run that is none of them
    sizes = np.array([len(c) for c in choices], dtype=np.int64)
    table = np.array([list(c) + [""] * (max(sizes) - len(c)) for c in choices], dtype=object)
    # the kind of each run, case after case (2 + its index in RUN_VARIANTS, or the last kind)
    runs = list(chain.from_iterable(p[1::2] for p in pieces))
    flat_kinds = np.fromiter(
        map(kinds.get, runs, repeat(len(RUN_VARIANTS))), dtype=np.int64, count=len(runs)
    ) + 2  # fmt: skip
    run_first = np.concatenate(([0], np.cumsum(n_runs)))
    at_of = [None] * len(sample_case)  # per sample: the sorted steps' "at" and "ws"
    for e in sorted(set(picked.tolist())):  # (np.unique would import numpy.ma: 7 ms)
        group = np.flatnonzero(picked[sample_case] == e)
        first = sample_start[group]
        draws = first[:, None] + np.arange(2 * e)
        limit = targets[sample_case[group]]
        chosen = _sample_rows(_mod_at(values, draws[:, :e], limit[:, None] - np.arange(e)))
        order = np.argsort(chosen, axis=1, kind="stable")
        chosen = np.take_along_axis(chosen, order, axis=1)
        variant_draw = np.take_along_axis(draws[:, e:], order, axis=1)
        last = limit[:, None] - 1
        case = sample_case[group][:, None]
        run = np.clip(chosen - 1, 0, None)
        flat = np.minimum(run_first[case] + run, max(len(flat_kinds) - 1, 0))
        run_kind = flat_kinds[flat] if len(flat_kinds) else np.zeros_like(chosen)
        kind = np.where(chosen == 0, 0, np.where(chosen == last, 1, run_kind))
        ws = table[kind, _mod_at(values, variant_draw, sizes[kind])]
        at = (chosen - 1).astype(object)
        at[chosen == 0] = "start"
        at[chosen == last] = "end"
        for position, sample_ats, sample_ws in zip(group.tolist(), at.tolist(), ws.tolist(),
                                                   strict=True):  # fmt: skip
            at_of[position] = (sample_ats, sample_ws)
    samples_of = iter(range(0, len(sample_case), samples))
    cases = iter(zip(pieces, strict=False))
    with_text, filtered = transform.with_text, transform.filtered
    for row, original in enumerate(inputs):
        if row in failed:
            yield row, failed[row]
            continue
        (case_pieces,) = next(cases)
        bounds = piece_bounds(case_pieces)
        text: str = texts[row]  # type: ignore[assignment]
        plain = type(original) is str  # the edited text is the input
        first = next(samples_of)
        generated: list[Generated] = []
        for sample_ats, sample_ws in at_of[first : first + samples]:  # type: ignore[misc]
            ordered = tuple([
                {"at": at, "ws": ws} for at, ws in zip(sample_ats, sample_ws, strict=True)
            ])  # fmt: skip
            changed = replace_at_bounds(text, bounds, sample_ats, sample_ws)
            value = changed if plain else with_text(original, changed)
            generated.append((ordered, value, None, {}))
        try:
            yield row, filtered(original, generated)
        except NotApplicable as exc:
            yield row, exc


def _mod_at(values: StreamValues, draws: np.ndarray, moduli: np.ndarray) -> np.ndarray:
    """``value % modulus`` for the stream values at the positions ``draws`` (same shape)."""
    return values.mod_at(draws.reshape(-1), moduli.reshape(-1)).reshape(draws.shape)


def _sample_rows(offsets: np.ndarray) -> np.ndarray:
    """``swaps_to_sample`` for every row of ``offsets`` (n, e) at once: draw ``i`` swaps
    position ``i`` with ``i + offsets[:, i]``; the item read at that position is the last
    one written there (by an earlier draw), else the position itself."""
    n, e = offsets.shape
    positions = offsets + np.arange(e)
    out = np.empty_like(positions)
    written: list[tuple[np.ndarray, np.ndarray]] = []  # (position, item) per earlier draw
    for i in range(e):
        j = positions[:, i]
        here, there = j.copy(), np.full(n, i)
        for where, item in written:  # in draw order: a later write wins
            here = np.where(where == j, item, here)
            there = np.where(where == i, item, there)
        out[:, i] = here
        written.append((j, there))
    return out

"""Replayable transformations, one class per property (DecGuard §9.3).

A transformation is a tuple of JSON-ready *steps*; ``apply(original, steps)`` is pure, so a
stored failure regenerates from its seed and a failing transformation shrinks by trying
smaller step tuples. How the options are shown (``presentation``: ``(shown label, contract
label)`` pairs in the order the model sees them, ``None`` for the canonical labels) is kept
apart from the input.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from decguard_pipeline.core.contract.decision import DecisionSpec
from decguard_pipeline.core.contract.properties import (
    AnyProperty,
    Fuzz,
    Inversion,
    IrrelevantContext,
    LabelFormat,
    Monotonic,
    OptionOrder,
    Paraphrase,
    RepeatedContext,
    Whitespace,
)
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.properties.rng import Rng, case_stream
from decguard_pipeline.core.properties.text import (
    EDGE_VARIANTS,
    RUN_VARIANTS,
    NotApplicable,
    format_label,
    get_text,
    insert_fragments,
    replace_whitespace,
    sentence_count,
    set_text,
    whitespace_order,
    whitespace_runs,
)

Step = dict[str, Any]
Steps = tuple[Step, ...]
Presentation = tuple[tuple[str, str], ...]
# One transformation as the bulk path gives it: (steps, input, presentation, provenance), the
# fields of a Mutation without building one per pair.
Generated = tuple[Steps, DecisionInput, "Presentation | None", dict[str, Any]]
# Per case, in dataset order: its distinct transformations, or what ``generate`` raised.
GeneratedCase = tuple[int, "list[Generated] | Exception"]

# A paraphrase source as the transformation sees it: (text, case_id, n, seed) -> paraphrases.
ParaphraseFn = Callable[[str, str, int, int], list[str]]

__all__ = ["Mutation", "NotApplicable", "Transform", "is_no_op", "make_transform"]


@dataclass(frozen=True)
class Mutation:
    steps: Steps
    input: DecisionInput
    presentation: Presentation | None = None
    provenance: dict[str, Any] = field(default_factory=dict)


def is_no_op(original: DecisionInput, mutation: Mutation) -> bool:
    return mutation.presentation is None and mutation.input == original


def canonical_or(presentation: Presentation, labels: Sequence[str]) -> Presentation | None:
    """``None`` when the presentation is just the contract labels in canonical order."""
    identity = tuple((label, label) for label in labels)
    return None if presentation == identity else presentation


def _drop_one(steps: Steps) -> Iterator[Steps]:
    if len(steps) > 1:
        for index in range(len(steps)):
            yield steps[:index] + steps[index + 1 :]


class Transform:
    """Candidates (seeded step tuples) for a case, their pure application and reductions.

    ``generate`` (one case) is the definition; ``generate_many`` applies it to every case of
    a dataset. ``core.properties.bulk.generate_all`` is the column-wise equivalent a run uses
    (tested against ``generate``); this module knows nothing of it, so the two never import
    each other."""

    name: ClassVar[str]
    # Identity paraphrases are kept on purpose: they test that the model answers the same
    # input the same way twice.
    keeps_no_ops: ClassVar[bool] = False
    # whether candidates draw from the case's random stream (else no stream is built)
    draws: ClassVar[bool] = True

    def __init__(self, config: Any, spec: DecisionSpec, fuzz: Fuzz) -> None:
        self.config = config
        self.spec = spec
        self.fuzz = fuzz

    def candidates(self, case_id: str, original: DecisionInput, rng: Rng) -> list[Steps]:
        raise NotImplementedError

    def apply(self, original: DecisionInput, steps: Steps) -> Mutation:
        raise NotImplementedError

    def reductions(self, steps: Steps) -> Iterator[Steps]:
        """Smaller step tuples to try while minimising (none for irreducible properties)."""
        return iter(())

    def generate(self, case_id: str, original: DecisionInput, rng: Rng) -> list[Mutation]:
        """Distinct mutations that change something; NotApplicable when none is left."""
        kept: list[Mutation] = []
        for steps in self.candidates(case_id, original, rng):
            mutation = self.apply(original, steps)
            if not self.keeps_no_ops and is_no_op(original, mutation):
                continue
            if any(
                (m.input, m.presentation) == (mutation.input, mutation.presentation) for m in kept
            ):
                continue
            kept.append(mutation)
        if not kept:
            raise NotApplicable("no transformation changes this case")
        return kept

    def generate_many(
        self, seed: int, case_ids: Sequence[str], inputs: Sequence[DecisionInput]
    ) -> Iterator[GeneratedCase]:
        """``generate`` for every case in dataset order, with each case's own stream (the
        definition; ``core.properties.bulk.generate_all`` gives the same column-wise)."""
        for row, (case_id, original) in enumerate(zip(case_ids, inputs, strict=True)):
            rng = case_stream(seed, self.name, case_id) if self.draws else _NO_STREAM
            try:
                mutations = self.generate(case_id, original, rng)
            except Exception as exc:
                yield row, exc
                continue
            yield row, [(m.steps, m.input, m.presentation, m.provenance) for m in mutations]

    def filtered(self, original: DecisionInput, generated: list[Generated]) -> list[Generated]:
        """``generate``'s filter on bulk results: no-ops (unless kept) and repeats dropped."""
        kept: list[Generated] = []
        for item in generated:
            if not self.keeps_no_ops and item[2] is None and item[1] == original:
                continue
            if any((k[1], k[2]) == (item[1], item[2]) for k in kept):
                continue
            kept.append(item)
        if not kept:
            raise NotApplicable("no transformation changes this case")
        return kept

    def text_of(self, value: DecisionInput) -> str:
        return get_text(value, self.fuzz.text_field)

    def with_text(self, value: DecisionInput, text: str) -> DecisionInput:
        return set_text(value, self.fuzz.text_field, text)


class OptionOrderTransform(Transform):
    name = "option_order"
    config: OptionOrder
    ENUMERATE_UP_TO = 6  # 6! = 720 orders; beyond that, draw shuffles
    MAX_ATTEMPTS = 1000

    def candidates(self, case_id: str, original: DecisionInput, rng: Rng) -> list[Steps]:
        n = len(self.spec.labels)
        identity = tuple(range(n))
        if n <= self.ENUMERATE_UP_TO:
            orders = [p for p in itertools.permutations(identity) if p != identity]
            chosen = rng.sample(orders, self.config.samples)
        else:
            chosen, attempts = [], 0
            while len(chosen) < self.config.samples and attempts < self.MAX_ATTEMPTS:
                attempts += 1
                order = tuple(rng.shuffled(identity))
                if order != identity and order not in chosen:
                    chosen.append(order)
        return [({"order": list(order)},) for order in chosen]

    def apply(self, original: DecisionInput, steps: Steps) -> Mutation:
        labels = self.spec.labels
        shown = tuple((labels[i], labels[i]) for i in steps[0]["order"])
        return Mutation(steps, original, canonical_or(shown, labels))

    def reductions(self, steps: Steps) -> Iterator[Steps]:
        """Undo one adjacent inversion at a time (never back to the identity)."""
        order = list(steps[0]["order"])
        for j in range(len(order) - 1):
            if order[j] > order[j + 1]:
                closer = order.copy()
                closer[j], closer[j + 1] = closer[j + 1], closer[j]
                if closer != sorted(closer):
                    yield ({"order": closer},)


class LabelFormatTransform(Transform):
    name = "label_format"
    config: LabelFormat
    _variants: list[Steps] | None = None

    def variants(self) -> list[Steps]:
        """Every style that changes some label, then one variant per alias rank (the same
        for every case: computed once)."""
        if self._variants is None:
            self._variants = self._all_variants()
        return self._variants

    def _all_variants(self) -> list[Steps]:
        labels = self.spec.labels
        found: list[Steps] = []
        for style in self.config.styles:
            steps = tuple(
                {"label": label, "style": style}
                for index, label in enumerate(labels)
                if format_label(label, style, index) != label
            )
            if steps:
                found.append(steps)
        aliases = self.config.aliases
        for rank in range(max((len(forms) for forms in aliases.values()), default=0)):
            found.append(
                tuple(
                    {"label": label, "alias": aliases[label][rank]}
                    for label in labels
                    if label in aliases and len(aliases[label]) > rank
                )
            )
        return [steps for steps in found if self.distinct(steps)]

    def shown(self, steps: Steps) -> dict[str, str]:
        labels = self.spec.labels
        shown = {label: label for label in labels}
        for step in steps:
            label = step["label"]
            if "alias" in step:
                shown[label] = step["alias"]
            else:
                shown[label] = format_label(label, step["style"], labels.index(label))
        return shown

    def distinct(self, steps: Steps) -> bool:
        forms = list(self.shown(steps).values())
        return len(set(forms)) == len(forms)

    def candidates(self, case_id: str, original: DecisionInput, rng: Rng) -> list[Steps]:
        return rng.sample(self.variants(), self.config.samples)

    def apply(self, original: DecisionInput, steps: Steps) -> Mutation:
        shown = self.shown(steps)
        labels = self.spec.labels
        return Mutation(
            steps, original, canonical_or(tuple((shown[lbl], lbl) for lbl in labels), labels)
        )

    def reductions(self, steps: Steps) -> Iterator[Steps]:
        return (smaller for smaller in _drop_one(steps) if self.distinct(smaller))


class _InsertionTransform(Transform):
    """Sentences inserted at sentence boundaries; each insertion is one removable step."""

    config: IrrelevantContext | RepeatedContext

    def fragments(self, rng: Rng) -> list[str]:
        raise NotImplementedError

    def candidates(self, case_id: str, original: DecisionInput, rng: Rng) -> list[Steps]:
        text = self.text_of(original)
        if not text.strip():
            raise NotApplicable("text is empty")
        boundaries = sentence_count(text) + 1
        chosen: list[Steps] = []
        for _ in range(self.config.samples):
            # all fragments are drawn before any position: the draw order is part of the format
            steps = [{"at": rng.below(boundaries), "text": f} for f in self.fragments(rng)]
            chosen.append(tuple(sorted(steps, key=lambda step: step["at"])))
        return chosen

    def apply(self, original: DecisionInput, steps: Steps) -> Mutation:
        text = insert_fragments(self.text_of(original), steps)
        return Mutation(steps, self.with_text(original, text))

    def reductions(self, steps: Steps) -> Iterator[Steps]:
        return _drop_one(steps)

    # For the bulk path: the draws of one sample are ``fragment_draws()`` fragment choices,
    # then ``position_draws()`` positions; ``placed`` makes the sample's steps from them.
    def fragment_draws(self) -> int:
        raise NotImplementedError

    def position_draws(self) -> int:
        raise NotImplementedError

    def placed(self, fragments: list[str], positions: list[int]) -> list[Step]:
        raise NotImplementedError


class IrrelevantContextTransform(_InsertionTransform):
    name = "irrelevant_context"
    config: IrrelevantContext

    def fragments(self, rng: Rng) -> list[str]:
        return [rng.choice(self.config.fragments) for _ in range(self.config.insertions)]

    def fragment_draws(self) -> int:
        return self.config.insertions

    def position_draws(self) -> int:
        return self.config.insertions

    def placed(self, fragments: list[str], positions: list[int]) -> list[Step]:
        return [{"at": at, "text": f} for at, f in zip(positions, fragments, strict=True)]


class RepeatedContextTransform(_InsertionTransform):
    name = "repeated_context"
    config: RepeatedContext

    def fragments(self, rng: Rng) -> list[str]:
        return [rng.choice(self.config.fragments)] * self.config.repeats

    def fragment_draws(self) -> int:
        return 1

    def position_draws(self) -> int:
        return self.config.repeats

    def placed(self, fragments: list[str], positions: list[int]) -> list[Step]:
        return [{"at": at, "text": fragments[0]} for at in positions]


class WhitespaceTransform(Transform):
    name = "whitespace"
    config: Whitespace

    def candidates(self, case_id: str, original: DecisionInput, rng: Rng) -> list[Steps]:
        runs = whitespace_runs(self.text_of(original))
        targets: list[int | str] = ["start", *range(len(runs)), "end"]
        chosen: list[Steps] = []
        for _ in range(self.config.samples):
            steps = []
            for target in rng.sample(targets, self.config.edits):
                if isinstance(target, str):
                    variants: Sequence[str] = EDGE_VARIANTS[target]
                else:
                    variants = [v for v in RUN_VARIANTS if v != runs[target]]
                steps.append({"at": target, "ws": rng.choice(variants)})
            chosen.append(tuple(sorted(steps, key=whitespace_order)))
        return chosen

    def apply(self, original: DecisionInput, steps: Steps) -> Mutation:
        text = replace_whitespace(self.text_of(original), steps)
        return Mutation(steps, self.with_text(original, text))

    def reductions(self, steps: Steps) -> Iterator[Steps]:
        return _drop_one(steps)


class ParaphraseTransform(Transform):
    name = "paraphrase"
    keeps_no_ops = True
    draws = False
    config: Paraphrase

    def __init__(
        self,
        config: Paraphrase,
        spec: DecisionSpec,
        fuzz: Fuzz,
        paraphrase: ParaphraseFn,
        provenance: Callable[[], dict[str, Any]],
        provider: str,
    ) -> None:
        super().__init__(config, spec, fuzz)
        self.paraphrase = paraphrase
        self.provenance = provenance
        self.provider = provider

    def candidates(self, case_id: str, original: DecisionInput, rng: Rng) -> list[Steps]:
        text = self.text_of(original)
        found = self.paraphrase(text, case_id, self.config.samples, self.fuzz.seed)
        if not found:
            raise NotApplicable(f"paraphrase provider {self.provider!r} gave none")
        return [({"text": p},) for p in found[: self.config.samples]]

    def apply(self, original: DecisionInput, steps: Steps) -> Mutation:
        value = self.with_text(original, steps[0]["text"])
        return Mutation(steps, value, provenance=self.provenance())


class InversionTransform(Transform):
    name = "inversion"
    draws = False
    config: Inversion

    def candidates(self, case_id: str, original: DecisionInput, rng: Rng) -> list[Steps]:
        text = self.text_of(original)
        matching = [r for r in self.config.rewrites if r.find in text]
        if not matching:
            raise NotApplicable("no rewrite matches the text")
        return [({"find": r.find, "replace": r.replace},) for r in matching[: self.config.samples]]

    def apply(self, original: DecisionInput, steps: Steps) -> Mutation:
        step = steps[0]
        text = self.text_of(original).replace(step["find"], step["replace"], 1)
        return Mutation(steps, self.with_text(original, text))


class MonotonicTransform(Transform):
    name = "monotonic"
    draws = False
    config: Monotonic

    def value_of(self, original: DecisionInput) -> int | float:
        name = self.config.field
        value = original.get(name) if isinstance(original, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise NotApplicable(f"input field {name!r} is missing or not a number")
        if not math.isfinite(value):
            raise NotApplicable(f"input field {name!r} is not finite")
        return value

    def candidates(self, case_id: str, original: DecisionInput, rng: Rng) -> list[Steps]:
        self.value_of(original)
        return [({"field": self.config.field, "delta": delta},) for delta in self.config.deltas]

    def apply(self, original: DecisionInput, steps: Steps) -> Mutation:
        value = self.value_of(original)
        delta = steps[0]["delta"]
        changed: int | float = value + delta
        # integer fields stay integers when the step is whole (5 + 10.0 -> 15, 5 + 0.5 -> 5.5)
        if isinstance(value, int) and float(delta).is_integer():
            changed = int(changed)
        assert isinstance(original, dict)
        return Mutation(steps, {**original, self.config.field: changed})


_NO_STREAM = Rng("unused")  # handed to transforms that never draw

TRANSFORMS: dict[str, type[Transform]] = {
    cls.name: cls
    for cls in (
        OptionOrderTransform,
        LabelFormatTransform,
        IrrelevantContextTransform,
        RepeatedContextTransform,
        WhitespaceTransform,
        InversionTransform,
        MonotonicTransform,
    )
}


def make_transform(
    name: str,
    config: AnyProperty,
    spec: DecisionSpec,
    fuzz: Fuzz,
    *,
    paraphrase: ParaphraseFn | None = None,
    provenance: Callable[[], dict[str, Any]] | None = None,
    provider: str = "identity",
) -> Transform:
    if name == "paraphrase":
        if paraphrase is None or provenance is None:
            raise ValueError("the paraphrase property needs a paraphrase source")
        assert isinstance(config, Paraphrase)
        return ParaphraseTransform(config, spec, fuzz, paraphrase, provenance, provider)
    return TRANSFORMS[name](config, spec, fuzz)

"""Replayable transformations, one class per property (DecGuard §9.3), and
:func:`make_transform` to build a property's.

A transformation is a tuple of JSON-ready *steps* (``core.properties.transform``);
``apply(original, steps)`` is pure, so a stored failure regenerates from its seed and a
failing transformation shrinks by trying smaller step tuples. How the options are shown
(``presentation``: ``(shown label, contract label)`` pairs in the order the model sees them,
``None`` for the canonical labels) is kept apart from the input.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

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
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.properties.rng import Rng
from decguard_pipeline.core.properties.text import (
    EDGE_VARIANTS,
    RUN_VARIANTS,
    NotApplicable,
    format_label,
    insert_fragments,
    replace_whitespace,
    sentence_count,
    whitespace_order,
    whitespace_runs,
)
from decguard_pipeline.core.properties.transform import (
    Mutation,
    ParaphraseFn,
    Presentation,
    Step,
    Steps,
    Transform,
    canonical_or,
    drop_one,
)

__all__ = ["NotApplicable", "make_transform"]


class OptionOrderTransform(Transform):
    name = "option_order"
    config: OptionOrder
    ENUMERATE_UP_TO = 6  # 6! = 720 orders; beyond that, draw shuffles
    MAX_ATTEMPTS = 1000

    def __init__(self, config: OptionOrder, spec: DecisionSpec, fuzz: Fuzz) -> None:
        super().__init__(config, spec, fuzz)
        self._shown: dict[tuple[int, ...], Presentation | None] = {}

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
        # the presentation of an order, made once per order (minimisation applies the same
        # few orders to thousands of failing cases)
        order = tuple(steps[0]["order"])
        if order in self._shown:
            return Mutation(steps, original, self._shown[order])
        labels = self.spec.labels
        shown = canonical_or(tuple((labels[i], labels[i]) for i in order), labels)
        if len(self._shown) < 4096:  # a bound for many labels, whose orders are drawn
            self._shown[order] = shown
        return Mutation(steps, original, shown)

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
        return (smaller for smaller in drop_one(steps) if self.distinct(smaller))


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
        return drop_one(steps)

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
        return drop_one(steps)


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

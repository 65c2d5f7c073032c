"""What a transformation is (DecGuard §9.3): a tuple of JSON-ready *steps* that ``apply``
turns into a :class:`Mutation` of the original input, and :class:`Transform`, the seeded
candidates of one property with their reductions. Each property's transform is in
``core.properties.transforms``; the column-wise generation in ``core.properties.bulk``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.properties.rng import Rng, case_stream
from decguard_pipeline.core.properties.text import NotApplicable, get_text, set_text

if TYPE_CHECKING:
    from decguard_pipeline.core.contract.properties import Fuzz

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


def drop_one(steps: Steps) -> Iterator[Steps]:
    if len(steps) > 1:
        for index in range(len(steps)):
            yield steps[:index] + steps[index + 1 :]


_NO_STREAM = Rng("unused")  # handed to transforms that never draw


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

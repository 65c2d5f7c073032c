"""Greedy minimisation of a failing transformation (DecGuard §9.5), as a pure state machine.

The search never calls a backend itself: ``next()`` says which mutation to decide,
``feed()`` says whether it still violated. The caller can therefore advance many searches
together, one backend call per search per round, while each search makes exactly the calls
DecGuard would make in order, within its budget.
"""

from __future__ import annotations

from collections.abc import Generator

from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.properties.transform import Mutation, Steps, Transform, is_no_op


class GreedySearch:
    """Scan ``reductions(current)`` in order; the first candidate that still violates becomes
    current and the scan restarts; stop when a scan finds none or the budget is spent.
    No-op candidates are skipped without a call; errored calls count but do not improve."""

    def __init__(
        self, transform: Transform, original: DecisionInput, steps: Steps, budget: int
    ) -> None:
        self.transform = transform
        self.original = original
        self.budget = budget
        self.calls = 0
        self.best: Mutation | None = None
        self._search = self._scan(steps)
        self._pending: Mutation | None = next(self._search, None)

    def _scan(self, steps: Steps) -> Generator[Mutation, bool, None]:
        improved = True
        while improved and self.calls < self.budget:
            improved = False
            for candidate in self.transform.reductions(steps):
                if self.calls >= self.budget:
                    break
                mutation = self.transform.apply(self.original, candidate)
                if is_no_op(self.original, mutation):
                    continue
                self.calls += 1
                if (yield mutation):
                    steps, self.best, improved = candidate, mutation, True
                    break

    def next(self) -> Mutation | None:
        """The mutation to decide now; None when the search is over."""
        return self._pending

    def feed(self, violates: bool) -> None:
        """The outcome of the pending mutation (False also for an errored call)."""
        assert self._pending is not None, "the search is over"
        try:
            self._pending = self._search.send(violates)
        except StopIteration:
            self._pending = None

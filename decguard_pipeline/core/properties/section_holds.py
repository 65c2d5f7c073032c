"""Whether a stored ``properties`` section plainly holds, checked a column at a time, and
its property checks when its pairs are typed records (``typed_section``).

Free of pydantic: the settings may be the models (``core.contract.properties``) or their
structs (``core.contract.settings_structs``), which carry the same attributes.
"""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.properties.pair_columns import STRUCTS, Access, LaterHalf, matched
from decguard_pipeline.core.properties.summary import property_checks, summaries_of
from decguard_pipeline.core.properties.typed_section import Held, TypedSection
from decguard_pipeline.core.results import CaseResults


def holds(
    summaries: list[dict[str, Any]],
    pairs: list[Any],
    skipped: list[Any],
    enabled: dict[str, Any],  # the enabled properties' settings
    results: CaseResults,
    row_of: dict[str, int],
    access: Access,
    later: LaterHalf | None = None,
    held: Held | None = None,
) -> bool:
    """True only when the one-by-one checks (``_check_pairs``, ``_check_context``,
    ``_check_summaries``) would find nothing; False sends them to find the first problem.
    ``later``: the section's pairs after ``pairs``, checked by another process; ``held``:
    what ``typed_section.pairs_hold`` found of ``pairs``."""
    try:
        found = matched(pairs, skipped, enabled, results, row_of, access, held)
        if found is None:
            return False
        names = [s["property"] for s in summaries]
        if len(names) != len(set(names)) or any(name not in enabled for name in names):
            return False
        figures = found.figures(names, enabled, pairs, access)
        if later is not None:
            # before waiting for the other process: a set, not np.intersect1d (which imports
            # numpy.ma, 12-26 ms, the first time)
            hashes = set(map(hash, map(access.get("id"), pairs)))
            verdict = later.verdict()
            if verdict is None:
                return False
            if not hashes.isdisjoint(verdict.hashes.tolist()):
                return False  # an id on both sides (or two ids of one hash: checked whole)
            figures = {name: figures[name] + verdict.figures[name] for name in names}
        again = summaries_of(names, enabled, figures, skipped, len(results), get=access.get)
        return again == summaries
    except (ArithmeticError, LookupError, TypeError, ValueError):
        return False  # whatever it is, the one-by-one checks meet it the way they always did


def typed_checks(
    summaries: list[dict[str, Any]],
    typed: TypedSection[Any],
    config: Any,
    results: CaseResults,
    later: LaterHalf | None = None,
    held: Held | None = None,
) -> list[dict[str, Any]] | None:
    """The property checks of a section whose pairs and skips are ``typed`` and whose
    settings are ``config``, when it plainly holds (:func:`holds`); else None, for the
    one-by-one checks to find the problem. ``later`` and ``held``: see :func:`holds`."""
    enabled = config.enabled()
    row_of = {case_id: row for row, case_id in enumerate(results.case_ids)}
    pairs, skipped = typed.pairs, typed.skipped
    if holds(summaries, pairs, skipped, enabled, results, row_of, STRUCTS, later, held):
        return property_checks(summaries, config)
    return None

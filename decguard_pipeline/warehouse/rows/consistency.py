"""The ``consistency`` section of a golden evaluation with ``pipeline.repeats`` as warehouse
data: the whole section in ``runs.consistency_json`` (written by the evaluation, which asked
the repetitions) and its headline numbers as ``metrics`` rows (written by the scoring step, so
SQL, the summary and the UI read them beside accuracy)."""

from __future__ import annotations

import json
from typing import Any

from decguard_pipeline.core.consistency.section import MEASURES

PREFIX = "consistency_"  # metrics.metric of a measure: consistency_unanimous_share, ...


def consistency_column(section: dict[str, Any] | None) -> dict[str, Any]:
    """The ``runs`` column of a section (null without repeats)."""
    return {"consistency_json": None if section is None else json.dumps(section)}


def stored_consistency(run: dict[str, Any]) -> dict[str, Any] | None:
    """A run's section as the evaluation stored it (None: no repeats, or a run recorded
    before the column existed)."""
    text = run.get("consistency_json")
    return None if text is None else json.loads(text)


def consistency_rows(section: dict[str, Any] | None, base: dict[str, Any]) -> list[dict[str, Any]]:
    """The measures, the asks per case and the cases measured as ``metrics`` rows; none
    without a section. A measure over no case is NULL."""
    if section is None:
        return []
    values: dict[str, Any] = {name: section[name] for name in MEASURES}
    values |= {"repeats": section["settings"]["count"], "cases_measured": section["cases_measured"]}
    return [
        {**base, "metric": PREFIX + name, "value": None if value is None else float(value)}
        for name, value in values.items()
    ]

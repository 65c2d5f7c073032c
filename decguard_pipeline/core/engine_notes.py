"""What a language-model backend's run should tell a reader beyond its numbers, from the
report's backend details (``backends/openai.py``): the fallbacks the server made it take,
and a model version that is only the name asked for (a model swapped under that name would
go unnoticed). Said in the report's details, ``evaluate``'s summary and Dagster metadata."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ALIAS_PREFIX = "the requested name"


def engine_notes(details: Mapping[str, Any] | None) -> list[str]:
    """One line per note, none for a backend that has nothing to say."""
    if not isinstance(details, Mapping):
        return []
    notes = [str(note) for note in details.get("fallbacks") or ()]
    origin = details.get("model_version_from")
    if isinstance(origin, str) and origin.startswith(ALIAS_PREFIX):
        notes.append(
            f"model version is {origin}; version_from: server or probe tells a swapped model"
        )
    return notes

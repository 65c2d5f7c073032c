"""Which earlier evaluation a candidate target is diffed against (contract ``pipeline.baseline``).

A target is one ``backend@model_version`` of a contract; the pipeline knows every target it has
evaluated as a dict ``{backend, model_version, target, created_at, requirements_passed}``
(``target`` = the partition key). Rules, first that applies:

1. ``baseline.target`` pins a target key (used whether or not its gates passed);
2. ``baseline.backend`` names a backend: its newest target whose requirement gates passed;
3. default: the previous version of the candidate's backend (its newest passing target created
   before the candidate), else the ``default`` backend's newest passing target.

The candidate itself is never its own baseline; nothing fitting gives None, and
:func:`no_baseline_reason` says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from decguard_pipeline.core.contract.baseline import BaselineSettings

DEFAULT_BACKEND = "default"


@dataclass(frozen=True)
class BaselineChoice:
    target: Mapping[str, Any]  # the chosen entry, as given
    rule: str  # "pinned" | "backend" | "previous_version" | "default_backend"
    reason: str  # one line for the record and the UI


def _moment(value: Any) -> datetime | None:
    """``created_at`` as an aware datetime (ISO text or datetime); None when absent."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise TypeError(f"created_at must be an ISO timestamp or a datetime, got {value!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _newest(entries: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most recent entry (ties: the larger target key, then the later in the list)."""
    best, best_key = None, None
    for entry in entries:
        moment = _moment(entry.get("created_at")) or datetime.min.replace(tzinfo=UTC)
        key = (moment, str(entry.get("target", "")))
        if best_key is None or key >= best_key:
            best, best_key = entry, key
    return best


def choose_baseline(
    backend: str,
    model_version: str | None,
    known: Sequence[Mapping[str, Any]],
    *,
    settings: BaselineSettings | None = None,
    created_at: str | datetime | None = None,
) -> BaselineChoice | None:
    """The baseline target for the candidate ``backend``/``model_version``, or None.

    ``created_at`` is the candidate's evaluation time; when omitted it is taken from the
    candidate's own newest entry in ``known`` (if any)."""
    settings = settings or BaselineSettings()

    def is_candidate(entry: Mapping[str, Any]) -> bool:
        return entry.get("backend") == backend and entry.get("model_version") == model_version

    others = [e for e in known if not is_candidate(e)]
    passing = [e for e in others if e.get("requirements_passed") is True]

    if settings.target is not None:
        pinned = _newest([e for e in others if e.get("target") == settings.target])
        return _choice(pinned, "pinned", f"pinned by pipeline.baseline.target {settings.target}")

    if settings.backend is not None:
        chosen = _newest([e for e in passing if e.get("backend") == settings.backend])
        return _choice(chosen, "backend", f"newest passing target of backend {settings.backend!r}")

    if created_at is None:
        own = _newest([e for e in known if is_candidate(e)])
        created_at = None if own is None else own.get("created_at")
    moment = _moment(created_at)
    earlier = [
        e
        for e in passing
        if e.get("backend") == backend
        and (moment is None or (_moment(e.get("created_at")) or moment) < moment)
    ]
    chosen = _newest(earlier)
    if chosen is None and backend != DEFAULT_BACKEND:
        default = _newest([e for e in passing if e.get("backend") == DEFAULT_BACKEND])
        return _choice(default, "default_backend", "newest passing target of the default backend")
    return _choice(chosen, "previous_version", f"previous passing version of backend {backend!r}")


def _choice(entry: Mapping[str, Any] | None, rule: str, reason: str) -> BaselineChoice | None:
    return None if entry is None else BaselineChoice(entry, rule, reason)


def no_baseline_reason(backend: str, target: str, settings: BaselineSettings | None = None) -> str:
    """Why :func:`choose_baseline` found no baseline for the candidate ``target`` (a target key
    of ``backend``), in the words of the rule that applied."""
    settings = settings or BaselineSettings()
    if settings.target == target:
        return f"the pinned baseline target {target} is the candidate itself"
    if settings.target is not None:
        return f"pinned baseline target {settings.target} has not been evaluated yet"
    if settings.backend is not None:
        return f"backend {settings.backend!r} has no evaluated target whose requirements passed"
    if backend == DEFAULT_BACKEND:
        return f"no earlier version of backend {backend!r} whose requirements passed"
    return (
        f"no earlier version of backend {backend!r} and no target of the "
        f"{DEFAULT_BACKEND!r} backend whose requirements passed"
    )

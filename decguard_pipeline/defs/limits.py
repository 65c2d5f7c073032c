"""How many runs may talk to one model server at a time.

Every run of a target whose backend calls a model server is tagged
``decguard/backend=<host:port>`` (from the backend's ``url`` or ``base_url``: two contracts, or
two backends, on one server share it); a backend that runs in-process (mock, python) loads no
server and gets no tag. The instance's ``run_queue.tag_concurrency_limits`` caps the runs in
progress per value of that tag: Dagster's run queue applies it to the runs the daemon launches
(sensor, schedule, UI), and ``evaluate --workers`` applies the same limits, with Dagster's own
counter, to its runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from decguard_pipeline.core.env_placeholders import expand
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.targets import backend_of

BACKEND_TAG = "decguard/backend"

# One run per model server at a time, unless the instance's dagster.yaml says otherwise.
BACKEND_LIMIT: dict[str, Any] = {
    "key": BACKEND_TAG,
    "value": {"applyLimitPerUniqueValue": True},
    "limit": 1,
}

# the backend settings that name the server a backend calls
URL_SETTINGS = ("url", "base_url")


def server_of(entry: ContractEntry, backend: str) -> str | None:
    """The model server a contract's backend calls, ``host:port``; None when it calls none
    (or is no longer in the contract)."""
    from decguard_pipeline.core.errors import DecGuardError

    try:
        settings = entry.require().contract.backend_config(backend).settings
    except DecGuardError:  # a target of a backend the contract no longer has
        return None
    declared = settings.get("url_env")
    declared = [v for v in declared if isinstance(v, str)] if isinstance(declared, list) else []
    for name in URL_SETTINGS:
        value = settings.get(name)
        if isinstance(value, str) and value:
            try:  # ${NAME} placeholders as the provider expands them (declared ones only)
                url = httpx.URL(expand(value, declared))
            except (ValueError, httpx.InvalidURL):  # the run itself will say what is wrong
                return None
            port = url.port or (443 if url.scheme == "https" else 80)
            return f"{url.host}:{port}"
    return None


def backend_tags(entry: ContractEntry, target: str) -> dict[str, str]:
    """The tags of a run of ``target`` (``<backend>@<version>``) that the limits count."""
    server = server_of(entry, backend_of(target))
    return {} if server is None else {BACKEND_TAG: server}


class Tagged:
    """Something with tags, as Dagster's limit counter reads runs."""

    def __init__(self, tags: Mapping[str, str]) -> None:
        self.tags = dict(tags)


def limit_counter(limits: Sequence[Mapping[str, Any]], in_progress: Sequence[Any]) -> Any:
    """Dagster's run-queue counter of tag concurrency limits (the one the daemon uses)."""
    from dagster._utils.tags import TagConcurrencyLimitsCounter

    return TagConcurrencyLimitsCounter(list(limits), list(in_progress))

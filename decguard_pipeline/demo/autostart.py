"""The demo server, started for the commands that need it and stopped after them.

A contract asks for the demo server by naming it through the placeholder
``${DECGUARD_DEMO_LLM_URL:-http://127.0.0.1:18451}`` in a backend URL (the bundled tickets
example does). ``evaluate``, ``test`` and ``fuzz`` run :func:`demo_server_for` around their
work: when a contract they run names the placeholder and the variable is unset, the server
starts on loopback on a free port (so two evaluations, or a CI job and a developer, never
compete for one port), the variable is set to it for this process and the worker processes
it starts, and both go when the command ends. With the variable set, the server it names is
used as it is (one started by hand, or another process's); without it and outside these
commands (``dagster dev``), the default address is the port a hand-started server listens on.

A server started here is named for the response cache by what it is, not where it listens
(:func:`stable_url`): its port is another one every command, and a key holding it would never
be found again. It is the bundled demo, whose answers are a fixed function of its code, and
that code names its answers' snapshot (``llm_server.SNAPSHOT``), which the key then holds. A
server the variable names (started by hand, or anything else) is keyed by its address, so a
real change of server is a change of key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from decguard_pipeline.core.contract import Contract
from decguard_pipeline.core.env_placeholders import placeholder_names

DEMO_URL_VARIABLE = "DECGUARD_DEMO_LLM_URL"
# the address of the demo server a command started (set with DEMO_URL_VARIABLE, for its
# worker processes too; never set by hand)
STARTED_VARIABLE = "DECGUARD_DEMO_LLM_STARTED"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def names_demo_server(contract: Contract) -> bool:
    """Whether a backend setting of ``contract`` refers to ``$DECGUARD_DEMO_LLM_URL``."""
    for name in contract.backend_names():
        settings = contract.backend_config(name).settings
        if any(DEMO_URL_VARIABLE in placeholder_names(s) for s in _strings(settings)):
            return True
    return False


@contextmanager
def demo_server_for(
    contracts: Iterable[Contract], *, own_process: bool = False
) -> Iterator[str | None]:
    """Serve the demo on a free loopback port while the block runs, when one of ``contracts``
    names it and ``$DECGUARD_DEMO_LLM_URL`` is unset; yields its URL (None: not started).
    ``own_process``: from a child process (demo/process.py; what ``evaluate`` uses, whose runs
    keep this process busy), else from a thread of this one."""
    if os.environ.get(DEMO_URL_VARIABLE) or not any(map(names_demo_server, contracts)):
        yield None
        return
    with _serving(own_process) as url:
        os.environ[DEMO_URL_VARIABLE] = os.environ[STARTED_VARIABLE] = url
        try:
            yield url
        finally:
            os.environ.pop(DEMO_URL_VARIABLE, None)
            os.environ.pop(STARTED_VARIABLE, None)


def stable_url(value: str) -> str:
    """A setting as the response cache keys it: under the address of a demo server this
    command started, ``decguard-demo-llm@<snapshot>`` stands for that address (the path
    after it kept); any other value is itself."""
    started = os.environ.get(STARTED_VARIABLE)
    if not started or not (value == started or value.startswith(f"{started}/")):
        return value
    from decguard_pipeline.demo.llm_server import SNAPSHOT

    return f"decguard-demo-llm@{SNAPSHOT}{value[len(started) :]}"


@contextmanager
def _serving(own_process: bool) -> Iterator[str]:
    if own_process:
        from decguard_pipeline.demo.process import serve_demo_process

        with serve_demo_process() as url:
            yield url
        return
    from decguard_pipeline.demo.llm_server import serve_demo

    with serve_demo() as server:
        yield server.url

"""Batch runs use uvloop's event loop where it is installed; ``DECGUARD_EVENT_LOOP=asyncio``
keeps the standard library's, and an HTTP batch answers the same on either."""

from __future__ import annotations

import asyncio

import pytest

from decguard_pipeline.backends.http import HttpBackend, HttpSettings
from decguard_pipeline.backends.runner import Cases, run_cases, run_loop
from decguard_pipeline.core.contract.decision import DecisionSpec
from decguard_pipeline_tests.support.loopback import serve


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_by_default_and_the_standard_loop_on_request(monkeypatch):
    pytest.importorskip("uvloop")
    monkeypatch.delenv("DECGUARD_EVENT_LOOP", raising=False)
    assert run_loop(_loop_module()).startswith("uvloop")
    monkeypatch.setenv("DECGUARD_EVENT_LOOP", "asyncio")
    assert run_loop(_loop_module()).startswith("asyncio")


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_http_batch_answers_the_same_on_either_loop(loop, monkeypatch):
    monkeypatch.setenv("DECGUARD_EVENT_LOOP", loop)
    spec = DecisionSpec("urgent", "noul", ("yes", "no"))
    ids = [f"c{i}" for i in range(40)] + ["c-status=500", "c-garbage"]
    cases = Cases(ids, [f"text {i}" for i in range(len(ids))], [None] * len(ids),
                  [{}] * len(ids))  # fmt: skip
    with serve() as server:
        backend = HttpBackend(HttpSettings(url=server.url))
        results = run_cases(backend, spec, cases, max_concurrency=8, tolerance=1e-3)
    assert results.error_kind[-2:] == ["backend_error", "invalid_response"]
    assert all(kind is None for kind in results.error_kind[:-2])
    assert (results.latency_ms[:-2] > 0).all()

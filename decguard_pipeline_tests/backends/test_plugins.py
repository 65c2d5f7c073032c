"""Third-party backends through the ``decguard.backends`` entry-point group.

The plugins are real installed distributions: a ``<name>.dist-info`` (METADATA and
entry_points.txt) next to their module in a directory on ``sys.path``, which is all
importlib.metadata needs to find them.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

PLUGIN_MODULE = '''
"""Backends written against decguard_pipeline's public Backend interface."""
import asyncio
import threading
import time

from pydantic import BaseModel

from decguard_pipeline.backends import Backend, backend_settings
from decguard_pipeline.backends.base import health
from decguard_pipeline.core.decision import Prediction
from decguard_pipeline.core.errors import BackendTimeout, ContractError


class EchoSettings(BaseModel):
    model_config = {"extra": "forbid"}
    first: float = 0.9
    delay_s: float = 0.0


class SyncEcho(Backend):
    """Blocking predict: the runner hands it to a bounded pool of threads."""

    provider = "echo-sync"
    lock = threading.Lock()
    in_flight = 0
    max_in_flight = 0
    threads = set()

    def __init__(self, settings, *, name, model):
        super().__init__(name=name, model=model)
        self.settings = settings

    @classmethod
    def from_config(cls, config, *, name, decision):
        settings = backend_settings(EchoSettings, config, name=name)
        return cls(settings, name=name, model=config.model or "echo")

    def predict(self, request):
        cls = SyncEcho
        with cls.lock:
            cls.in_flight += 1
            cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)
        try:
            time.sleep(self.settings.delay_s)
            return self.answer(request)
        finally:
            with cls.lock:
                cls.in_flight -= 1

    def answer(self, request):
        SyncEcho.threads.add(threading.get_ident())
        text = request.input if isinstance(request.input, str) else str(request.input)
        if "boom" in text:
            raise ValueError("boom in the plugin")
        if "slow" in text:
            raise BackendTimeout("plugin gave up after 1s")
        if "config" in text:
            raise ContractError("plugin misconfigured: no API key")
        labels = request.decision.labels
        rest = (1.0 - self.settings.first) / (len(labels) - 1)
        probabilities = {label: rest for label in labels}
        probabilities[labels[len(text) % len(labels)]] = self.settings.first
        return Prediction(probabilities, model_version="p1", metadata={"token": "t0p"})

    def healthcheck(self):
        return health("unhealthy" if self.settings.first < 0.5 else "ok", "echo plugin")


class AsyncEcho(SyncEcho):
    """Native asyncio predict: runs on the event loop, no threads."""

    provider = "echo-async"

    async def apredict(self, request):
        await asyncio.sleep(self.settings.delay_s)
        return self.answer(request)


class NotABackend:
    pass


# A plugin written for DecGuard 0.1 itself: the same entry point serves both tools.
from decguard.backends.base import BackendMetadata, DecisionBackend, HealthStatus
from decguard.backends.base import validate_settings
from decguard.decisions import Prediction as TheirPrediction
from decguard.errors import BackendUnavailable, ContractError as TheirContractError


class TheirSettings(BaseModel):
    model_config = {"extra": "forbid"}
    lean: str


class DecGuardStyle(DecisionBackend):
    provider = "dg-style"

    def __init__(self, settings, *, name, model):
        super().__init__(name=name, model=model)
        self.settings = settings

    @classmethod
    def from_config(cls, config, *, name, decision):
        return cls(validate_settings(TheirSettings, config, name=name), name=name,
                   model=config.model)

    def predict(self, request):
        text = request.input if isinstance(request.input, str) else str(request.input)
        if "down" in text:
            raise BackendUnavailable("upstream is down")
        if "boom" in text:
            raise KeyError("boom")
        if "config" in text:
            raise TheirContractError("dg-style: no credentials")
        labels = request.decision.labels
        probabilities = {label: 0.1 / (len(labels) - 1) for label in labels}
        probabilities[self.settings.lean if self.settings.lean in labels else labels[-1]] = 0.9
        return TheirPrediction(probabilities=probabilities, model_version="dg-1",
                               metadata={"api_key": "k", "n": len(text)})

    def metadata(self):
        return BackendMetadata(name=self.name, provider=self.provider, model=self.model,
                               details={"lean": self.settings.lean, "token": "t"})

    def healthcheck(self):
        return HealthStatus(status="ok", detail="dg-style plugin")


class NoConfig(Backend):
    provider = "no-config"
'''

ENTRY_POINTS = """
[decguard.backends]
echo-sync = dg_pipeline_test_plugins:SyncEcho
echo-async = dg_pipeline_test_plugins:AsyncEcho
not-a-backend = dg_pipeline_test_plugins:NotABackend
no-config = dg_pipeline_test_plugins:NoConfig
broken = dg_pipeline_test_missing_module:Backend
mock = dg_pipeline_test_plugins:SyncEcho
dg-style = dg_pipeline_test_plugins:DecGuardStyle
"""


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "dg_pipeline_test_plugins.py").write_text(PLUGIN_MODULE)
    info = site / "dg_pipeline_test_plugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: dg-pipeline-test-plugins\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(tmp_path)
    yield
    import sys

    sys.modules.pop("dg_pipeline_test_plugins", None)


def _contract(provider: str, **settings) -> None:
    extra = "".join(f"\n  {k}: {json.dumps(v)}" for k, v in settings.items())
    Path("c.yaml").write_text(
        textwrap.dedent(
            """\
            schema_version: "0.1"
            decision: {name: pick, type: choice, options: [a, b, c]}
            backend:
              provider: PROVIDER
              model: m-1EXTRA
            dataset: cases.jsonl
            evaluation: {max_concurrency: 3}
            """
        )
        .replace("PROVIDER", provider)
        .replace("EXTRA", extra)
    )


def _cases(texts: list[str]) -> None:
    Path("cases.jsonl").write_text(
        "".join(
            json.dumps({"id": f"c{i}", "input": t, "expected": "a"}) + "\n"
            for i, t in enumerate(texts)
        )
    )


@pytest.mark.parametrize("provider", ["echo-sync", "echo-async"])
def test_plugin_runs_and_its_report_verifies_in_the_reference(provider, plugins, ours, ref):
    texts = [f"case {'x' * i}" for i in range(24)] + ["boom", "slow"]
    _cases(texts)
    _contract(provider, delay_s=0.02)
    ran = ours("test", "c.yaml", "-o", "ours.json")
    assert ran.exit_code == 1, ran.stderr
    doc = json.loads(Path("ours.json").read_text())
    assert [r["case_id"] for r in doc["results"]] == [f"c{i}" for i in range(26)]
    errors = {r["input"]: r["error"] for r in doc["results"] if r["error"]}
    assert errors == {
        "boom": {"kind": "exception", "message": "ValueError: boom in the plugin"},
        "slow": {"kind": "timeout", "message": "plugin gave up after 1s"},
    }
    first = doc["results"][0]["result"]
    assert (first["provider"], first["model"], first["model_version"]) == (provider, "m-1", "p1")
    assert first["metadata"] == {"token": "[REDACTED]"}
    assert doc["health"] == {"status": "ok", "detail": "echo plugin"}
    # latency is the plugin's own 20 ms, not the wait for one of the 3 workers
    assert 19.0 < doc["metrics"]["latency"]["p50_ms"] < 40.0
    verified = ref("report", "ours.json", "-f", "json")
    assert verified.exit_code == 1, verified.stderr
    assert json.loads(verified.stdout)["metrics"] == doc["metrics"]

    import dg_pipeline_test_plugins as module

    cls = module.SyncEcho
    if provider == "echo-sync":
        assert cls.max_in_flight == 3 and len(cls.threads) == 3
    else:
        assert cls.threads == {__import__("threading").get_ident()}  # the loop's own thread


def test_plugin_configuration_error_aborts(plugins, ours):
    _cases(["fine", "config please"])
    _contract("echo-sync")
    ran = ours("test", "c.yaml", "-o", "ours.json")
    assert (ran.exit_code, ran.stderr) == (2, "error: plugin misconfigured: no API key\n")
    assert not Path("ours.json").exists()


def test_plugin_failing_every_case_exits_2(plugins, ours):
    _cases(["boom 1", "boom 2"])
    _contract("echo-async")
    ran = ours("test", "c.yaml")
    assert ran.exit_code == 2
    assert ran.stderr == (
        "error: backend 'default' failed on every case; first error: exception: "
        "ValueError: boom in the plugin\n"
    )


def test_unhealthy_plugin_exits_2(plugins, ours):
    _cases(["x"])
    _contract("echo-sync", first=0.4)
    ran = ours("test", "c.yaml")
    assert (ran.exit_code, ran.stderr) == (
        2,
        "error: backend 'default' is unhealthy: echo plugin\n",
    )
    assert ours("test", "c.yaml", "--no-healthcheck").exit_code == 0


def test_plugin_settings_are_validated_offline(plugins, ours):
    _cases(["x"])
    _contract("echo-sync", frist=0.8)
    ran = ours("validate", "c.yaml")
    assert ran.exit_code == 2
    assert ran.stderr == (
        "error: invalid settings for provider 'echo-sync':\n"
        "  backend.frist: unknown field (check the spelling)\n"
    )
    _contract("echo-sync", first=0.8)
    ran = ours("validate", "c.yaml")
    assert ran.exit_code == 0 and "backends  default=echo-sync" in ran.stdout


def test_builtins_cannot_be_shadowed(plugins, ours):
    Path("c.yaml").write_text(
        'schema_version: "0.1"\ndecision: {name: pick, type: choice, options: [a, b, c]}\n'
        "backend: {provider: mock, default: {a: 0.2, b: 0.3, c: 0.5}}\ndataset: cases.jsonl\n"
    )
    _cases(["x"])
    doc = json.loads(ours("test", "c.yaml", "-f", "json").stdout)
    assert doc["results"][0]["result"]["probabilities"] == {"a": 0.2, "b": 0.3, "c": 0.5}


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        (
            "not-a-backend",
            "backend provider 'not-a-backend' (dg_pipeline_test_plugins:NotABackend) is not a "
            "decguard_pipeline Backend",
        ),
        ("no-config", "provider 'no-config' cannot be configured from a contract"),
        (
            "broken",
            "cannot load backend provider 'broken' from dg_pipeline_test_missing_module:Backend: "
            "No module named 'dg_pipeline_test_missing_module'",
        ),
        (
            "quantum",
            "unknown backend provider 'quantum'; available: broken, dg-style, echo-async, "
            "echo-sync, http, mock, no-config, not-a-backend, systemone",
        ),
    ],
)
def test_unusable_providers_exit_2(provider, message, plugins, ours, ref):
    _contract(provider)
    ran = ours("validate", "c.yaml")
    assert (ran.exit_code, ran.stderr) == (2, f"error: {message}\n")
    if provider in ("broken", "quantum"):  # the reference reads the same entry points
        assert ref("validate", "c.yaml").stderr == ran.stderr


def test_a_decguard_plugin_runs_as_in_decguard(plugins, ours, ref):
    """A plugin written for DecGuard 0.1 (a decguard DecisionBackend) runs here unchanged,
    with the same results, errors, metadata and redaction as in the reference."""
    from decguard_pipeline_tests.support.golden_cases import comparable

    _cases(["fine", "down here", "boom", {"text": "object"}, "another fine one"])  # type: ignore[list-item]
    _contract("dg-style", lean="b")
    a, b = ours("test", "c.yaml", "-o", "ours.json"), ref("test", "c.yaml", "-o", "ref.json")
    assert a.exit_code == b.exit_code == 1, (a.stderr, b.stderr)
    mine = json.loads(Path("ours.json").read_text())
    assert comparable(mine) == comparable(json.loads(Path("ref.json").read_text()))
    assert mine["backend"]["details"] == {"lean": "b", "token": "[REDACTED]"}
    errors = [r["error"] for r in mine["results"] if r["error"]]
    assert errors == [
        {"kind": "unavailable", "message": "upstream is down"},
        {"kind": "exception", "message": "KeyError: 'boom'"},
    ]
    _contract("dg-style", leen="b")
    a, b = ours("validate", "c.yaml"), ref("validate", "c.yaml")
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr) == (2, b.stderr)
    _cases(["config please"])
    _contract("dg-style", lean="b")
    a, b = ours("test", "c.yaml"), ref("test", "c.yaml")
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert a.stderr == "error: dg-style: no credentials\n"

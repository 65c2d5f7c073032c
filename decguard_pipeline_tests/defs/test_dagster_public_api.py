"""Dagster through its public API only: nothing in decguard_pipeline reaches into a private
``dagster._`` module or assigns into Dagster's modules or objects (no monkeypatching). The
imports are checked by lint-imports too (pyproject.toml, ``private_modules``); this scan also
sees attribute access, module names in strings and assignments, which no import graph shows."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from decguard_pipeline_tests.conftest import ROOT

PACKAGE = ROOT / "decguard_pipeline"

# Attribute stores on objects other than self/cls in modules that import Dagster: each one
# is an object of ours or of another library's public API, never one of Dagster's.
ALLOWED_STORES = {
    ("defs/main_job.py", "out.skipped"),  # our MainJobResult
    ("defs/instance_postgres.py", "connection.autocommit"),  # a psycopg2 connection of ours
}


def _dagster_names(tree: ast.Module) -> set[str]:
    """Names this module binds to Dagster: ``import dagster as dg``, ``from dagster import X``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0].startswith("dagster"):
                    names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dagster"):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _stores(node: ast.AST) -> list[ast.Attribute]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    return [
        x
        for target in targets
        for x in ast.walk(target)
        if isinstance(x, ast.Attribute) and isinstance(x.ctx, ast.Store)
    ]


def problems(source: str, where: str) -> list[str]:
    """What in one module reaches into Dagster's privates or assigns into Dagster."""
    tree = ast.parse(source)
    dagster = _dagster_names(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dagster._"):
            found.append(f"{where}:{line}: imports {node.module}")
        if isinstance(node, ast.Import):
            found += [f"{where}:{line}: imports {a.name}" for a in node.names
                      if a.name.startswith("dagster._")]  # fmt: skip
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            root = _root(node)
            if isinstance(root, ast.Name) and root.id in dagster:
                found.append(f"{where}:{line}: private attribute {ast.unparse(node)}")
        if isinstance(node, ast.Constant) and str(node.value).startswith("dagster._"):
            found.append(f"{where}:{line}: names the private module {node.value}")
        for store in _stores(node):
            root = _root(store)
            text = ast.unparse(store)
            if isinstance(root, ast.Name) and root.id in dagster:
                found.append(f"{where}:{line}: assigns into Dagster: {text}")
            elif (
                dagster
                and not (isinstance(root, ast.Name) and root.id in ("self", "cls"))
                and (where, text) not in ALLOWED_STORES
            ):
                found.append(f"{where}:{line}: assigns an attribute of {text}")
        if (
            dagster
            and isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
        ):
            found.append(f"{where}:{line}: {ast.unparse(node)}")
    return found


def test_no_module_reaches_into_dagster():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += problems(path.read_text(), path.relative_to(PACKAGE).as_posix())
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "import dagster as dg\ndg.DagsterInstance.get = lambda: None\n",
        "from dagster import DagsterInstance\nDagsterInstance.get = staticmethod(print)\n",
        "import dagster as dg\n\ndef f(i: dg.DagsterInstance):\n"
        "    i.compute_log_manager.capture_logs = print\n",
        "import dagster as dg\n\ndef f(storage):\n    setattr(storage, '_connect', print)\n",
        "from dagster._utils.tags import TagConcurrencyLimitsCounter\n",
        "import dagster\nx = dagster._core\n",
        "import dagster as dg\nPRELOAD = ['dagster._core.instance.factory']\n",
    ],
)
def test_the_scan_sees_each_kind_of_reaching_in(source: str):
    assert problems(source, "probe.py") != []


def test_our_own_objects_may_change():
    source = "import dagster as dg\n\nclass A:\n    def f(self):\n        self.x = 1\n"
    assert problems(source, "probe.py") == []
    assert Path(PACKAGE / "defs" / "main_job.py").exists()  # ALLOWED_STORES names real files
    assert Path(PACKAGE / "defs" / "instance_postgres.py").exists()

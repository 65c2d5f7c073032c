"""Contract keys: each comes from its own folder's name only (so it never changes when other
folders come or go), and two folders that give the same key are both refused."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import dagster as dg

from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline_tests.conftest import EXAMPLES

warnings.filterwarnings("ignore", category=dg.PreviewWarning)


def copy_spam(root: Path, folder: str) -> Path:
    shutil.copytree(EXAMPLES / "spam", root / folder)
    return root / folder


def keys(root: Path) -> dict[str, str]:
    return {e.path.parent.name: e.key for e in discover_contracts(str(root))}


def test_a_key_depends_only_on_its_own_folder(tmp_path: Path):
    root = tmp_path / "contracts"
    for folder in ("a-b", "2fa", "zeta"):
        copy_spam(root, folder)
    alone = keys(root)
    assert alone == {"a-b": "a_b", "2fa": "c_2fa", "zeta": "zeta"}
    copy_spam(root, "a-a")  # lists before a-b: no key moves
    assert keys(root) == {**alone, "a-a": "a_a"}
    shutil.rmtree(root / "a-a")
    assert keys(root) == alone


def test_colliding_folders_are_refused_and_the_others_still_run(tmp_path: Path):
    root = tmp_path / "contracts"
    first, second = copy_spam(root, "a b"), copy_spam(root, "a-b")
    copy_spam(root, "spam")
    entries = {e.path.parent.name: e for e in discover_contracts(str(root))}
    assert entries["spam"].ok and entries["spam"].key == "spam"
    for name in ("a b", "a-b"):
        entry = entries[name]
        assert not entry.ok
        assert "contract key 'a_b' is claimed by 2 contracts" in entry.error
        assert repr(str(first)) in entry.error and repr(str(second)) in entry.error
    assert entries["a b"].key != entries["a-b"].key  # each shows as its own broken asset

    defs = build_definitions(list(entries.values()), warehouse_root=str(tmp_path / "wh"))
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    broken = graph.get(dg.AssetKey([entries["a-b"].key, "contract"]))
    assert "is claimed by 2 contracts" in (broken.description or "")
    assert dg.AssetKey(["spam", "report"]) in graph.get_all_asset_keys()

    shutil.rmtree(first)  # the survivor gets the key its folder always gave
    assert keys(root) == {"a-b": "a_b", "spam": "spam"}


def test_the_same_contract_listed_twice_is_one_contract(tmp_path: Path):
    root = tmp_path / "contracts"
    folder = copy_spam(root, "spam")
    spec = f"{root}:{folder / 'decguard.yaml'}"
    entries = discover_contracts(spec)
    assert [(e.key, e.ok) for e in entries] == [("spam", True)]

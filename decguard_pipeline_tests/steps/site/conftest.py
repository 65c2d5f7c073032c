"""One ``evaluate`` of every bundled example and one site built from it, shared by the site's
slow tests (a minute of work; only the tests that ask for it pay)."""

from __future__ import annotations

import pytest

from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.site.build import Built, build_site
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.site import Examples, evaluated_examples


@pytest.fixture(scope="session")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Examples:
    place = evaluated_examples(tmp_path_factory.mktemp("site-examples"))
    assert place.returncode == 0, place.stdout + place.stderr
    return place


@pytest.fixture(scope="session")
def site(examples: Examples) -> Built:
    """The site of the examples' warehouse, in ``examples.site``."""
    entries = discover_contracts(str(examples.folder / "contracts"))
    return build_site(Warehouse(examples.warehouse), examples.site, entries=entries)

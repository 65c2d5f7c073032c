"""``core.contract`` imports its modules when a name is first used: reading a stored report
does not import the contract loader (YAML) or the whole contract's models."""

from __future__ import annotations

import subprocess
import sys

from decguard_pipeline.core import contract

READ_A_REPORT = """
import sys
from decguard_pipeline.cli import app
from decguard_pipeline.core.report import verify
from decguard_pipeline.core.properties import report
from decguard_pipeline.core.report import run_text
loaded = sorted(m for m in sys.modules if m.startswith("decguard_pipeline.core.contract."))
print(" ".join(loaded), "yaml" in sys.modules)
"""


def test_every_name_is_found_in_its_module():
    for name in contract.__all__:
        module = contract._HOME_OF[name]
        home = __import__(f"decguard_pipeline.core.contract.{module}", fromlist=[name])
        assert getattr(contract, name) is getattr(home, name)
    assert sorted(contract.__all__) == sorted(contract._HOME_OF)


def test_reading_a_report_imports_no_contract_loader():
    out = subprocess.run(
        [sys.executable, "-c", READ_A_REPORT], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[-1] == "False"  # no YAML
    loaded = set(out[:-1])
    assert "decguard_pipeline.core.contract.evaluation" in loaded
    assert not loaded & {
        "decguard_pipeline.core.contract.loader",
        "decguard_pipeline.core.contract.model",
        "decguard_pipeline.core.contract.extensions",
    }

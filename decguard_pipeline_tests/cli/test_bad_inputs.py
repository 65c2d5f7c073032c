"""The bad-input corpus (``bad_inputs/``): every file makes both CLIs exit 2 with the same
``error:`` message, which names the file and the line or field, and never a traceback.

* ``contracts/``: contracts that ``validate`` (and so ``test``) must reject.
* ``datasets/``: datasets ``validate -d`` and ``test -d`` must reject (against
  ``datasets/contract.yaml``; ``datasets/good.jsonl`` is the one valid file).
* ``runs/``: contracts that only fail when run (unset credentials, answers outside the
  contract's tolerance, no dataset).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "bad_inputs"
CONTRACTS = sorted(p.name for p in (CORPUS / "contracts").iterdir())
DATASETS = sorted(
    p.name for p in (CORPUS / "datasets").iterdir() if p.name not in ("contract.yaml", "good.jsonl")
)
RUNS = sorted(p.name for p in (CORPUS / "runs").iterdir())

# Provider-settings errors are raised where the reference raises them, without the contract
# path; they name the setting instead (``backend.url``, ``rules[1]``, ``backend 'default'``).
FIELD = re.compile(
    r"(line \d+|case \d+|backends?[.:' ]|\brules\[\d+\]|\bdefault:|\w+\.\w+: |"
    r"provider '|\(root\): |^\s+\w+: )",
    re.MULTILINE,
)


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    """A copy of the corpus as the working directory, so messages carry relative paths."""
    shutil.copytree(CORPUS, tmp_path / "bad_inputs")
    monkeypatch.chdir(tmp_path / "bad_inputs")
    for variable in ("DECGUARD_PIPELINE_TEST_UNSET_TOKEN", "DECGUARD_PIPELINE_TEST_UNSET_KEY"):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path / "bad_inputs"


def _same_error(ours, ref, *args) -> str:
    a, b = ours(*args), ref(*args)
    assert (a.exit_code, b.exit_code) == (2, 2), (a.stderr, b.stderr)
    assert a.stderr == b.stderr
    assert a.stdout == b.stdout == ""
    assert a.stderr.startswith("error: ")
    assert "Traceback" not in a.stderr and "internal error" not in a.stderr
    return a.stderr


def _names_file_or_field(message: str, path: str) -> None:
    assert path in message or FIELD.search(message), message


@pytest.mark.parametrize("name", CONTRACTS)
def test_bad_contract(name, corpus, ours, ref):
    path = f"contracts/{name}"
    message = _same_error(ours, ref, "validate", path)
    _names_file_or_field(message, path)
    if name != "named_backend_bad_setting.yaml":  # test builds only the backend it runs
        assert _same_error(ours, ref, "test", path, "-d", "datasets/good.jsonl") == message


def test_named_backend_settings_are_checked_when_used(corpus, ours, ref):
    path = "contracts/named_backend_bad_setting.yaml"
    message = _same_error(ours, ref, "test", path, "-d", "datasets/good.jsonl", "-b", "candidate")
    assert "backends.candidate.seed" in message


@pytest.mark.parametrize("name", DATASETS)
def test_bad_dataset(name, corpus, ours, ref):
    path = f"datasets/{name}"
    message = _same_error(ours, ref, "validate", "datasets/contract.yaml", "-d", path)
    assert message.startswith(f"error: {path}: ")
    # a line or case number when the problem is in one case
    if not any(
        word in message
        for word in ("UTF-8", "format", "no cases", "must be a list", "duplicate key")
    ):
        assert re.search(r"(line|case) \d+", message), message
    assert _same_error(ours, ref, "test", "datasets/contract.yaml", "-d", path) == message


@pytest.mark.parametrize("name", RUNS)
def test_bad_run(name, corpus, ours, ref):
    path = f"runs/{name}"
    message = _same_error(ours, ref, "test", path)
    assert re.search(r"(runs/|backend 'default')", message), message


def test_unset_credential_is_named_and_nothing_is_written(corpus, ours, tmp_path):
    out = tmp_path / "report.json"
    ran = ours("test", "runs/http_bearer_unset.yaml", "-o", out)
    assert ran.exit_code == 2
    assert "DECGUARD_PIPELINE_TEST_UNSET_TOKEN is not set" in ran.stderr
    assert not out.exists()


def test_missing_contract_file(corpus, ours, ref):
    message = _same_error(ours, ref, "validate", "contracts/does-not-exist.yaml")
    assert message == "error: contracts/does-not-exist.yaml: cannot read contract: " + (
        "No such file or directory\n"
    )


def test_contract_over_one_megabyte(corpus, ours, ref):
    body = (corpus / "datasets" / "contract.yaml").read_text()
    Path("big.yaml").write_text(body + "# " + "x" * 1_000_000 + "\n")
    message = _same_error(ours, ref, "validate", "big.yaml")
    assert message == "error: big.yaml: contract is larger than 1000000 bytes\n"


def test_contract_is_a_directory(corpus, ours, ref):
    message = _same_error(ours, ref, "validate", "contracts")
    assert message.startswith("error: contracts: cannot read contract: ")


def test_dataset_that_cannot_be_read(corpus, ours, ref):
    Path("cases.jsonl").mkdir()  # a directory where the file should be
    message = _same_error(ours, ref, "validate", "datasets/contract.yaml", "-d", "cases.jsonl")
    assert message == "error: cases.jsonl: cannot read dataset: Is a directory\n"


def test_too_many_problems_are_summarised(corpus, ours):
    ran = ours("validate", "contracts/many_errors.yaml")
    lines = ran.stderr.splitlines()
    assert lines[0] == "error: contracts/many_errors.yaml: invalid contract:"
    assert len(lines) == 1 + 20 + 1
    assert lines[-1] == "  ... and 5 more"

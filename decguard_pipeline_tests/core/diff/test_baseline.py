"""core.diff.choose_baseline: which earlier target a candidate is compared with."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from decguard_pipeline.core.contract import parse_contract
from decguard_pipeline.core.contract.baseline import BaselineSettings
from decguard_pipeline.core.diff import choose_baseline
from decguard_pipeline.core.diff.baseline import no_baseline_reason
from decguard_pipeline.core.errors import ContractError


def target(backend, version, created, passed=True):
    return {
        "backend": backend,
        "model_version": version,
        "target": f"{backend}@{version}",
        "created_at": created,
        "requirements_passed": passed,
    }


KNOWN = [
    target("default", "v1", "2026-01-01T00:00:00+00:00"),
    target("default", "v2", "2026-02-01T00:00:00+00:00"),
    target("default", "v3", "2026-03-01T00:00:00+00:00", passed=False),
    target("staging", "s1", "2026-01-15T00:00:00+00:00"),
    target("staging", "s2", "2026-02-15T00:00:00+00:00", passed=False),
    target("staging", "s3", "2026-03-15T00:00:00+00:00"),  # the candidate in most tests
    target("staging", "s4", "2026-04-15T00:00:00+00:00"),  # newer than the candidate
    target("canary", "c1", "2026-02-20T00:00:00+00:00"),
]


def chosen(*args, **kw):
    choice = choose_baseline(*args, **kw)
    return None if choice is None else (choice.target["target"], choice.rule)


def test_previous_passing_version_of_the_same_backend():
    # s2 failed its requirements and s4 is newer than the candidate: s1
    assert chosen("staging", "s3", KNOWN) == ("staging@s1", "previous_version")
    # the candidate's time may be given instead of looked up
    assert chosen("staging", "s9", KNOWN, created_at="2026-05-01T00:00:00+00:00") == (
        "staging@s4",
        "previous_version",
    )
    aware = datetime(2026, 2, 16, tzinfo=UTC)
    assert chosen("staging", "s9", KNOWN, created_at=aware) == ("staging@s1", "previous_version")


def test_falls_back_to_the_default_backends_newest_passing_target():
    # canary has no earlier version: default's newest passing target (v3 failed)
    assert chosen("canary", "c1", KNOWN) == ("default@v2", "default_backend")
    assert chosen("canary", "c2", KNOWN, created_at="2026-01-01T00:00:00+00:00") == (
        "default@v2",
        "default_backend",
    )


def test_default_backend_never_falls_back_to_a_newer_version_of_itself():
    assert chosen("default", "v1", KNOWN) is None
    assert chosen("default", "v2", KNOWN) == ("default@v1", "previous_version")


def test_backend_rule_takes_that_backends_newest_passing_target():
    rule = BaselineSettings(backend="staging")
    assert chosen("canary", "c1", KNOWN, settings=rule) == ("staging@s4", "backend")
    assert chosen("staging", "s4", KNOWN, settings=rule) == ("staging@s3", "backend")
    assert chosen("canary", "c1", KNOWN, settings=BaselineSettings(backend="nowhere")) is None


def test_pinned_target_is_used_even_if_it_failed():
    rule = BaselineSettings(target="default@v3")
    choice = choose_baseline("staging", "s3", KNOWN, settings=rule)
    assert choice is not None and choice.target is KNOWN[2] and choice.rule == "pinned"
    assert chosen("staging", "s3", KNOWN, settings=BaselineSettings(target="x@y")) is None
    # a candidate is never its own baseline
    assert chosen("staging", "s3", KNOWN, settings=BaselineSettings(target="staging@s3")) is None


def test_nothing_known():
    assert choose_baseline("staging", "s1", []) is None
    only_failures = [target("default", "v1", "2026-01-01T00:00:00+00:00", passed=False)]
    assert choose_baseline("staging", "s1", only_failures) is None


def test_no_baseline_says_which_rule_found_nothing():
    def reason(backend, version, settings=None):
        assert choose_baseline(backend, version, KNOWN, settings=settings) is None
        return no_baseline_reason(backend, f"{backend}@{version}", settings)

    assert reason("staging", "s3", BaselineSettings(target="staging@s3")) == (
        "the pinned baseline target staging@s3 is the candidate itself"
    )
    assert reason("staging", "s3", BaselineSettings(target="x@y")) == (
        "pinned baseline target x@y has not been evaluated yet"
    )
    assert reason("canary", "c1", BaselineSettings(backend="nowhere")) == (
        "backend 'nowhere' has no evaluated target whose requirements passed"
    )
    assert reason("default", "v1") == (
        "no earlier version of backend 'default' whose requirements passed"
    )
    assert no_baseline_reason("canary", "canary@c0") == (
        "no earlier version of backend 'canary' and no target of the 'default' backend "
        "whose requirements passed"
    )


def test_repeated_runs_of_a_target_and_missing_versions():
    runs = [
        target("default", None, "2026-01-01T00:00:00+00:00"),
        target("default", "v2", "2026-01-02T00:00:00+00:00"),
        target("default", "v2", "2026-01-05T00:00:00+00:00"),
    ]
    runs[2]["run"] = "second"
    choice = choose_baseline("staging", "s1", runs)
    assert choice is not None and choice.target.get("run") == "second"
    # model_version None is a version like any other
    assert chosen("default", "v2", runs) == ("default@None", "previous_version")


def test_contract_section():
    head = {
        "schema_version": "0.1",
        "decision": {"name": "d", "type": "noul"},
        "backend": {"provider": "mock"},
    }
    contract = parse_contract({**head, "pipeline": {"baseline": {"backend": "default"}}})
    assert contract.pipeline.baseline == BaselineSettings(backend="default")
    with pytest.raises(ContractError, match=r"pipeline\.baseline: set either 'target' or"):
        parse_contract({**head, "pipeline": {"baseline": {"backend": "a", "target": "b@c"}}})
    with pytest.raises(ContractError, match=r"pipeline\.baseline\.pin: unknown field"):
        parse_contract({**head, "pipeline": {"baseline": {"pin": "b@c"}}})

"""Target keys: one per model version, safe as a partition key."""

import re

from decguard_pipeline.steps.targets import MAX_VERSION_CHARS, sanitise_version, target_key

SAFE = re.compile(r"[A-Za-z0-9._-]+")


def test_a_safe_version_is_its_own_key():
    assert target_key("default", "refund-mock-v1") == "default@refund-mock-v1"


def test_versions_that_differ_only_in_unsafe_characters_get_different_keys():
    versions = ["a/b", "a-b", "a:b", "a b", "a\u00e9b"]
    keys = [sanitise_version(v) for v in versions]
    assert len(set(keys)) == len(versions)
    assert keys[1] == "a-b"  # the safe one is unchanged
    assert all(SAFE.fullmatch(k) and k.startswith("a-b-") for k in keys[:1] + keys[2:])


def test_long_versions_are_cut_and_stay_apart():
    a, b = "x" * 100 + "1", "x" * 100 + "2"
    assert len(sanitise_version(a)) == MAX_VERSION_CHARS
    assert sanitise_version(a) != sanitise_version(b)


def test_an_empty_or_all_unsafe_version_is_marked_unversioned_and_kept_apart():
    assert sanitise_version("").startswith("unversioned-")
    assert sanitise_version("///") != sanitise_version("")

"""Contracts (schema 0.1): every section parsed and validated as decguard==0.1.1 does it, with
the same messages, and the same ``sha256:`` hash for the same file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline_tests.conftest import EXAMPLE_NAMES, EXAMPLES
from decguard_pipeline_tests.support.golden_cases import generate

QUICKSTART = """\
schema_version: "0.1"

decision:
  name: refund_request
  description: Decide how to handle a customer refund request.
  type: choice
  options: [refund, reject, review]

backend:
  provider: mock
  model: refund-mock-v1
  rules:
    - contains: "damaged"
      probabilities: {refund: 0.96, reject: 0.01, review: 0.03}
    - contains: "never arrived"
      probabilities: {refund: 0.90, reject: 0.02, review: 0.08}
    - contains: "changed my mind"
      probabilities: {refund: 0.05, reject: 0.85, review: 0.10}
  default: {refund: 0.20, reject: 0.15, review: 0.65}

dataset: cases.jsonl

evaluation:
  confidence_threshold: 0.8

requirements:
  min_accuracy: 0.9
  max_ece: 0.2

warnings:
  min_coverage: 0.6
  max_latency_p95_ms: 500
"""
QUICKSTART_HASH = "sha256:ab7ab0ad031d6130242da713be280ba3ee50dd6ad14e1665cc9a8e785ff03ecd"


def _both(path: Path) -> tuple[Any, Any]:
    """(hash, dump) or the error message, from us and from the reference."""
    from decguard.contracts.loader import load_contract as ref_load
    from decguard.errors import ContractError as RefContractError

    try:
        loaded = load_contract(path)
        mine: Any = (loaded.hash, loaded.contract.model_dump(mode="json", exclude={"pipeline"}))
    except ContractError as exc:
        mine = str(exc)
    try:
        theirs_loaded = ref_load(path)
        theirs: Any = (theirs_loaded.hash, theirs_loaded.contract.model_dump(mode="json"))
    except RefContractError as exc:
        theirs = str(exc)
    return mine, theirs


def test_quickstart_hash(tmp_path):
    """The documented hash of the docs quickstart contract (§13.2)."""
    path = tmp_path / "decguard.yaml"
    path.write_text(QUICKSTART)
    assert load_contract(path).hash == QUICKSTART_HASH


def test_hash_ignores_formatting(tmp_path):
    as_yaml = tmp_path / "a.yaml"
    as_yaml.write_text(QUICKSTART)
    as_json = tmp_path / "b.json"
    data = yaml.safe_load(QUICKSTART)
    as_json.write_text(json.dumps(dict(reversed(list(data.items()))), indent=4))
    flow = tmp_path / "c.yml"
    flow.write_text(yaml.safe_dump(data, default_flow_style=True, sort_keys=True))
    assert load_contract(as_json).hash == load_contract(flow).hash == QUICKSTART_HASH


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_hashes_match_reference(name):
    mine, theirs = _both(EXAMPLES / name / "decguard.yaml")
    assert mine == theirs


@pytest.mark.parametrize("seed", range(0, 60, 3))
def test_generated_contract_hashes_match_reference(seed, tmp_path):
    contract, _, _ = generate(seed)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(contract, allow_unicode=True))
    mine, theirs = _both(path)
    assert mine == theirs
    assert isinstance(mine, tuple)


HEAD = 'schema_version: "0.1"\ndecision: {name: d, type: TYPE, LABELS}\nbackend: {provider: mock}\n'
LABELS = {
    "choice": "options: [a, b, c]",
    "noul": "labels: [spam, ham]",
    "score": "levels: [1, 2, 3]",
}

SECTIONS = {
    # properties
    "all properties": """
properties:
  option_order: {samples: 4, max_tv_distance: 0.03, max_flip_rate: 0, level: warning}
  label_format: {styles: [upper, quoted], aliases: {a: [Alpha, "A."]}, max_js_divergence: 0.1}
  irrelevant_context: {fragments: [Hi., There.], insertions: 2, max_abs_delta: 0.05}
  repeated_context: {repeats: 4, max_confidence_delta: 0.1}
  whitespace: {edits: 5, samples: 3, max_tv_distance: 0.02, max_violation_rate: 0.1}
  paraphrase: {source: {provider: identity}, max_tv_distance: 0}
""",
    "disabled property": "properties:\n  whitespace: {enabled: false}\n",
    "property level typo": "properties:\n  whitespace: {level: required, max_tv_distance: 0.1}\n",
    "property unknown key": "properties:\n  whitespace: {max_tv: 0.1}\n",
    "property no limit": "properties:\n  label_format: {samples: 3}\n",
    "property samples range": "properties:\n  option_order: {samples: 101, max_tv_distance: 1}\n",
    "unknown property": "properties:\n  synonyms: {max_tv_distance: 0.1}\n",
    "alias for no label": "properties:\n  label_format: {aliases: {z: [Z]}, max_flip_rate: 0}\n",
    "empty alias": "properties:\n  label_format: {aliases: {a: []}, max_flip_rate: 0}\n",
    "untrimmed alias": "properties:\n  label_format: {aliases: {a: [' A']}, max_flip_rate: 0}\n",
    "unknown style": "properties:\n  label_format: {styles: [shouty], max_flip_rate: 0}\n",
    "empty fragment": "properties:\n  irrelevant_context: {fragments: [''], max_flip_rate: 0}\n",
    "no fragments": "properties:\n  repeated_context: {fragments: [], max_flip_rate: 0}\n",
    "repeats range": "properties:\n  repeated_context: {repeats: 1, max_flip_rate: 0}\n",
    "paraphrase provider": (
        "properties:\n  paraphrase: {source: {provider: file, path: p.jsonl}, max_flip_rate: 0}\n"
    ),
    "paraphrase bad name": (
        "properties:\n  paraphrase: {source: {provider: 'no good'}, max_flip_rate: 0}\n"
    ),
    "inversion": (
        "properties:\n  inversion: {rewrites: [{find: is, replace: is not}], max_flip_rate: 0}\n"
    ),
    "inversion no rewrites": "properties:\n  inversion: {rewrites: [], max_flip_rate: 0}\n",
    "inversion empty find": "properties:\n  inversion: {rewrites: [{find: '', replace: x}]}\n",
    "monotonic": (
        "properties:\n  monotonic: {field: users, direction: decreasing, deltas: [1, 2.5],"
        " max_level_decrease: 0.1}\n"
    ),
    "monotonic bad delta": "properties:\n  monotonic: {field: users, deltas: [0]}\n",
    "monotonic no field": "properties:\n  monotonic: {deltas: [1]}\n",
    "monotonic direction": "properties:\n  monotonic: {field: u, direction: up}\n",
    # fuzz
    "fuzz": "fuzz: {seed: 42, text_field: text, minimize: false, max_minimize_calls: 1000}\n",
    "fuzz seed range": "fuzz: {seed: 9223372036854775808}\n",
    "fuzz negative seed": "fuzz: {seed: -1}\n",
    "fuzz calls range": "fuzz: {max_minimize_calls: 1001}\n",
    # regression
    "regression": """
regression:
  max_answer_flip_rate: 0.05
  max_accuracy_drop: 0.02
  max_brier_increase: 1.5
  max_nll_increase: 3
  max_latency_p95_increase_ms: 100
  max_segment_accuracy_drop: 0.1
  segment_by: [locale, team]
  min_segment_size: 3
  warnings: {max_ece_increase: 0.05, max_mean_tv_distance: 0.03}
""",
    "regression segment gate alone": "regression:\n  max_segment_accuracy_drop: 0.1\n",
    "regression warning segment gate": (
        "regression:\n  warnings: {max_segment_accuracy_drop: 0.1}\n"
    ),
    "regression range": "regression:\n  max_brier_increase: 2.1\n  min_segment_size: 0\n",
    "regression unknown": "regression:\n  max_flips: 0.1\n",
    # production
    "production": """
evaluation: {confidence_threshold: 0.8}
production:
  segments: [locale]
  requirements: {min_accuracy: 0.9, max_ece: 0.25, min_threshold_coverage: 0.5,
                 max_fallback_rate: 0.6, max_confidence_tv_distance: 0.2}
  warnings: {max_accuracy_drop: 0.05, max_ece_increase: 0.1, max_nll: 4}
  segment_requirements: {min_accuracy: 0.8}
  segment_warnings: {max_abstention_rate: 0.3}
""",
    "production threshold gate": "production:\n  warnings: {min_threshold_coverage: 0.5}\n",
    "production segment drift gate": (
        "production:\n  segment_requirements: {max_accuracy_drop: 0.1}\n"
    ),
    "production duplicate segments": "production:\n  segments: [a, a]\n",
    "production untrimmed segment": "production:\n  segments: [' a']\n",
    # policy
    "policy": """
backends: {strong: {provider: mock}}
policy:
  routes:
    - {when: {confidence_gte: 0.95}, action: accept}
    - {when: {confidence_gte: 0.75}, action: fallback, backend: strong}
    - {action: human_review}
""",
    "policy last conditional": (
        "policy:\n  routes:\n    - {when: {confidence_gte: 0.9}, action: accept}\n"
    ),
    "policy middle unconditional": (
        "policy:\n  routes:\n    - {action: accept}\n    - {action: abstain}\n"
    ),
    "policy not descending": (
        "policy:\n  routes:\n    - {when: {confidence_gte: 0.5}, action: accept}\n"
        "    - {when: {confidence_gte: 0.7}, action: abstain}\n    - {action: abstain}\n"
    ),
    "policy backend on accept": "policy:\n  routes:\n    - {action: accept, backend: default}\n",
    "policy unknown action": "policy:\n  routes:\n    - {action: escalate}\n",
    "policy empty": "policy:\n  routes: []\n",
    "policy null": "policy: null\n",
    # gates and evaluation
    "all golden gates": """
evaluation: {confidence_threshold: 0.7, calibration_bins: 1000, probability_tolerance: 0.1,
             max_concurrency: 256}
requirements: {min_accuracy: 1, min_macro_f1: 0, max_nll: 100, max_brier: 2, max_ece: 1,
               min_coverage: 0.5, max_abstention_rate: 0.5, min_selective_accuracy: 0.9,
               max_error_rate: 0.1, max_latency_p95_ms: 0}
warnings: {max_ordinal_mae: 1}
""",
    "selective gate without threshold": "requirements: {min_selective_accuracy: 0.9}\n",
    "abstention warning without threshold": "warnings: {max_abstention_rate: 0.1}\n",
    "threshold bool": "evaluation: {confidence_threshold: true}\n",
    "bins float": "evaluation: {calibration_bins: 10.0}\n",
    "gates null": "requirements: null\n",
    "dataset number": "dataset: 5\n",
    "backend extra keys": "backends: {x: {provider: mock, seed: 1, extra_thing: [1, 2]}}\n",
}


@pytest.mark.parametrize("kind", ["choice", "noul", "score"])
@pytest.mark.parametrize("section", SECTIONS)
def test_sections_match_reference(section, kind, tmp_path):
    path = tmp_path / "c.yaml"
    head = HEAD.replace("TYPE", kind).replace("LABELS", LABELS[kind])
    path.write_text(head + SECTIONS[section].lstrip("\n"))
    mine, theirs = _both(path)
    assert mine == theirs


def test_pipeline_section_is_optional_and_changes_the_hash(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(QUICKSTART)
    plain = load_contract(path)
    assert plain.contract.pipeline is None and plain.hash == QUICKSTART_HASH
    path.write_text(QUICKSTART + "pipeline: {}\n")
    assert load_contract(path).hash != QUICKSTART_HASH


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("{count: 1}", "pipeline.repeats.count: Input should be greater than or equal to 2"),
        ("{count: 21}", "pipeline.repeats.count: Input should be less than or equal to 20"),
        ("{count: '3'}", "pipeline.repeats.count: Input should be a valid integer"),
        ("3", "pipeline.repeats: write a mapping, e.g. {count: 3}, not a number"),
        ("{count: 3, times: 2}", "pipeline.repeats.times: unknown field (check the spelling)"),
        ("{}", "pipeline.repeats.count: required field is missing"),
    ],
)
def test_repeats_is_validated_with_the_field_named(tmp_path, section, message):
    path = tmp_path / "c.yaml"
    path.write_text(QUICKSTART + f"pipeline:\n  repeats: {section}\n")
    with pytest.raises(ContractError) as raised:
        load_contract(path)
    assert str(path) in str(raised.value) and message in str(raised.value)


def test_repeats_is_hashed(tmp_path):
    """It changes what an evaluation measures (the consistency section), so evaluations
    made without it are stale."""
    path = tmp_path / "c.yaml"
    hashes = []
    for count in (2, 3):
        path.write_text(QUICKSTART + f"pipeline:\n  repeats: {{count: {count}}}\n")
        hashes.append(load_contract(path).hash)
    path.write_text(QUICKSTART + "pipeline: {}\n")
    assert len({*hashes, load_contract(path).hash}) == 3

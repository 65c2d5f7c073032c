"""The msgspec structs that ``report`` reads a big report's header and settings with
(``core.contract.settings_structs``, ``core.properties.section_structs``,
``core.report.header_structs``) against the pydantic models they stand for: whatever a struct
accepts, its model accepts too, with the same normalised dict (key order and number types
included) and the same methods' answers; and they accept what reports are made of. Every
single edit of real reports' headers and settings (each value replaced by one of every JSON
type and edge values, each key removed, an unknown key added), and thousands of random
ones, each read both ways."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from decguard_pipeline.core.contract import properties as models
from decguard_pipeline.core.contract import settings_structs as structs
from decguard_pipeline.core.contract.evaluation import Evaluation
from decguard_pipeline.core.contract.gates import Gates
from decguard_pipeline.core.properties.limits import limits_of
from decguard_pipeline.core.properties.schema import SummaryModel
from decguard_pipeline.core.properties.section_structs import Summary
from decguard_pipeline.core.report.header_structs import Header, header_document, header_of
from decguard_pipeline.core.report.schema import ReportModel
from decguard_pipeline_tests.support.tamper import single_edits, tampered

# every property set, each with settings of its own beyond the defaults
EVERY_PROPERTY: dict[str, Any] = {
    "option_order": {"max_tv_distance": 0.1, "samples": 4, "level": "warning"},
    "label_format": {"max_flip_rate": 0.2, "aliases": {"refund": ["Refund it"]},
                     "styles": ["upper", "quoted"]},
    "irrelevant_context": {"max_js_divergence": 0.1, "fragments": ["A note."], "insertions": 2},
    "repeated_context": {"max_abs_delta": 0.2, "repeats": 4, "max_violation_rate": 0.5},
    "whitespace": {"max_confidence_delta": 0.1, "edits": 2, "enabled": False},
    "paraphrase": {"max_tv_distance": 1, "source": {"model": "m", "provider": "identity"}},
    "inversion": {"max_flip_rate": 0, "rewrites": [{"find": "a", "replace": "b"}]},
    "monotonic": {"field": "amount", "deltas": [1, 2.5], "max_level_decrease": 0,
                  "direction": "decreasing"},
}  # fmt: skip
FUZZ = {"seed": 7, "text_field": "text", "minimize": False, "max_minimize_calls": 10}


def _both(kind: type, model: type[BaseModel], value: Any) -> tuple[Any, BaseModel | None]:
    """``value`` read as the struct and validated as the model (None where refused); the
    struct's dict is the model's ``model_dump(mode="json")`` whenever the struct reads it."""
    read = structs.read(value, kind)
    try:
        validated: BaseModel | None = model.model_validate(value)
    except ValidationError:
        validated = None
    if read is not None:
        assert validated is not None, value
        # json.dumps: the key order and 1 against 1.0 count
        assert json.dumps(structs.dumped(read)) == json.dumps(validated.model_dump(mode="json"))
    return read, validated


def _same_settings(read: structs.Properties, validated: models.Properties) -> None:
    """The structs answer what the models answer, for everything the checks ask of them."""
    mine, theirs = read.enabled(), validated.enabled()
    assert list(mine) == list(theirs)
    for name, settings in mine.items():
        other = theirs[name]
        assert limits_of(settings) == limits_of(other)
        assert settings.tolerances() == other.tolerances()
        for attribute in ("relation", "types", "reducible", "level", "max_flip_rate",
                          "max_violation_rate", "enabled"):  # fmt: skip
            assert getattr(settings, attribute) == getattr(other, attribute), attribute


def _edits(bases: list[Any], seed: str, n: int) -> list[Any]:
    """Every single edit of each base, then ``n`` random edits of one to three values."""
    rng = random.Random(seed)
    random_edits = [tampered(rng.choice(bases), rng, rng.choice([1, 1, 2, 3])) for _ in range(n)]
    return [edit for base in bases for edit in single_edits(base)] + random_edits


def _tally(bases: list[Any], kind: type, model: type[BaseModel], seed: str, n: int) -> list[int]:
    """[both accept, only the model accepts, both refuse] over the edits of the bases
    (:func:`_edits`; the struct never accepts alone: :func:`_both`)."""
    counts = [0, 0, 0]
    for value in _edits(bases, seed, n):
        read, validated = _both(kind, model, value)
        counts[0 if read is not None else 1 if validated is not None else 2] += 1
        if read is not None and kind is structs.Properties:
            _same_settings(read, validated)  # type: ignore[arg-type]
    return counts


def _configs(reports: dict[str, Any]) -> list[dict[str, Any]]:
    found = [json.loads(path.read_text())["properties"]["config"] for path in reports.values()]
    return [*found, EVERY_PROPERTY]


def test_the_settings_of_reports_and_every_property_are_read_alike(reports):
    for config in _configs(reports):
        read, validated = _both(structs.Properties, models.Properties, config)
        assert read is not None
        _same_settings(read, validated)  # type: ignore[arg-type]
    for name, settings in EVERY_PROPERTY.items():  # each alone, and with defaults only
        minimal = {"field": "amount"} if name == "monotonic" else {"max_flip_rate": 0.1}
        if name == "inversion":
            minimal["rewrites"] = [{"find": "yes", "replace": "no"}]
        for config in ({name: settings}, {name: minimal}):
            read, validated = _both(structs.Properties, models.Properties, config)
            assert read is not None, config
            _same_settings(read, validated)  # type: ignore[arg-type]


def test_edited_settings_are_read_as_the_models_read_them(reports):
    counts = _tally(_configs(reports), structs.Properties, models.Properties, "settings", 3000)
    # both accept many edits and refuse many; the structs leave some to the models
    # (numeric strings, integral floats for integers, "true" for true)
    assert min(counts) >= 10, counts


@pytest.mark.parametrize(
    ("kind", "model", "base"),
    [
        (structs.Fuzz, models.Fuzz, FUZZ),
        (structs.Evaluation, Evaluation, {"confidence_threshold": 0.7, "calibration_bins": 15,
                                          "probability_tolerance": 0.001, "max_concurrency": 8}),
        (structs.Gates, Gates, {"min_accuracy": 0.8, "max_brier": 1.5, "max_nll": 3,
                                "max_latency_p95_ms": 250, "max_ordinal_mae": 0.5}),
    ],
    ids=["fuzz", "evaluation", "gates"],
)  # fmt: skip
def test_edited_small_settings_are_read_as_the_models_read_them(kind, model, base):
    read, _ = _both(kind, model, base)
    assert read is not None
    assert _both(kind, model, {})[0] is not None  # every default
    counts = _tally([base, {}], kind, model, kind.__name__, 1500)
    assert min(counts) >= 10, counts


def test_gates_are_configured_alike():
    rng = random.Random("gates")
    fields = list(Gates.model_fields)
    for _ in range(200):
        value = {name: rng.choice([0, 0.5, 1, 2]) for name in rng.sample(fields, rng.randint(0, 5))}
        read, validated = _both(structs.Gates, Gates, value)
        if read is not None:
            assert list(read.configured().items()) == list(validated.configured().items())  # type: ignore[union-attr]


def _summaries(reports: dict[str, Any]) -> list[dict[str, Any]]:
    documents = [json.loads(path.read_text()) for path in reports.values()]
    return [summary for doc in documents for summary in doc["properties"]["summaries"]]


def test_edited_summaries_are_read_as_the_models_read_them(reports):
    bases = _summaries(reports)
    assert all(_both(Summary, SummaryModel, s)[0] is not None for s in bases)
    counts = _tally(bases, Summary, SummaryModel, "summaries", 1500)
    assert min(counts) >= 10, counts


def _header(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("results", "properties")}


def _headers_both(value: dict[str, Any]) -> tuple[Header | None, ReportModel | None]:
    read = header_of(value)
    try:
        validated: ReportModel | None = ReportModel.model_validate({**value, "results": []})
    except ValidationError:
        validated = None
    if read is not None:
        assert validated is not None, value
        dumped = validated.model_dump(mode="json", exclude={"results", "properties"})
        assert json.dumps(header_document(read)) == json.dumps(dumped)
        assert read.requirements.configured() == validated.requirements.configured()
        assert read.warnings.configured() == validated.warnings.configured()
    return read, validated


def test_edited_headers_are_read_as_the_model_reads_them(reports):
    bases = [_header(json.loads(path.read_text())) for path in reports.values()]
    for base in bases:
        assert _headers_both(base)[0] is not None
    # a secret in the backend's details is hidden by both
    secret = {**bases[0], "backend": {**bases[0]["backend"], "details": {"api_key": "sk-123"}}}
    read, _ = _headers_both(secret)
    assert read is not None and "sk-123" not in json.dumps(header_document(read))
    counts = [0, 0, 0]
    for value in _edits(bases[:2], "headers", 1500):
        read, validated = _headers_both(value)
        counts[0 if read is not None else 1 if validated is not None else 2] += 1
    assert min(counts) >= 10, counts

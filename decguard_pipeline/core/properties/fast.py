"""The fast path of loading a stored ``properties`` section: plain-dict checks that accept only
what the strict schema (:class:`schema.PropertyRunModel`) accepts, and give exactly what its
``model_dump(mode="json")`` gives, without building a model per pair.

:func:`load_plain` returns None as soon as anything is not plainly well-formed (a wrong type, an
integer where the schema wants a float, a broken result invariant...): the caller then loads
the section strictly, and pydantic says what is wrong, where, in DecGuard's words. The small
parts (``fuzz``, ``config``, ``summaries``) still go through their pydantic models; the pairs,
their results and reduced examples, and the skips are checked here, the result invariants for
all of them at once (:func:`schema.results_hold`).

The section must hold JSON values as a parser refusing NaN and Infinity gives them (orjson):
``dict[str, Any]`` fields (steps, provenance, inputs, metadata) are kept as they are, where
pydantic's JSON-mode dump would turn a NaN into null. The section itself is never changed: a
part that must be reordered, completed or redacted is copied.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product
from operator import itemgetter
from typing import Any

from pydantic import ValidationError

from decguard_pipeline.core.contract.names import PROPERTY_NAMES
from decguard_pipeline.core.contract.properties import Fuzz, Properties
from decguard_pipeline.core.properties.compare import COMPARISON_FIELDS
from decguard_pipeline.core.properties.schema import SummaryModel
from decguard_pipeline.core.result_records import results_hold
from decguard_pipeline.core.secrets import redact

NAMES = frozenset(PROPERTY_NAMES)
DECISION_TYPES = ("choice", "noul", "score")


def _none() -> None:
    return None


class _Shape:
    """The fields of one schema model in order, the required ones and the defaults' factories."""

    def __init__(self, fields: str, defaults: dict[str, Callable[[], Any]]) -> None:
        self.fields = tuple(fields.split())
        self.known = frozenset(self.fields)
        self.required = self.known - defaults.keys()
        self.defaults = defaults
        self.get = itemgetter(*self.fields)


SECTION = _Shape("seed fuzz config summaries pairs skipped", {"skipped": list})
PAIR = _Shape(
    "id property case_id sample steps provenance input presentation result error comparison "
    "violations reduced",
    {
        "provenance": dict,
        "presentation": _none,
        "result": _none,
        "error": _none,
        "comparison": _none,
        "violations": list,
        "reduced": _none,
    },
)
REDUCED = _Shape(
    "steps input presentation result comparison violations backend_calls",
    {"presentation": _none},
)
RESULT = _Shape(
    "case_id decision decision_type labels probabilities selected confidence backend provider "
    "model model_version latency_ms metadata",
    {"model": _none, "model_version": _none, "metadata": dict},
)
COMPARISON = _Shape(" ".join(COMPARISON_FIELDS), {"level_delta": _none})
ERROR = _Shape("kind message", {})
STATE = itemgetter("result", "error", "comparison", "reduced")
SKIP = _Shape("property case_id reason", {})


class _Off(Exception):
    """Not plainly well-formed: the strict schema decides (and explains)."""


def _ordered(value: Any, shape: _Shape) -> dict[str, Any]:
    """``value`` with exactly the shape's fields in order, defaults filled in: ``value`` itself
    when it already is, else a new dict."""
    if type(value) is not dict:
        raise _Off
    if tuple(value) == shape.fields:
        return value
    keys = value.keys()
    if not (shape.required <= keys <= shape.known):
        raise _Off
    return {f: value[f] if f in value else shape.defaults[f]() for f in shape.fields}


def _signatures(*types: type | tuple[type, ...]) -> frozenset[tuple[type, ...]]:
    """Every accepted tuple of value types, in field order (a tuple of types for a field
    that may have either)."""
    choices = [kind if isinstance(kind, tuple) else (kind,) for kind in types]
    return frozenset(product(*choices))


NONE = type(None)
TEXT = (str, dict)  # a DecisionInput
# the value types of a dict in field order (``_ordered``), by model
RESULT_TYPES = _signatures(
    str, str, str, list, dict, str, float, str, str, (str, NONE), (str, NONE), float, dict
)
COMPARISON_TYPES = _signatures(float, float, float, float, str, str, bool, bool, (float, NONE))
PAIR_TYPES = _signatures(
    str, str, str, int, list, dict, TEXT, (list, NONE), (dict, NONE), (dict, NONE),
    (dict, NONE), list, (dict, NONE),
)  # fmt: skip
REDUCED_TYPES = _signatures(list, TEXT, (list, NONE), dict, dict, list, int)
TEXT_PAIR = (str, str)


def _check_steps(steps: list[Any]) -> None:
    for step in steps:
        if type(step) is not dict:
            raise _Off


def _check_violations(violations: list[Any]) -> None:
    for violation in violations:
        if type(violation) is not str:
            raise _Off


def _check_presentation(presentation: list[Any] | None) -> None:
    if presentation is not None:
        for item in presentation:
            if type(item) is not list or tuple(map(type, item)) != TEXT_PAIR:
                raise _Off


def _result(value: Any, results: list[dict[str, Any]]) -> dict[str, Any]:
    """A stored DecisionResult; its labels' and probabilities' contents and its invariants are
    checked later for all results at once (``results_hold``)."""
    if type(value) is not dict or tuple(value) != RESULT.fields:
        value = _ordered(value, RESULT)
    if tuple(map(type, value.values())) not in RESULT_TYPES:
        raise _Off
    if value["decision_type"] not in DECISION_TYPES:
        raise _Off
    metadata = value["metadata"]
    if metadata:
        redacted = redact(metadata)
        if redacted != metadata:
            value = {**value, "metadata": redacted}
    results.append(value)
    return value


def _comparison(value: Any) -> dict[str, Any]:
    if type(value) is not dict or tuple(value) != COMPARISON.fields:
        value = _ordered(value, COMPARISON)
    if tuple(map(type, value.values())) not in COMPARISON_TYPES:
        raise _Off
    return value


def _error(value: Any) -> dict[str, Any]:
    error = _ordered(value, ERROR)
    if type(error["kind"]) is not str or type(error["message"]) is not str:
        raise _Off
    return error


def _reduced(value: Any, results: list[dict[str, Any]]) -> dict[str, Any]:
    reduced = _ordered(value, REDUCED)
    if tuple(map(type, reduced.values())) not in REDUCED_TYPES:
        raise _Off
    _check_steps(reduced["steps"])
    _check_presentation(reduced["presentation"])
    _check_violations(reduced["violations"])
    result, comparison = reduced["result"], reduced["comparison"]
    checked, compared = _result(result, results), _comparison(comparison)
    if checked is not result or compared is not comparison:
        reduced = {**reduced, "result": checked, "comparison": compared}
    return reduced


def _pair(value: Any, results: list[dict[str, Any]]) -> dict[str, Any]:
    if type(value) is not dict or tuple(value) != PAIR.fields:
        value = _ordered(value, PAIR)
    pair = value
    if tuple(map(type, pair.values())) not in PAIR_TYPES or pair["property"] not in NAMES:
        raise _Off
    _check_steps(pair["steps"])
    _check_presentation(pair["presentation"])
    violations = pair["violations"]
    if violations:
        _check_violations(violations)
    result, error, comparison, reduced = STATE(pair)
    # PairModel's own checks
    if (result is None) == (error is None) or (result is None) != (comparison is None):
        raise _Off
    if error is not None and (violations or reduced is not None):
        raise _Off
    if reduced is not None and not violations:
        raise _Off
    if result is not None:
        checked, compared = _result(result, results), _comparison(comparison)
        if checked["case_id"] != pair["id"]:
            raise _Off
        if reduced is not None:
            shrunk = _reduced(reduced, results)
            if shrunk is not reduced:
                pair = {**pair, "reduced": shrunk}
        if checked is not result or compared is not comparison:
            pair = {**pair, "result": checked, "comparison": compared}
    else:
        checked_error = _error(error)
        if checked_error is not error:
            pair = {**pair, "error": checked_error}
    return pair


def _skip(value: Any) -> dict[str, Any]:
    skip = _ordered(value, SKIP)
    name, case_id, reason = SKIP.get(skip)
    if not (type(name) is str and name in NAMES and type(case_id) is str and type(reason) is str):
        raise _Off
    return skip


def _load(section: Any, tolerance: float) -> dict[str, Any]:
    section = _ordered(section, SECTION)
    seed, fuzz, config, summaries, pairs, skipped = SECTION.get(section)
    if type(seed) is not int or type(summaries) is not list:
        raise _Off
    if type(pairs) is not list or type(skipped) is not list:
        raise _Off
    results: list[dict[str, Any]] = []
    loaded = {
        "seed": seed,
        "fuzz": Fuzz.model_validate(fuzz).model_dump(mode="json"),
        "config": Properties.model_validate(config).model_dump(mode="json"),
        "summaries": [SummaryModel.model_validate(s).model_dump(mode="json") for s in summaries],
        "pairs": [_pair(pair, results) for pair in pairs],
        "skipped": [_skip(skip) for skip in skipped],
    }
    if not results_hold(results, tolerance, floats=True):
        raise _Off
    return loaded


def load_plain(section: Any, tolerance: float) -> dict[str, Any] | None:
    """The section as the strict schema normalises it, or None when it is not plainly
    well-formed (then only the strict schema can say whether, and where, it is wrong)."""
    try:
        return _load(section, tolerance)
    except (_Off, ValidationError):
        return None
    except (ArithmeticError, LookupError, TypeError, ValueError):
        return None  # nothing the checks above foresaw: the schema says what it is

"""A stored report verified without pydantic: the ``report`` command's way, for a report
split in two (``halves``) or read whole.

``verify`` validates the header and the properties section's settings with pydantic, whose
import and first models are 0.15-0.2 s of this process's CPU: as long as a small report's
whole load, and as long again as the child checking a big report's other half of the pairs
would wait for this process. Here the structs of ``header_structs``, ``section_structs``
and ``core.contract.settings_structs`` read them instead, and every rule ``verify``
applies to a typed report is applied the same way (``semantics``, ``section_holds``). The
structs accept part of what the models accept and give the same values; whatever they or
the rules do not plainly accept returns None, and the verifier loads the report as always,
which finds and words the problem exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decguard_pipeline.core.collector import hand_off
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.json_limits import PARSER_DEPTH, ReadAhead
from decguard_pipeline.core.properties import typed_section
from decguard_pipeline.core.properties.limits import limits_of
from decguard_pipeline.core.properties.section_holds import typed_checks
from decguard_pipeline.core.properties.section_structs import checked
from decguard_pipeline.core.report import halves, typed_records
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.header_structs import header_document, header_of
from decguard_pipeline.core.report.semantics import assembled
from decguard_pipeline.core.results import CaseResults


class _NotPlain(Exception):
    """The properties section does not plainly hold (the verifier says whether it holds)."""


def load_ahead(path: Path, read_ahead: ReadAhead, ahead: halves.Ahead) -> Report:
    """``verify.load_report(path, read_ahead=read_ahead, ahead=ahead)``, with the report
    verified here (:func:`load_typed`) when it plainly holds: the ``report`` command's
    load."""
    try:
        report = _by_structs(read_ahead, ahead, path)
    except Exception:  # whatever it is, the verifier's load meets it and words it
        report = None
    except BaseException:
        if ahead.split is not None:
            ahead.split[1].close()
        raise
    if report is not None:
        return report
    from decguard_pipeline.core.report.verify import load_report  # pydantic

    return load_report(path, read_ahead=read_ahead, ahead=ahead)


def _by_structs(read_ahead: ReadAhead, ahead: halves.Ahead, path: Path) -> Report | None:
    if ahead.split is not None:
        return load_typed(path, *ahead.split)
    decoded = typed_records.decode(read_ahead.result())  # a read error: the verifier's
    return None if decoded is None else load_typed(path, decoded)


def load_typed(
    path: Path, decoded: typed_records.Decoded, later: halves.OtherHalf | None = None
) -> Report | None:
    """The report read from ``path`` and decoded as ``decoded`` verified, or None when
    anything about it does not plainly hold. ``later``: the pairs after ``decoded``'s, which
    a child decoded and checks (``halves``); it is reaped when a report is returned, else
    left to ``verify.load_report``, which reads its verdict again."""
    # no ``json_limits.check_utf8`` of the bytes: outside its strings a JSON document is
    # ASCII, and msgspec refuses a string that is not UTF-8, as Python's strict decoder does
    # (in the part each process decoded: every string of the document)
    data, records, shallow = decoded
    section = data.get("properties")
    # sent when the structs accepted the settings (``halves.send_rules``)
    rules = later.rules if later is not None else None
    if later is not None and (section is None or rules is None):
        return None
    if not typed_records.nested_within(decoded, PARSER_DEPTH):
        return None
    if section is not None and not typed_section.nested_within(
        section, PARSER_DEPTH, shallow=shallow
    ):
        return None
    small = checked(section) if section is not None else None
    header = header_of(data)
    if header is None or (section is not None and small is None):
        return None
    c = header.contract
    key = (
        DecisionSpec(c.name, c.type, tuple(c.labels)),
        header.backend.name,
        header.backend.provider,
    )
    tolerance = header.evaluation.probability_tolerance
    if rules is not None:
        if small is None:  # a split report has a section: never so
            return None
        limits = {n: limits_of(s) for n, s in small.config.enabled().items()}
        if rules.key != key or rules.limits != limits:
            return None
        results: CaseResults | None = rules.results
    else:
        results = typed_records.columns(*key, records, tolerance)
        if results is None:
            return None
    held = None
    if section is not None:
        held = typed_section.pairs_hold(section.pairs, None, tolerance)
        if held is None:
            return None
    hand_off(records)  # in a command, freed with the process

    settings = None if small is None else small.config

    def section_checks(properties: dict[str, Any], results: CaseResults) -> list[dict[str, Any]]:
        found = typed_checks(properties["summaries"], section, settings, results, later, held)
        if found is None:
            raise _NotPlain  # the verifier's one-by-one checks find and word it
        return found

    doc = header_document(header)
    pending = None if section is None else typed_section.TypedPairs(section.pairs, later)
    properties = None if small is None else small.section
    try:
        report = assembled(path, header, doc, properties, lambda: results, section_checks, pending)
    except (ReportError, _NotPlain):
        return None
    if later is not None:
        later.close()
    return report

"""A report split in two (``halves``) verified without pydantic: ``report``'s way for a big
report.

``verify`` validates the header and the properties section's settings with pydantic, whose
import and first models are 0.15-0.2 s of this process's CPU: about as long as the child
checking the other half of the pairs has to wait for. Here the structs of
``header_structs``, ``section_structs`` and ``core.contract.settings_structs`` read them
instead, and every rule ``verify`` applies to a split report is applied the same way
(``semantics``, ``section_holds``). The structs accept part of what the models accept and
give the same values; whatever they or the rules do not plainly accept returns None, and the
verifier loads the report as always, which finds and words the problem exactly.
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


def load_ahead(path: Path, read_ahead: ReadAhead, ahead: halves.Ahead) -> Report:
    """``verify.load_report(path, read_ahead=read_ahead, ahead=ahead)``, with a split report
    verified here (:func:`load_split`) when it plainly holds: the ``report`` command's load."""
    if ahead.split is not None:
        try:
            report = load_split(path, ahead.split)
        except Exception:  # whatever it is, the verifier's load meets it and words it
            report = None
        except BaseException:
            ahead.split[1].close()
            raise
        if report is not None:
            return report
    from decguard_pipeline.core.report.verify import load_report  # pydantic

    return load_report(path, read_ahead=read_ahead, ahead=ahead)


def load_split(path: Path, split: halves.Split) -> Report | None:
    """The report read from ``path`` and split as ``split`` verified, or None when
    anything about it does not plainly hold. Reaps the child when it returns a report; else
    the child is left to ``verify.load_report``, which reads its verdict again."""
    decoded, later = split
    # no ``json_limits.check_utf8`` of ``raw``: outside its strings a JSON document is ASCII,
    # and msgspec refuses a string that is not UTF-8, as Python's strict decoder does (in
    # the part each process decoded: every string of the document)
    data, records, shallow = decoded
    section = data.get("properties")
    rules = later.rules  # sent when the structs accepted the settings (``halves.send_rules``)
    if section is None or rules is None:
        return None
    if not typed_records.nested_within(decoded, PARSER_DEPTH):
        return None
    if not typed_section.nested_within(section, PARSER_DEPTH, shallow=shallow):
        return None
    small = checked(section)
    header = header_of(data)
    if small is None or header is None:
        return None
    c = header.contract
    key = (
        DecisionSpec(c.name, c.type, tuple(c.labels)),
        header.backend.name,
        header.backend.provider,
    )
    enabled = small.config.enabled()
    if rules.key != key or rules.limits != {n: limits_of(s) for n, s in enabled.items()}:
        return None
    held = typed_section.pairs_hold(section.pairs, None, header.evaluation.probability_tolerance)
    if held is None:
        return None
    hand_off(records)  # in a command, freed with the process

    def section_checks(properties: dict[str, Any], results: CaseResults) -> list[dict[str, Any]]:
        found = typed_checks(properties["summaries"], section, small.config, results, later, held)
        if found is None:
            raise typed_section.SplitRefused
        return found

    doc = header_document(header)
    pending = typed_section.TypedPairs(section.pairs, later)
    try:
        report = assembled(
            path, header, doc, small.section, lambda: rules.results, section_checks, pending
        )
    except (ReportError, typed_section.SplitRefused):
        return None
    later.close()
    return report

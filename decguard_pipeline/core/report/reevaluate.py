"""``report --contract``: re-apply a (possibly edited) contract to stored results.

No backend is called: metrics are recomputed with the new evaluation settings and the new
gates are applied; property pairs are re-judged with the new limits (transformations are not
regenerated).
"""

from __future__ import annotations

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.report.golden import Report, build_report


def ensure_same_decision(doc: dict, loaded: LoadedContract) -> None:  # type: ignore[type-arg]
    spec = loaded.contract.spec()
    c = doc["contract"]
    if (spec.name, spec.type, list(spec.labels)) != (c["name"], c["type"], list(c["labels"])):
        raise ReportError(
            f"contract {loaded.path} describes {spec.name!r} ({spec.type}, {list(spec.labels)}) "
            f"but the report is for {c['name']!r} ({c['type']}, {list(c['labels'])})"
        )


def reevaluate(report: Report, loaded: LoadedContract) -> Report:
    doc = report.document
    ensure_same_decision(doc, loaded)
    properties = doc.get("properties")
    property_checks = None
    if properties is not None:
        # imported here: golden-only reports never load the property machinery
        from decguard_pipeline.core.properties.report import rejudge

        properties, property_checks = rejudge(
            properties, loaded.contract.properties, report.results
        )
    return build_report(
        loaded,
        doc["dataset"],
        doc["backend"],
        report.results,
        health=doc.get("health"),
        mode=doc["mode"],
        properties=properties,
        property_checks=property_checks,
    )

"""What the UI shows with each materialisation: readable at a glance.

Numbers in tables are rounded to 4 significant digits (as the HTML report shows them); single
numbers are ``float`` metadata, which the asset's *Plots* tab charts per partition (target),
with the binary noise of sums taken off (``0.4800000000000001`` is shown as ``0.48``)."""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.core.report.render import preview

MAX_ROWS = 20
TABLE_DIGITS = 4  # significant digits of a float in a metadata table
NUMBER_DIGITS = 12  # of a single float: enough for any comparison, no binary noise


def significant(value: float, digits: int) -> float:
    """``value`` rounded to ``digits`` significant digits (inf and NaN unchanged); zero has
    no sign (a difference of two equal numbers, or a tiny negative one rounded, would read
    ``-0`` in the UI)."""
    if not math.isfinite(value):
        return float(value)
    rounded = float(f"{value:.{digits}g}")
    return 0.0 if rounded == 0 else rounded


def number(value: float | None) -> dg.MetadataValue | None:
    """A single number for the UI (and its per-partition plots); None stays None."""
    return (
        None if value is None else dg.MetadataValue.float(significant(float(value), NUMBER_DIGITS))
    )


def numbers(values: Mapping[str, float | None]) -> dict[str, dg.MetadataValue]:
    """Numeric metadata entries of the defined ``values`` (undefined ones are left out: a
    metric without a value is no point on a plot)."""
    out = {}
    for name, value in values.items():
        entry = number(value)
        if entry is not None:
            out[name] = entry
    return out


def table(
    rows: list[dict[str, Any]], columns: list[tuple[str, str]], *, limit: int = MAX_ROWS
) -> dg.MetadataValue:
    """A metadata table (first ``limit`` rows); ``columns`` are (name, type) with type one of
    string, float, int, bool."""
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in columns])
    records = [
        dg.TableRecord({name: _cell(row.get(name), kind) for name, kind in columns})
        for row in rows[:limit]
    ]
    return dg.MetadataValue.table(records=records, schema=schema)


def _cell(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "float":
        return significant(float(value), TABLE_DIGITS)
    if kind == "int":
        return int(value)
    if kind == "bool":
        return bool(value)
    return str(value)


def metrics_table(flat: dict[str, float | None]) -> dg.MetadataValue:
    rows = [{"metric": k, "value": v} for k, v in flat.items() if v is not None]
    return table(rows, [("metric", "string"), ("value", "float")], limit=len(rows))


def failing_cases_table(failures: list[dict[str, Any]]) -> dg.MetadataValue:
    rows = [
        {**f, "input": preview(f["input"], 60), "confidence": f["confidence"]} for f in failures
    ]
    return table(
        rows,
        [
            ("case_id", "string"),
            ("kind", "string"),
            ("expected", "string"),
            ("selected", "string"),
            ("confidence", "float"),
            ("error", "string"),
            ("input", "string"),
        ],
    )


def checks_table(
    checks: list[dict[str, Any]],
    *,
    leading: list[tuple[str, str]] | None = None,
    limit: int = MAX_ROWS,
) -> dg.MetadataValue:
    """Gate checks; ``leading``: columns before the check's own (which suite, which source)."""
    return table(
        checks,
        [
            *(leading or []),
            ("status", "string"),
            ("gate", "string"),
            ("level", "string"),
            ("value", "float"),
            ("comparison", "string"),
            ("threshold", "float"),
            ("message", "string"),
        ],
        limit=limit,
    )


def outcomes_table(rows: list[dict[str, Any]], part: str) -> dg.MetadataValue:
    """One aggregated check's outcome per part (suite, segment, ...): column ``part`` names
    it, then gate, status, value, threshold and message."""
    return table(
        rows,
        [
            (part, "string"),
            ("gate", "string"),
            ("status", "string"),
            ("value", "float"),
            ("threshold", "float"),
            ("message", "string"),
        ],
        limit=1000,
    )


def results_table(results: Any, limit: int = MAX_ROWS) -> dg.MetadataValue:
    """The first cases of a run: what was expected, selected, how confident, how fast."""
    labels = results.labels
    rows = []
    for i in range(min(limit, len(results))):
        chosen = int(results.selected[i])
        rows.append(
            {
                "case_id": results.case_ids[i],
                "expected": results.expected[i],
                "selected": labels[chosen] if chosen >= 0 else None,
                "confidence": None if chosen < 0 else float(results.confidence[i]),
                "latency_ms": None if chosen < 0 else float(results.latency_ms[i]),
                "error": results.error_kind[i],
                "input": preview(results.inputs[i], 60),
            }
        )
    columns = [("case_id", "string"), ("expected", "string"), ("selected", "string"),
               ("confidence", "float"), ("latency_ms", "float"), ("error", "string"),
               ("input", "string")]  # fmt: skip
    return table(rows, columns, limit=limit)


def intervals_table(section: dict[str, Any]) -> dg.MetadataValue:
    """Golden metrics with their confidence intervals (pipeline.statistics)."""
    rows = [{"metric": name, **entry} for name, entry in section["intervals"].items()]
    columns = [("metric", "string"), ("value", "float"), ("low", "float"), ("high", "float"),
               ("method", "string")]  # fmt: skip
    return table(rows, columns, limit=len(rows))


def markdown_image(title: str, uri_or_png: str | bytes) -> str:
    """An image inline in markdown: a data URI (``core.html.figures.data_uri``), or PNG bytes.
    The alt text is the title with markdown's brackets and backslashes escaped, so a model
    version such as ``v2]`` cannot end it early and break the image."""
    uri = (
        uri_or_png
        if isinstance(uri_or_png, str)
        else "data:image/png;base64," + base64.b64encode(uri_or_png).decode("ascii")
    )
    alt = re.sub(r"([\\\[\]])", r"\\\1", title)
    return f"![{alt}]({uri})"

"""Verifying a check report without holding it: its records read a block at a time.

A report of ten million records is gigabytes; :func:`.verify.load_production_report` parses
it whole. Here a report laid out as this package and DecGuard write it (two-space indentation,
``records`` a list of objects at the top level) is verified in place: the document without its
records is parsed and validated as there, the records are cut into blocks at the boundaries
between them and parsed by Arrow, checked column-wise exactly as ``check`` checks records
(:func:`.arrow_batches.table_batch`) plus the stored form (every record with its ``id``,
``confidence`` and ``metadata``, ``outcome_correct`` derived), and every number is recomputed
from their columns and compared (:func:`.verify.compare`).

The column checks only ever accept what is certainly valid. Whenever something is unusual
(another layout, a token or type Arrow reads otherwise than DecGuard's parser, any record or
number that does not verify), :func:`verify_report` answers False and the caller verifies the
file whole, which words the problem as DecGuard does.
"""

from __future__ import annotations

import mmap
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pj
from pydantic import ValidationError

from decguard_pipeline.core import json_exact
from decguard_pipeline.core.contract import Evaluation, Production
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.json_limits import PARSER_DEPTH, structure_problem
from decguard_pipeline.core.production import schema
from decguard_pipeline.core.production.arrow_batches import table_batch
from decguard_pipeline.core.production.columns import ColumnsBuilder, first_repeat
from decguard_pipeline.core.production.jsonl_blocks import record_schemas
from decguard_pipeline.core.production.loader import release_free_memory, release_pages
from decguard_pipeline.core.production.verify import Invalid, compare

BLOCK_BYTES = 16 << 20
PARSERS = 2  # threads parsing blocks
AHEAD = 3  # blocks parsed ahead of the checks (bounds memory to a few blocks)
# blocks between returns of freed memory: the parsing threads' heaps would otherwise keep
# what every block freed
TRIM_BLOCKS = 4
_OPEN = b'\n  "records": [\n'
_CLOSE = b"\n  ]"
_FIRST, _LAST = b"    {\n", b"\n    }"
_BETWEEN = b"\n    },\n    {\n"
_SPLIT = b"\n    }\n    {\n"  # the same boundary without the comma: objects one after another
_READ = pj.ReadOptions(use_threads=False, block_size=1 << 24)


def _depth(kind: pa.DataType) -> int:
    """How many objects and arrays a value of this Arrow type sits in, at most."""
    if pa.types.is_struct(kind):
        return 1 + max((_depth(kind.field(i).type) for i in range(kind.num_fields)), default=0)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return 1 + _depth(kind.value_type)
    return 0


def _header(data: Any, start: int, end: int) -> dict[str, Any] | None:
    """The document without its records, validated as the whole-file reader validates it."""
    raw = bytes(data[:start]) + b"[]" + bytes(data[end:])
    if structure_problem(raw) is not None:
        return None
    try:
        fields = json_exact.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(fields, dict) or fields.get("records") != []:
        return None
    fields.pop("records")
    try:
        return schema.ReportHeader.model_validate(fields).model_dump(mode="json")
    except ValidationError:
        return None


def _blocks(data: Any, start: int, end: int) -> list[tuple[int, int]]:
    """Stretches of whole records of ``data[start:end]`` (the records list's contents)."""
    out = []
    while start < end:
        cut = min(start + BLOCK_BYTES, end)
        if cut < end:
            at = data.rfind(_BETWEEN, start, cut)
            if at < 0:
                at = data.find(_BETWEEN, cut, end)
            cut = end if at < 0 else at + len(_LAST)
        out.append((start, cut))
        start = cut + 2 if cut < end else end  # past ",\n" to the next record
    return out


def _stored_form(table: pa.Table) -> bool:
    """Every record states its id, confidence and metadata (absent and null read alike
    here, and both are another form than DecGuard stores), and correctness wherever an
    outcome is known."""
    for name in ("id", "confidence", "metadata"):
        if name not in table.column_names or table.column(name).null_count:
            return False
    if "outcome" in table.column_names and table.column("outcome").null_count < table.num_rows:
        if "outcome_correct" not in table.column_names:
            return False
        known = table.column("outcome").is_valid().to_numpy(zero_copy_only=False)
        correct = table.column("outcome_correct").is_valid().to_numpy(zero_copy_only=False)
        if (known & ~correct).any():
            return False
    return all(_depth(f.type) < PARSER_DEPTH - 2 for f in table.schema)


def _parse(block: bytes, options: list[pj.ParseOptions]) -> pa.Table | None:
    """The records of a block as Arrow reads them with a record's types (as a records file
    is read: text first, then with inferred inputs, labels and metadata)."""
    for option in options:
        try:
            return pj.read_json(pa.BufferReader(block), read_options=_READ, parse_options=option)
        except (pa.ArrowException, ValueError):
            continue
    return None


def _fits(table: pa.Table | None, records: int) -> bool:
    """One row per record, in the stored form, with finite numbers."""
    return (
        table is not None and table.num_rows == records and _stored_form(table) and _finite(table)
    )


def _finite(table: pa.Table) -> bool:
    """No NaN or infinity anywhere: Arrow reads those tokens, DecGuard's reader may not."""
    stack = [table.column(i).combine_chunks() for i in range(table.num_columns)]
    while stack:
        column = stack.pop()
        if pa.types.is_struct(column.type):
            stack += [column.field(i) for i in range(column.type.num_fields)]
        elif pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            stack.append(column.flatten())
        elif pa.types.is_floating(column.type):
            values = column.to_numpy(zero_copy_only=False)
            if not np.isfinite(
                values[~np.isnan(values) | column.is_valid().to_numpy(zero_copy_only=False)]
            ).all():
                return False
    return True


def verify_report(path: str | Path) -> bool:
    """Whether the report at ``path`` verifies, read a block at a time; False also when it
    cannot be told this way (then :func:`.verify.load_production_report` decides)."""
    with Path(path).open("rb") as stream:
        if not Path(path).stat().st_size:
            return False
        data = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return _verify(data)
        finally:
            data.close()


def _verify(data: Any) -> bool:
    opened = data.find(_OPEN)
    if opened < 0:
        return False
    start = opened + len(_OPEN)
    end = data.rfind(_CLOSE, start)  # the records come last (else the header will not parse)
    if (
        end < 0
        or data[start : start + len(_FIRST)] != _FIRST
        or data[end - len(_LAST) : end] != _LAST
    ):
        return False
    document = _header(data, opened + len(_OPEN) - 2, end + len(_CLOSE))
    if document is None:
        return False
    contract = document["contract"]
    spec = DecisionSpec(contract["name"], contract["type"], tuple(contract["labels"]))
    tolerance = Evaluation.model_validate(document["evaluation"]).probability_tolerance
    keys = tuple(Production.model_validate(document["config"]).segments)
    builder = ColumnsBuilder(spec, keys)
    options = [
        pj.ParseOptions(
            explicit_schema=shape, unexpected_field_behavior="infer", newlines_in_values=True
        )
        for shape in record_schemas(spec, keys)
    ]
    blocks = _blocks(data, start, end)

    def prepare(a: int, b: int) -> tuple[int, pa.Table | None]:
        # on worker threads (Arrow's parser releases the GIL) while the main thread checks
        block = data[a:b]
        return block.count(_BETWEEN) + 1, _parse(block.replace(_BETWEEN, _SPLIT), options)

    with ThreadPoolExecutor(PARSERS) as parsers:
        pending = deque(parsers.submit(prepare, a, b) for a, b in blocks[:AHEAD])
        for index, (_, b) in enumerate(blocks):
            records, table = pending.popleft().result()
            if index + AHEAD < len(blocks):
                pending.append(parsers.submit(prepare, *blocks[index + AHEAD]))
            release_pages(data, b)
            if index % TRIM_BLOCKS == TRIM_BLOCKS - 1:
                release_free_memory()
            if not _fits(table, records):
                for future in pending:
                    future.cancel()
                return False
            assert table is not None
            batch = table_batch(
                table, spec, tolerance, first_position=builder.n + 1, segment_keys=keys,
                versions=builder.versions, segment_values=builder.segment_values,
            )  # fmt: skip
            if batch is None:
                for future in pending:
                    future.cancel()
                return False
            builder.add(batch)
    release_free_memory()  # what the parsing threads freed, before the columns are joined
    ids = pa.chunked_array(builder.parts.get("ids", []), type=pa.string())
    hashes = builder.parts.get("id_hashes")
    if not builder.n or first_repeat(np.concatenate(hashes), ids) is not None:
        return False
    columns = builder.build()
    release_free_memory()
    try:
        compare(document, columns)
    except (Invalid, DecGuardError):
        return False
    return True

"""A day's check report records written from its stored ``production_records`` rows.

Each row group (one stretch of records as ingested) becomes the records' indented texts on
one of two threads, handed on in order: Parquet decoding and Arrow's string kernels release
the GIL, so the texts of the next group are built while the writer writes the last.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.production import jsonl_blocks
from decguard_pipeline.core.production.normalized import normalized_record
from decguard_pipeline.core.production.record_text import (
    RECORD_INDENT,
    exact_objects,
    indent_value,
    record_texts,
)
from decguard_pipeline.core.production.report import SEPARATOR
from decguard_pipeline.warehouse.rows.production_records import COPIED_BACK, stored_probs

WORKERS = 2  # threads building groups' texts
AHEAD = 3  # groups built ahead of the writer (bounds memory to a few groups' texts)
_FOR_TEXT = [*COPIED_BACK, "input_json", "labels", "probs", "metadata_json"]

Texts = pa.Array | pa.ChunkedArray


def _group_texts(
    path: Path, group: int, position: int, spec: DecisionSpec, files: threading.local
) -> Texts:
    """The texts of row group ``group``, whose first record is number ``position`` + 1
    (each thread reads through a file of its own)."""
    file = getattr(files, "file", None)
    if file is None:
        file = files.file = pq.ParquetFile(path)
    batch = file.read_row_group(group, _FOR_TEXT)
    labels, probs = stored_probs(batch)
    probs = probs[:, [labels.index(label) for label in spec.labels]]
    fields = {name: batch.column(name) for name in COPIED_BACK}
    fields["input"] = batch.column("input_json")
    fields["metadata"] = batch.column("metadata_json")
    texts = record_texts(pa.table(fields), spec.labels, probs, indented=True, prefix=SEPARATOR)
    plain = exact_objects(batch.column("metadata_json")) & exact_objects(
        pc.fill_null(batch.column("input_json"), "")
    )
    if plain.all():
        return texts
    # only those records parsed and written one by one
    odd = np.flatnonzero(~plain)
    stored = file.read_row_group(group, ["record_json"]).column(0).combine_chunks()
    exact = [
        SEPARATOR + indent_value(normalized_record(
            jsonl_blocks.json_value(text.encode()), position + i + 1, spec
        ), RECORD_INDENT)
        for i, text in zip(odd.tolist(), stored.take(pa.array(odd)).to_pylist(), strict=True)
    ]  # fmt: skip
    return pc.replace_with_mask(
        texts.combine_chunks(), pa.array(~plain), pa.array(exact, pa.string())
    )


def report_texts(path: Path, spec: DecisionSpec) -> Iterator[Texts]:
    """The stored records as a check report holds them (indented JSON, the probabilities in
    the contract's label order), each after ``report.SEPARATOR``, a row group at a time, in
    order. Records whose objects orjson would write otherwise than stored are rebuilt from
    ``record_json``."""
    metadata = pq.ParquetFile(path).metadata
    sizes = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
    firsts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(int).tolist() if sizes else []
    files = threading.local()
    pending: deque[Future[Texts]] = deque()
    with ThreadPoolExecutor(WORKERS) as pool:
        try:
            for group, first in enumerate(firsts):
                pending.append(pool.submit(_group_texts, path, group, first, spec, files))
                if len(pending) > AHEAD:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:  # the writer stopped early: nothing more is built
            for future in pending:
                future.cancel()

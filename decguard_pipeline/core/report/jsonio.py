"""JSON output: DecGuard documents are written with two-space indentation and a final newline.

Large documents stream their biggest list (``results``) record by record so a report of a
million cases never exists as one string.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from decguard_pipeline.core.errors import ReportError

_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
_MARK = "__decguard_stream_here__"


def dumps(document: Any) -> str:
    """The document, indented, without the final newline."""
    try:
        return orjson.dumps(document, option=_OPTS).decode("utf-8")
    except orjson.JSONEncodeError:
        # integers beyond 64 bits (JSON allows them): the standard library writes them
        return json.dumps(document, indent=2, ensure_ascii=False)


CHUNK = 64  # records per orjson call: few calls, yet too few objects held to wake the GC


def _dump_list(items: list[Any]) -> str:
    """A list as its indented JSON elements, each line indented for a list nested one level
    inside the document (``[`` and ``]`` left out)."""
    try:
        text = orjson.dumps(items, option=_OPTS).decode("utf-8")
    except orjson.JSONEncodeError:
        text = json.dumps(items, indent=2, ensure_ascii=False)
    return "  " + text[2:-2].replace("\n", "\n  ")


def _chunks(document: dict[str, Any], key: str, items: Iterable[Any]) -> Iterator[str]:
    head, _, tail = dumps({**document, key: _MARK}).partition(f'"{_MARK}"')
    yield head
    first = True
    batch: list[Any] = []
    # one orjson call per batch of records instead of one per record, then the batch's
    # lines are shifted as a whole
    for item in items:
        batch.append(item)
        if len(batch) == CHUNK:
            yield ("[\n" if first else ",\n") + _dump_list(batch)
            first, batch = False, []
    if batch:
        yield ("[\n" if first else ",\n") + _dump_list(batch)
        first = False
    yield "[]" if first else "\n  ]"
    yield tail


def write_stream(out: IO[str], document: dict[str, Any], key: str, items: Iterable[Any]) -> None:
    """Write ``document`` with ``document[key]`` replaced by the streamed ``items``."""
    from decguard_pipeline.core.dataset import gc_paused

    with gc_paused():  # a record per item, none kept: nothing for the collector but walks
        for chunk in _chunks(document, key, items):
            out.write(chunk)
        out.write("\n")


def write_document(
    path: str | Path,
    document: dict[str, Any],
    *,
    stream_key: str | None = None,
    items: Iterable[Any] = (),
    what: str = "report",
) -> None:
    """Write a JSON document to ``path`` (parents created)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as out:
            if stream_key is None:
                out.write(dumps(document) + "\n")
            else:
                write_stream(out, document, stream_key, items)
    except OSError as exc:
        raise ReportError(f"{path}: cannot write {what}: {exc.strerror or exc}") from exc


def print_document(
    document: dict[str, Any], *, stream_key: str | None = None, items: Iterable[Any] = ()
) -> None:
    if stream_key is None:
        sys.stdout.write(dumps(document) + "\n")
    else:
        write_stream(sys.stdout, document, stream_key, items)
    sys.stdout.flush()

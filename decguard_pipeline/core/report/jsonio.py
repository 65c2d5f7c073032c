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
_MARK_BYTES = f'"{_MARK}"'.encode()


def _encode(value: Any) -> bytes:
    """The value indented, as UTF-8 bytes."""
    try:
        return orjson.dumps(value, option=_OPTS)
    except orjson.JSONEncodeError:
        # integers beyond 64 bits (JSON allows them): the standard library writes them
        return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8")


def dumps(document: Any) -> str:
    """The document, indented, without the final newline."""
    return _encode(document).decode("utf-8")


CHUNK = 64  # records per orjson call: few calls, yet too few objects held to wake the GC


def _dump_list(items: list[Any]) -> bytes:
    """A list as its indented JSON elements, each line indented for a list nested one level
    inside the document (``[`` and ``]`` left out)."""
    return b"  " + _encode(items)[2:-2].replace(b"\n", b"\n  ")


def _chunks(document: dict[str, Any], key: str, items: Iterable[Any]) -> Iterator[bytes]:
    # the document is encoded once; its parts around the streamed list are written as views
    # (a report's properties section may be tens of megabytes: never copied, never decoded)
    whole = _encode({**document, key: _MARK})
    cut = whole.index(_MARK_BYTES)
    yield memoryview(whole)[:cut]
    first = True
    batch: list[Any] = []
    # one orjson call per batch of records instead of one per record, then the batch's
    # lines are shifted as a whole
    for item in items:
        batch.append(item)
        if len(batch) == CHUNK:
            yield (b"[\n" if first else b",\n") + _dump_list(batch)
            first, batch = False, []
    if batch:
        yield (b"[\n" if first else b",\n") + _dump_list(batch)
        first = False
    yield b"[]" if first else b"\n  ]"
    yield memoryview(whole)[cut + len(_MARK_BYTES) :]


def write_stream(out: IO[bytes], document: dict[str, Any], key: str, items: Iterable[Any]) -> None:
    """Write ``document`` with ``document[key]`` replaced by the streamed ``items`` to a
    binary stream."""
    from decguard_pipeline.core.dataset import gc_paused

    with gc_paused():  # a record per item, none kept: nothing for the collector but walks
        for chunk in _chunks(document, key, items):
            out.write(chunk)
        out.write(b"\n")


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
        with path.open("wb") as out:
            if stream_key is None:
                out.write(_encode(document) + b"\n")
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
        from decguard_pipeline.core.dataset import gc_paused

        with gc_paused():
            for chunk in _chunks(document, stream_key, items):
                sys.stdout.write(bytes(chunk).decode("utf-8"))
            sys.stdout.write("\n")
    sys.stdout.flush()

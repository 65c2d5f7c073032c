"""JSON output: DecGuard documents are written with two-space indentation and a final newline.

Large documents stream their biggest list (``results``) record by record, and encode other
big lists (a report's property pairs) a batch of records at a time, so a report of a million
cases never exists as one string. The bytes are those of encoding the whole document at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from decguard_pipeline.core.atomic_file import atomic_output
from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.report.write_behind import WriteBehind

_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
_MARK = "__decguard_stream_here__"


def encode(value: Any) -> bytes:
    """The value indented, as UTF-8 bytes: orjson, or for what it cannot write (an integer
    beyond 64 bits) the fallback, which writes everything else as orjson does. So a value's
    bytes never depend on which encoder wrote them, nor on how a list was batched."""
    try:
        return orjson.dumps(value, option=_OPTS)
    except orjson.JSONEncodeError:
        return _standard(value)


def _standard(value: Any) -> bytes:
    """What orjson cannot write (an integer beyond 64 bits), as DecGuard writes its reports
    (pydantic's serializer): floats as orjson writes them (``1.5e-7``, where the standard
    library writes ``1.5e-07``), NaN and infinities as null, the integer exact."""
    import pydantic_core  # here: 15-20 ms to import, for a value no report normally has

    try:
        return pydantic_core.to_json(value, indent=2, inf_nan_mode="null")
    except pydantic_core.PydanticSerializationError as exc:  # as json.dumps said it
        raise TypeError(str(exc)) from None


def dumps(document: Any) -> str:
    """The document, indented, without the final newline."""
    return encode(document).decode("utf-8")


CHUNK = 64  # records per orjson call: few calls, yet too few objects held to wake the GC


def _wrapped(items: Any, depth: int) -> dict[str, Any]:
    for _ in range(depth):
        items = {"k": items}
    return items


def _margins(depth: int) -> tuple[int, int]:
    """How many bytes come before the first element and after the last one when a list is
    encoded ``depth`` objects deep (``_wrapped``)."""
    encoded = orjson.dumps(_wrapped([0], depth), option=_OPTS)
    return encoded.index(b"[\n") + 2, len(encoded) - encoded.rindex(b"\n" + b"  " * depth + b"]")


_MARGINS = {depth: _margins(depth) for depth in (1, 2, 3)}


def _dump_list(items: list[Any], depth: int) -> bytes | memoryview:
    """A non-empty list as its indented JSON elements for a list nested ``depth`` objects
    deep in the document (``[`` and ``]`` left out). The list is encoded inside as many
    wrapping objects, so the encoder indents it already (no second pass over the text)."""
    encoded = encode(_wrapped(items, depth))
    before, after = _MARGINS[depth] if depth in _MARGINS else _margins(depth)
    return memoryview(encoded)[before : len(encoded) - after]


def _listed(items: Iterable[Any], depth: int) -> Iterator[bytes | memoryview]:
    """``items`` as the JSON list they form ``depth`` objects deep in the document, from
    ``[`` to ``]``: one encoder call per batch of records instead of one per record."""
    first = True
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == CHUNK:
            yield b"[\n" if first else b",\n"
            yield _dump_list(batch, depth)
            first, batch = False, []
    if batch:
        yield b"[\n" if first else b",\n"
        yield _dump_list(batch, depth)
        first = False
    yield b"[]" if first else b"\n" + b"  " * depth + b"]"


def _with_marks(
    document: dict[str, Any], key: str | None, paths: tuple[tuple[str, ...], ...]
) -> dict[str, Any]:
    """A shallow copy of ``document`` with ``key`` (mark 0) and the value at each path (when
    it is a list, inside dicts; marks 1...) replaced by its mark; the document itself is
    left as it is."""
    top = dict(document)
    if key is not None:
        top[key] = f"{_MARK}0"
    for number, path in enumerate(paths, 1):
        holder = top
        for part in path[:-1]:
            inner = holder.get(part)
            if type(inner) is not dict:
                break
            holder[part] = holder = dict(inner)
        else:
            if type(holder.get(path[-1])) is list:
                holder[path[-1]] = f"{_MARK}{number}"
    return top


def _chunks(
    document: dict[str, Any],
    key: str | None,
    items: Iterable[Any],
    chunked: tuple[tuple[str, ...], ...] = (),
) -> Iterator[bytes | memoryview]:
    """The document with ``document[key]`` replaced by the streamed ``items``, and each list
    at a ``chunked`` path written in batches of records. The rest is encoded once and
    written as views: never copied, never decoded."""
    whole = encode(_with_marks(document, key, chunked))
    found = []
    for number, path in enumerate([(key or "",), *chunked]):
        if number == 0 and key is None:
            continue
        mark = f'"{_MARK}{number}"'.encode()
        at = whole.find(mark)
        if at >= 0:
            values = items if number == 0 else _get(document, path)
            found.append((at, len(mark), len(path), values))
    done = 0
    view = memoryview(whole)
    for at, length, depth, values in sorted(found, key=lambda f: f[0]):
        yield view[done:at]
        yield from _listed(values, depth)
        done = at + length
    yield view[done:]


def _get(document: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        document = document[key]
    return document


def write_stream(
    out: IO[bytes],
    document: dict[str, Any],
    key: str | None,
    items: Iterable[Any],
    chunked: tuple[tuple[str, ...], ...] = (),
) -> None:
    """Write ``document`` with ``document[key]`` replaced by the streamed ``items`` (and the
    lists at the ``chunked`` paths written in batches) to a binary stream (the bytes of a
    big document written on a thread while the next ones are encoded: ``write_behind``)."""
    # a record per item, none kept: nothing for the collector but walks
    with gc_paused(), WriteBehind(out) as behind:
        for chunk in _chunks(document, key, items, chunked):
            behind.put(chunk)
        behind.put(b"\n")


def write_document(
    path: str | Path,
    document: dict[str, Any],
    *,
    stream_key: str | None = None,
    items: Iterable[Any] | Callable[[], Iterable[Any]] = (),
    chunked: tuple[tuple[str, ...], ...] = (),
    what: str = "report",
) -> None:
    """Write a JSON document to ``path`` (parents created), atomically: a reader sees the
    old file or the whole new one (``core.atomic_file``).

    ``items`` (or a function giving them) replace ``document[stream_key]``, streamed.
    ``chunked``: paths of big lists inside the document (a report's property pairs) to
    encode a batch at a time, so that the document never exists as one string (the bytes
    never depend on the batching: :func:`encode`)."""
    path = Path(path)
    make = items if callable(items) else (lambda: items)
    try:
        with atomic_output(path) as out:
            if stream_key is None and not chunked:
                out.write(encode(document) + b"\n")
            else:
                write_stream(out, document, stream_key, make(), chunked)
    except OSError as exc:
        raise ReportError(f"{path}: cannot write {what}: {exc.strerror or exc}") from exc


def print_document(
    document: dict[str, Any], *, stream_key: str | None = None, items: Iterable[Any] = ()
) -> None:
    if stream_key is None:
        sys.stdout.write(dumps(document) + "\n")
    else:
        with gc_paused():
            for chunk in _chunks(document, stream_key, items):
                sys.stdout.write(str(chunk, "utf-8"))
            sys.stdout.write("\n")
    sys.stdout.flush()

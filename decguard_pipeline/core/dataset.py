"""Golden datasets: ``.jsonl`` (one case per line) or ``.json`` (a list of cases).

A case is ``{"id"?, "input", "expected"?, "metadata"?}``; ``input`` is a string or an object,
``expected`` a contract label (an int is read as its string, for score levels). Loading is
strict: any invalid case stops the load with its line (or position) and field; nothing is
skipped. Cases are kept column-wise so a million of them stay small.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.errors import DatasetError
from decguard_pipeline.core.json_limits import nesting_problem
from decguard_pipeline.core.validation import (
    SURROGATE_ESCAPE,
    Strict,
    format_errors,
    loads_strict,
    lone_surrogate,
    strict_scanner,
)

CASE_KEYS = frozenset({"id", "input", "expected", "metadata"})


class Case(Strict):
    """The schema of one case; used to explain a case the fast path rejects. (Pydantic names
    the class in some messages, so it is called what DecGuard calls it.)"""

    id: str = Field(min_length=1)
    input: DecisionInput
    expected: str | None = None
    metadata: dict[str, Any] = {}

    @field_validator("expected", mode="before")
    @classmethod
    def _int_label(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value


@dataclass
class Dataset:
    path: Path
    hash: str  # "sha256:<hex>" of the raw file bytes
    ids: list[str]
    inputs: list[DecisionInput]
    expected: list[str | None]
    metadata: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_labeled(self) -> int:
        return sum(e is not None for e in self.expected)


def _fast_case(item: Any) -> tuple[str | None, DecisionInput, str | None, dict[str, Any]] | None:
    """The case's fields when it is plainly valid, else None (pydantic then explains why)."""
    if type(item) is not dict or not item.keys() <= CASE_KEYS:
        return None
    value = item.get("input")
    if type(value) is not str and type(value) is not dict:
        return None
    case_id = item.get("id")
    if "id" in item and (type(case_id) is not str or not case_id):
        return None
    expected = item.get("expected")
    if expected is not None and type(expected) is not str:
        if type(expected) is not int:
            return None
        expected = str(expected)
    metadata = item.get("metadata", {})
    if type(metadata) is not dict:
        return None
    return case_id, value, expected, metadata


_JSON_SPACE = " \t\n\r"


def _jsonl_items(path: Path, lines: list[str]) -> Iterator[tuple[str, Any]]:
    scan = strict_scanner()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        # the decoder's own scanner on the trimmed line; anything unusual (a syntax error,
        # trailing data, a BOM) goes through the full parse for its exact message
        text = line.strip(_JSON_SPACE)
        deep = nesting_problem(text.encode("utf-8", "surrogatepass"))
        if deep is not None:  # before parsing: the decoder recurses once per level
            raise DatasetError(f"{path}: line {lineno}: invalid JSON: {deep}")
        try:
            item, end = scan(text, 0)
        except (StopIteration, ValueError):
            end = -1
        if end != len(text) or text[:1] == "\ufeff":
            try:
                item = loads_strict(line)
            except ValueError as exc:
                raise DatasetError(f"{path}: line {lineno}: invalid JSON: {exc}") from exc
        yield f"line {lineno}", item


def iter_items(path: Path, text: str, *, what: str = "dataset") -> Iterator[tuple[str, Any]]:
    """``(location, raw item)`` pairs of a ``.jsonl`` or ``.json`` file, parsed lazily.

    Callers that stop at an invalid item must drain the iterator first (:func:`drain`): a
    JSON syntax error anywhere in the file is reported before any item-level problem."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_items(path, text.splitlines())
    if suffix == ".json":
        deep = nesting_problem(text.encode("utf-8", "surrogatepass"), enclosing=1, lines=True)
        if deep is not None:  # each item sits in the file's list
            raise DatasetError(f"{path}: invalid JSON: {deep}")
        try:
            data = loads_strict(text)
        except ValueError as exc:
            raise DatasetError(f"{path}: invalid JSON: {exc}") from exc
        if not isinstance(data, list):
            raise DatasetError(f"{path}: a JSON {what} must be a list of {_ITEM_NAMES[what]}")
        return ((f"{_ITEM_WORDS[what]} {i}", item) for i, item in enumerate(data, start=1))
    raise DatasetError(f"{path}: unsupported {what} format (use .jsonl or .json)")


_ITEM_NAMES = {"dataset": "cases", "production dataset": "records"}
_ITEM_WORDS = {"dataset": "case", "production dataset": "record"}


def drain(items: Iterator[tuple[str, Any]]) -> None:
    """Parse the rest of a file so that a later JSON syntax error is raised first."""
    for _ in items:
        pass


def require_file(path: Path, what: str) -> None:
    """DatasetError unless ``path`` is a regular file: a device (``/dev/zero``, a symbolic
    link to one) never ends, and a dataset read in place (mapped, read again for its
    records) needs a file. OSError propagates."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise DatasetError(f"{path}: cannot read {what}: it is {kind}")


def read_text(path: Path, what: str) -> tuple[bytes, str]:
    try:
        with path.open("rb") as stream:  # checked on the open file: no swap after the check
            mode = os.fstat(stream.fileno()).st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):  # endless (/dev/zero); a pipe is read
                raise DatasetError(f"{path}: cannot read {what}: it is a device, not a file")
            raw = stream.read()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read {what}: {exc.strerror or exc}") from exc
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: {what} is not valid UTF-8") from exc


def load_dataset(path: str | Path, spec: DecisionSpec) -> Dataset:
    """Load and validate every case against ``spec``."""
    with gc_paused():
        return _load(Path(path), spec)


def _load(path: Path, spec: DecisionSpec) -> Dataset:
    raw, text = read_text(path, "dataset")
    items = iter_items(path, text)
    labels = set(spec.labels)
    ids: list[str] = []
    inputs: list[DecisionInput] = []
    expected: list[str | None] = []
    metadata: list[dict[str, Any]] = []
    first_seen: dict[str, str] = {}
    escapes = "\\u" in text and SURROGATE_ESCAPE.search(text) is not None
    for position, (where, item) in enumerate(items, start=1):
        unwritable = lone_surrogate(item) if escapes else None
        if unwritable is not None and unwritable != "id":  # the id: the schema says it
            drain(items)
            raise DatasetError(
                f"{path}: {where}: invalid case:\n  {unwritable}: text with a lone surrogate "
                "(a \\uD800-\\uDFFF escape not part of a pair), which UTF-8 cannot encode"
            )
        fields = None if unwritable == "id" else _fast_case(item)
        if fields is None:
            if isinstance(item, dict) and "id" not in item:
                item = {"id": f"case-{position}", **item}
            try:
                case = Case.model_validate(item)
            except ValidationError as exc:
                drain(items)
                raise DatasetError(f"{path}: {where}: invalid case:\n{format_errors(exc)}") from exc
            fields = (case.id, case.input, case.expected, case.metadata)
        case_id, value, label, meta = fields
        if case_id is None:
            case_id = f"case-{position}"
        if label is not None and label not in labels:
            drain(items)
            raise DatasetError(
                f"{path}: {where}: expected {label!r} is not one of the contract labels "
                f"{list(spec.labels)}"
            )
        if case_id in first_seen:
            drain(items)
            raise DatasetError(
                f"{path}: {where}: duplicate case id {case_id!r} (first at {first_seen[case_id]})"
            )
        first_seen[case_id] = where
        ids.append(case_id)
        inputs.append(value)
        expected.append(label)
        metadata.append(meta)
    if not ids:
        raise DatasetError(f"{path}: dataset contains no cases")
    return Dataset(
        path=path,
        hash="sha256:" + hashlib.sha256(raw).hexdigest(),
        ids=ids,
        inputs=inputs,
        expected=expected,
        metadata=metadata,
    )

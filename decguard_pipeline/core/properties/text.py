"""Text surgery shared by the transformations: which text to edit, sentence boundaries,
whitespace runs and label surface forms. Everything outside the edited spots is kept byte
for byte."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from typing import Any

from decguard_pipeline.core.decision import DecisionInput


class NotApplicable(Exception):
    """The property cannot transform this case; the message is the recorded skip reason."""


def get_text(value: DecisionInput, text_field: str | None) -> str:
    """The text a text property edits: a string input, or ``fuzz.text_field`` of an object."""
    if isinstance(value, str):
        return value
    if text_field is None:
        raise NotApplicable("object input has no text to transform (set fuzz.text_field)")
    text = value.get(text_field)
    if not isinstance(text, str):
        raise NotApplicable(f"input field {text_field!r} is missing or not a string")
    return text


def set_text(value: DecisionInput, text_field: str | None, text: str) -> DecisionInput:
    if isinstance(value, str):
        return text
    assert text_field is not None
    return {**value, text_field: text}  # key order kept: the field stays where it was


# A sentence ends after . ! or ? followed by whitespace; the whitespace is kept as separator.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])(\s+)")


def sentence_parts(text: str) -> list[str]:
    """Sentence, separator, sentence, ... (an odd number of parts)."""
    return _SENTENCE_BREAK.split(text)


def sentence_count(text: str) -> int:
    return len(_SENTENCE_BREAK.split(text)) // 2 + 1


def insert_fragments(text: str, steps: Iterable[Mapping[str, Any]]) -> str:
    """Insert ``text + " "`` before sentence ``at``; ``at == sentence count`` appends
    ``" " + text``. Steps with the same ``at`` keep their order."""
    parts = _SENTENCE_BREAK.split(text)  # sentence, separator, sentence, ...
    n_sentences = len(parts) // 2 + 1
    before: dict[int, list[str]] = {}
    for step in steps:
        before.setdefault(step["at"], []).append(step["text"])
    out: list[str] = []
    for index, part in enumerate(parts):
        if index % 2 == 0:
            out.extend(fragment + " " for fragment in before.get(index // 2, ()))
        out.append(part)
    out.extend(" " + fragment for fragment in before.get(n_sentences, ()))
    return "".join(out)


def insert_into_parts(parts: list[str], ats: Sequence[int], fragments: Sequence[str]) -> str:
    """:func:`insert_fragments` for steps as a transformation makes them (sorted by ``at``,
    each ``at`` a boundary: 0 to the sentence count), given as their ``at`` and ``text``
    values, on a text already split by :func:`sentence_parts` (once for all the samples of
    a case)."""
    n_sentences = len(parts) // 2 + 1
    out: list[str] = []
    appended: list[str] = []
    done = 0
    for at, fragment in zip(ats, fragments, strict=True):
        if at < n_sentences:
            out.extend(parts[done : 2 * at])
            out.append(fragment + " ")
            done = 2 * at
        else:
            appended.append(" " + fragment)
    out.extend(parts[done:])
    out.extend(appended)
    return "".join(out)


_WHITESPACE = re.compile(r"\s+")
# Replacements for an existing run (minus the run's own text) and for the edges.
RUN_VARIANTS = ("  ", "\n", "\t", " \n")
EDGE_VARIANTS = {"start": (" ", "\n"), "end": (" ", "\n", "  \n")}


def whitespace_runs(text: str) -> list[str]:
    return _WHITESPACE.findall(text)


def replace_whitespace(text: str, steps: Iterable[Mapping[str, Any]]) -> str:
    """Replace whitespace run ``at`` (0-based) by ``ws``; ``"start"``/``"end"`` prepend/append."""
    edits: dict[int | str, str] = {step["at"]: step["ws"] for step in steps}
    pieces: list[str] = []
    position = 0
    for index, match in enumerate(_WHITESPACE.finditer(text)):
        pieces.append(text[position : match.start()])
        pieces.append(edits.get(index, match.group()))
        position = match.end()
    pieces.append(text[position:])
    return edits.get("start", "") + "".join(pieces) + edits.get("end", "")


_SPLIT_RUNS = re.compile(r"(\s+)")


def whitespace_pieces(text: str) -> list[str]:
    """The text cut at its whitespace runs: text, run, text, ..., text (run ``i`` is piece
    ``2i + 1``; the runs ``replace_whitespace`` numbers)."""
    return _SPLIT_RUNS.split(text)


def piece_bounds(pieces: list[str]) -> list[int]:
    """Where each piece of :func:`whitespace_pieces` ends: run ``i`` spans
    ``bounds[2i]:bounds[2i + 1]`` of the text."""
    return list(accumulate(map(len, pieces)))


def replace_at_bounds(
    text: str, bounds: list[int], ats: Sequence[int | str], spaces: Sequence[str]
) -> str:
    """:func:`replace_whitespace` for steps as a transformation makes them (each target once,
    in ``whitespace_order``), given as their ``at`` and ``ws`` values, with the runs found
    once (:func:`piece_bounds`) for all the samples of a case: only the replaced runs are
    visited."""
    out: list[str] = []
    position = 0
    end = ""
    for at, space in zip(ats, spaces, strict=True):
        if at == "start":
            out.append(space)
        elif at == "end":
            end = space
        else:
            out.append(text[position : bounds[2 * at]])  # type: ignore[operator]
            out.append(space)
            position = bounds[2 * at + 1]  # type: ignore[operator]
    out.append(text[position:])
    out.append(end)
    return "".join(out)


def whitespace_order(step: Mapping[str, Any]) -> tuple[int, int]:
    """Sort key of whitespace steps: start, runs in text order, end."""
    at = step["at"]
    if at == "start":
        return (0, 0)
    if at == "end":
        return (2, 0)
    return (1, at)


def format_label(label: str, style: str, index: int) -> str:
    """``label`` (at canonical position ``index``) written in ``style``."""
    if style == "upper":
        return label.upper()
    if style == "lower":
        return label.lower()
    if style == "capitalized":
        return label[:1].upper() + label[1:]
    if style == "lettered":
        marker = chr(ord("A") + index) if index < 26 else str(index + 1)
        return f"{marker}) {label}"
    if style == "numbered":
        return f"{index + 1}. {label}"
    if style == "quoted":
        return f'"{label}"'
    if style == "bracketed":
        return f"[{label}]"
    raise ValueError(f"unknown label style {style!r}")

"""From a language model's answer to a probability per option: the four ways, as pure
functions of the parsed JSON (no I/O), each raising InvalidResponse for an answer it cannot
read. Options are indexed in the order shown; letters follow that order.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from decguard_pipeline.core.errors import InvalidResponse

# A log-probability is at most 0. Servers compute them in float32, where log-softmax of the
# most likely token can come out a few ulps above 0; beyond this, the value is no probability.
LOGPROB_TOLERANCE = 1e-4


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _above_zero(value: float, field: str) -> InvalidResponse | None:
    if value > LOGPROB_TOLERANCE:
        return InvalidResponse(f"{field} is {value!r}, above 0: not a log-probability")
    return None


def softmax(scores: Sequence[float]) -> list[float]:
    """exp(s) normalised, computed from the largest score down (no overflow)."""
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    total = math.fsum(weights)
    return [w / total for w in weights]


# -- logprobs: the first generated token's top_logprobs ---------------------------------


def first_token_alternatives(body: Any) -> list[Any]:
    """``choices[0].logprobs.content[0].top_logprobs`` of a chat completion."""
    try:
        content = body["choices"][0]["logprobs"]["content"]
        alternatives = content[0]["top_logprobs"]
    except (KeyError, IndexError, TypeError) as exc:
        raise InvalidResponse("answer has no top_logprobs for its first token") from exc
    if not isinstance(alternatives, list):
        raise InvalidResponse("top_logprobs is not a list")
    return alternatives


@functools.cache
def _letter_index(letters: str) -> dict[str, int]:
    return {letter: i for i, letter in enumerate(letters)}


def _letter_masses(alternatives: list[Any], letters: str) -> tuple[float, list[float]]:
    """``(top, mass)``: the largest letter log-probability among the alternatives and each
    letter's probability relative to it (Σ exp(logprob − top) over its tokens, 0 if absent).
    A token counts for a letter when it equals it after stripping whitespace
    (case-sensitive); a ``null`` logprob (how some servers write -inf) counts for nothing."""
    index = _letter_index(letters)
    found: dict[int, list[float]] = {}
    for position, alternative in enumerate(alternatives):
        token = alternative.get("token") if type(alternative) is dict else None
        logprob = alternative.get("logprob") if token is not None else None
        if type(token) is not str or (logprob is not None and not _number(logprob)):
            raise InvalidResponse("a top_logprobs entry lacks a token or a numeric logprob")
        if logprob is None:
            continue
        if not logprob < math.inf:  # NaN or +inf: not a log-probability
            raise InvalidResponse(f"a top_logprobs entry has logprob {logprob!r}")
        field = f"choices[0].logprobs.content[0].top_logprobs[{position}].logprob"
        positive = _above_zero(logprob, field)
        if positive is not None:
            raise positive
        i = index.get(token.strip())
        if i is not None and logprob > -math.inf:
            found.setdefault(i, []).append(float(logprob))
    if not found:
        raise InvalidResponse(f"no option letter ({', '.join(letters)}) among top_logprobs")
    top = max(max(lps) for lps in found.values())
    mass = [math.fsum(math.exp(lp - top) for lp in found.get(i, ())) for i in range(len(letters))]
    return top, mass


def letter_scores(alternatives: list[Any], letters: str) -> tuple[list[float], list[float | None]]:
    """``(distribution, log-probabilities)``: the softmax over the letters' log-probabilities
    among the alternatives (several tokens of one letter, ``A`` and `` A``, add their
    probabilities; a letter absent gets 0), and each letter's own log-probability (None when
    absent): the logits a calibrator is fitted on (``core/calibration/logits.py``)."""
    top, mass = _letter_masses(alternatives, letters)
    total = math.fsum(mass)
    logprobs = [top + math.log(m) if m > 0.0 else None for m in mass]
    return [m / total for m in mass], logprobs


# -- completion_logprobs: each option's own tokens, echoed with the prompt --------------------


def continuation_scores(
    body: Any, prompts: Sequence[str], context_chars: int, normalize: str
) -> list[float]:
    """One score per prompt: the sum (or per-token mean) of the log-probabilities of the
    tokens that start inside the option's span ``[context_chars, len(prompt))`` (in the
    server's count of characters: :func:`offset_shift`). A token starting before belongs to
    the context; one at or after the end was generated."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or len(choices) != len(prompts):
        got = len(choices) if isinstance(choices, list) else 0
        raise InvalidResponse(f"expected {len(prompts)} choices (one per option), got {got}")
    by_index: dict[int, Any] = {}
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise InvalidResponse("a choice is not an object")
        i = choice.get("index", position)
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(prompts):
            raise InvalidResponse(f"choice index {i!r} is not an option's")
        if i in by_index:
            raise InvalidResponse(f"choice index {i} answered twice")
        by_index[i] = choice
    scores = []
    for i, prompt in enumerate(prompts):
        shift = offset_shift(by_index[i], prompt)
        scores.append(
            _option_score(by_index[i], i, context_chars + shift, len(prompt) + shift, normalize)
        )
    return scores


# characters a tokenizer may put before the text it echoes: SentencePiece's dummy prefix
# (llama-cpp-python echoes "Route …" as tokens " Route", … and counts text_offset in them)
MAX_PREFIX_CHARS = 3


def offset_shift(choice: Any, prompt: str) -> int:
    """How far the choice's ``text_offset`` counts ahead of ``prompt``'s characters: 0 when
    its tokens spell the prompt from their start; ``k`` when they spell it after ``k``
    characters the tokenizer added (SentencePiece's leading space), so that the option's
    span is looked for where the server counted it."""
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        return 0
    spelled = "".join(tokens)
    if spelled.startswith(prompt):
        return 0
    for k in range(1, MAX_PREFIX_CHARS + 1):
        if spelled[k:].startswith(prompt):
            return k
    return 0


def _option_score(
    choice: dict[str, Any], index: int, start: int, end: int, normalize: str
) -> float:
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        raise InvalidResponse("a choice has no logprobs (does the server support echo?)")
    values, offsets = logprobs.get("token_logprobs"), logprobs.get("text_offset")
    if not isinstance(values, list) or not isinstance(offsets, list):
        raise InvalidResponse("logprobs lack token_logprobs or text_offset")
    if len(values) != len(offsets):
        raise InvalidResponse("token_logprobs and text_offset differ in length")
    own = []
    for position, (value, offset) in enumerate(zip(values, offsets, strict=True)):
        if not _number(offset):
            raise InvalidResponse(f"text_offset {offset!r} is not a number")
        if start <= offset < end:
            if not _number(value) or not math.isfinite(value):
                raise InvalidResponse(f"an option token has logprob {value!r}")
            field = f"logprobs.token_logprobs[{position}] of choice {index}"
            positive = _above_zero(value, field)
            if positive is not None:
                raise positive
            own.append(float(value))
    if not own:
        raise InvalidResponse("no token of the option found through text_offset")
    total = math.fsum(own)
    return total / len(own) if normalize == "mean" else total


# -- structured: the choice (and a stated confidence) from a JSON answer -----------------------


def message_content(body: Any, index: int = 0) -> str:
    try:
        content = body["choices"][index]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise InvalidResponse("answer has no message content") from exc
    if not isinstance(content, str):
        raise InvalidResponse("message content is not text")
    return content


def structured_distribution(content: str, shown: Sequence[str], verbalized: bool) -> list[float]:
    """One-hot on the chosen option; with a stated confidence c, the choice gets c and the
    other options share 1 - c equally."""
    try:
        answer = json.loads(content)
    except ValueError as exc:
        raise InvalidResponse("structured answer is not JSON") from exc
    if not isinstance(answer, dict):
        raise InvalidResponse("structured answer is not an object")
    choice = answer.get("choice")
    if not isinstance(choice, str) or choice not in shown:
        raise InvalidResponse(f"choice {str(choice)[:80]!r} is not one of the options shown")
    chosen = list(shown).index(choice)
    if not verbalized:
        return [1.0 if i == chosen else 0.0 for i in range(len(shown))]
    confidence = answer.get("confidence")
    if not _number(confidence) or not 0.0 <= confidence <= 1.0:
        raise InvalidResponse(f"confidence {confidence!r} is not a number in [0, 1]")
    rest = (1.0 - float(confidence)) / (len(shown) - 1)
    return [float(confidence) if i == chosen else rest for i in range(len(shown))]


def choice_schema(shown: Sequence[str], verbalized: bool) -> dict[str, Any]:
    """The strict JSON schema of a structured answer."""
    properties: dict[str, Any] = {"choice": {"type": "string", "enum": list(shown)}}
    if verbalized:
        properties["confidence"] = {"type": "number", "minimum": 0, "maximum": 1}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# -- sample: answer frequencies ----------------------------------------------------------------

_LETTER_ANSWER = re.compile(r"\s*[(\[]?([A-Z])(?![A-Za-z0-9])")


def answered_letter(content: str, letters: str) -> int | None:
    """The option an answer names: its first non-space character is the letter, optionally
    bracketed (``A``, `` B``, ``(C)``, ``D.``, ``E) sales``); None otherwise."""
    match = _LETTER_ANSWER.match(content)
    if match is None:
        return None
    position = letters.find(match.group(1))
    return position if position >= 0 else None


def frequencies(counts: Sequence[int], smoothing: float) -> list[float]:
    """Answer frequencies with additive smoothing: (count + s) / (total + s × options)."""
    total = sum(counts) + smoothing * len(counts)
    return [(count + smoothing) / total for count in counts]

"""Prompts for language-model deciders: a template, the case and the options as shown.

Placeholders: ``{input}`` (a string input as is; an object as its canonical JSON, exactly the
text the mock backend matches), ``{options}`` (one ``A) label`` line per option, lettered in
the order shown), ``{labels}`` (the shown labels, comma-separated), ``{decision}`` (the
decision's description, else its name). Any other ``{word}`` is a contract error (a typo
would otherwise reach the model verbatim); other braces are literal text. Substitution is
one pass, so an input containing ``{options}`` is sent as written.
"""

from __future__ import annotations

import re
import string

from decguard_pipeline.backends.mock import input_text
from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput

LETTERS = string.ascii_uppercase
PLACEHOLDERS = frozenset({"input", "options", "labels", "decision"})
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

_CASE = "{decision}\n\nInput:\n{input}\n\n"
# chat methods that read a letter: logprobs and sample
LETTER_PROMPT = _CASE + "Options:\n{options}\n\nAnswer with the letter of the correct option only."
STRUCTURED_PROMPT = _CASE + "Options:\n{options}\n\nChoose the correct option."
STRUCTURED_CONFIDENCE = (
    _CASE
    + "Options:\n{options}\n\nChoose the correct option and give the probability, from 0 to 1,"
    " that your choice is correct."
)
# log-likelihood methods (completion_logprobs, openjev): each option continues the context
CONTINUATION_PROMPT = _CASE + "Options: {labels}\nAnswer:"


def check_template(template: str) -> str:
    """The template, or ValueError naming placeholders that do not exist."""
    unknown = sorted({m for m in _PLACEHOLDER.findall(template) if m not in PLACEHOLDERS})
    if unknown:
        raise ValueError(
            f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; "
            f"use {{input}}, {{options}}, {{labels}} or {{decision}}"
        )
    return template


def letters_for(labels: tuple[str, ...]) -> str:
    if len(labels) > len(LETTERS):
        raise ValueError(f"at most {len(LETTERS)} options can be lettered, got {len(labels)}")
    return LETTERS[: len(labels)]


def lettered(labels: tuple[str, ...]) -> str:
    return "\n".join(f"{letter}) {label}" for letter, label in zip(LETTERS, labels, strict=False))


def decision_text(spec: DecisionSpec) -> str:
    return spec.description or spec.name


def render(template: str, spec: DecisionSpec, value: DecisionInput) -> str:
    """The prompt for one case; ``spec.labels`` are the labels as shown, in order."""
    values = {
        "input": input_text(value),
        "options": lettered(spec.labels),
        "labels": ", ".join(spec.labels),
        "decision": decision_text(spec),
    }
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)

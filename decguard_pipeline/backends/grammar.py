"""The GBNF grammar of a structured answer, for llama.cpp's servers (``grammar``).

A grammar constrains what the model may write token by token, so it must admit exactly the
answers the scoring reads: ``{"choice": <one of the options shown, as a JSON string>}`` and,
with a stated confidence, ``"confidence": <a number in [0, 1]>`` — written ``0``, ``1``,
``0.`` and up to six digits, or ``1.`` and up to six zeros. No sign, no exponent, no leading
zeros: a model held to a bare JSON ``number`` may write ``-0E541`` (which parses to ``-0.0``)
or ``1e-400``; this grammar cannot produce them. Whitespace between tokens is bounded (at
most two characters) so a model cannot spend its answer on blanks.

Only plain GBNF is used (literals, character classes, alternation, ``?`` groups), no
``{m,n}`` repetition, so older servers parse it too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

MAX_DIGITS = 6  # decimals of a stated confidence
MAX_BLANKS = 2  # whitespace characters between two tokens


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal (``"`` and ``\\`` escaped, as GBNF reads them)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _up_to(item: str, n: int) -> str:
    """``item`` zero to ``n`` times, as nested optional groups (``(x (x)?)?``)."""
    body = ""
    for _ in range(n):
        body = f"({item}{' ' + body if body else ''})?"
    return body


def decision_grammar(shown: Sequence[str], verbalized: bool) -> str:
    """The grammar of a structured answer over the options ``shown`` (JSON-encoded as the
    answer must write them), with a bounded confidence when ``verbalized``."""
    choices = " | ".join(gbnf_literal(json.dumps(label, ensure_ascii=False)) for label in shown)
    root = f'root ::= "{{" ws {gbnf_literal(json.dumps("choice"))} ws ":" ws choice'
    if verbalized:
        key = gbnf_literal(json.dumps("confidence"))
        root += f' ws "," ws {key} ws ":" ws confidence'
    lines = [root + ' ws "}"', f"choice ::= {choices}"]
    if verbalized:
        digits = "[0-9] " + _up_to("[0-9]", MAX_DIGITS - 1)
        zeros = '"0" ' + _up_to('"0"', MAX_DIGITS - 1)
        lines.append(f'confidence ::= "0" ("." {digits})? | "1" ("." {zeros})?')
    blank = r"[ \t\n]"  # GBNF's own escapes: space, tab, newline
    lines.append(f"ws ::= {_up_to(blank, MAX_BLANKS)}")
    return "\n".join(lines) + "\n"

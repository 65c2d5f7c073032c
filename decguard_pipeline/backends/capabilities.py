"""What an OpenAI-compatible server was found to accept, learned from its first refusal and
kept for the backend (every later case asks the accepted shape at once), with a note of
each fallback for the run's metadata.

Servers differ in exactly the parameters the scoring methods need: llama-cpp-python's server
takes one prompt per ``/completions`` request (a list fails an assertion: HTTP 500) and a
``response_format`` of ``text`` or ``json_object`` with a ``schema`` (``json_schema`` fails
validation: 500), plus its own GBNF ``grammar``; llama.cpp's and Ollama's ignore or refuse
``n``. Nothing is assumed from the server's name: the first refusal decides.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

# structured output, most portable first: OpenAI's strict JSON schema; the json_object mode
# with a schema (llama.cpp's servers, Anyscale); llama.cpp's GBNF grammar
STRUCTURED_FORMATS = ("json_schema", "json_object", "grammar")
# with a stated confidence the grammar comes before json_object: llama.cpp turns the schema's
# number into a grammar that does not bound it (a real llama-cpp-python server's model wrote
# "confidence": -8E4297937 under it), while ours admits only numbers in [0, 1]
VERBALIZED_FORMATS = ("json_schema", "grammar", "json_object")
FORMAT_SHAPES = {
    "json_schema": "response_format json_schema",
    "json_object": "response_format json_object with a schema",
    "grammar": "a GBNF grammar",
}


@dataclass
class Capabilities:
    """Learned once per backend (thread-safe: the first answer wins)."""

    prompt_lists: bool | None = None  # several prompts in one /completions request
    structured_format: str | None = None  # one of STRUCTURED_FORMATS
    n: bool | None = None  # several samples in one chat request
    notes: dict[str, str] = field(default_factory=dict)  # what fell back, and why
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def learn(self, name: str, value: Any, note: str | None = None) -> None:
        with self.lock:
            if getattr(self, name) is None:
                setattr(self, name, value)
                if note is not None:
                    self.notes[name] = note

    def fallbacks(self) -> list[str]:
        with self.lock:
            return [self.notes[name] for name in sorted(self.notes)]

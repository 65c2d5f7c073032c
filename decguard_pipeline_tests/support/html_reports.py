"""A contract and golden set whose report has every kind of case an HTML page must show:
correct answers, a mismatch, errors (a real decguard.http/0.1 server on loopback fails them),
low-confidence and unlabeled cases, and hostile text in an input, in metadata and in a label.

    server = loopback(MIXED_MODEL, labels=LABELS)
    contract = write_mixed(tmp_path, server)
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

# markup that would run or load something if it reached the page unescaped
HOSTILE_INPUT = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
HOSTILE_META = "</script><script>window.__pwned=3</script>"
HOSTILE_LABEL = "<img src=y onerror=window.__pwned=4>"
LABELS = ("refund", "reject", "review", HOSTILE_LABEL)


def _p(refund: float, reject: float, review: float, hostile: float = 0.0) -> dict[str, float]:
    return {"refund": refund, "reject": reject, "review": review, HOSTILE_LABEL: hostile}


MIXED_MODEL: dict[str, Any] = {
    "rules": [
        {"contains": "damaged", "probabilities": _p(0.96, 0.01, 0.03)},
        {"contains": "changed my mind", "probabilities": _p(0.05, 0.85, 0.10)},
        {"contains": "unsure", "probabilities": _p(0.30, 0.20, 0.45, 0.05)},
    ],
    "default": _p(0.20, 0.10, 0.65, 0.05),
}

CASES: list[dict[str, Any]] = [
    {"id": "c1", "input": "The blender arrived damaged.", "expected": "refund"},
    {"id": "c2", "input": "I changed my mind about the jacket.", "expected": "reject"},
    # the model answers refund (first rule): a confident mismatch
    {"id": "c3", "input": "I changed my mind, it is not damaged.", "expected": "reject"},
    {"id": "c4", "input": "I am unsure what to do.", "expected": "review"},  # 0.45
    {"id": "garbage-5", "input": "anything", "expected": "refund"},  # invalid JSON: error
    {"id": "c6-status=400", "input": "anything else", "expected": "review"},  # HTTP 400: error
    {
        "id": "x7",
        "input": HOSTILE_INPUT,
        "expected": "review",  # default answer: review at 0.65, correct but low confidence
        "metadata": {"note": HOSTILE_META, "locale": "en"},
    },
    {"id": "c8", "input": "Just saying thanks."},  # unlabeled, review at 0.65
    {"id": "c9", "input": "Tell me something.", "expected": HOSTILE_LABEL},  # mismatch, low
]
# what the case filters of the page must count (confidence threshold 0.8)
COUNTS = {"all": 9, "mismatches": 2, "errors": 2, "low confidence": 4}


def write_mixed(directory: Path, server: Any, *, properties: bool = False) -> Path:
    """The contract (http backend on the loopback ``server``) and its dataset; the path of
    the contract."""
    directory.mkdir(parents=True, exist_ok=True)
    dataset = directory / "cases.jsonl"
    dataset.write_text("".join(json.dumps(case) + "\n" for case in CASES), encoding="utf-8")
    contract: dict[str, Any] = {
        "schema_version": "0.1",
        "decision": {"name": "mixed", "type": "choice", "options": list(LABELS)},
        "backend": {
            "provider": "http",
            "model": "loopback-v1",
            "url": server.url,
            "health_url": server.health_url,
        },
        "dataset": "cases.jsonl",
        "evaluation": {"confidence_threshold": 0.8},
        "requirements": {"min_accuracy": 0.5, "max_error_rate": 0.5},
        "warnings": {"max_ece": 0.1},
    }
    if properties:
        contract["properties"] = {"whitespace": {"max_tv_distance": 0.02}}
    path = directory / "decguard.json"
    path.write_text(json.dumps(contract, indent=2), encoding="utf-8")
    return path


class PageParts(HTMLParser):
    """Everything a test checks in a page: every tag with its attributes, the text of each
    ``<script>``, the JSON blocks by id, and the visible text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.text: list[str] = []
        self._script: dict[str, str | None] | None = None
        self._script_text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._script, self._script_text = dict(attrs), []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._script is not None:
            if tag == "script":
                self.scripts.append((self._script, "".join(self._script_text)))
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script_text.append(data)
        else:
            self.text.append(data)

    def blocks(self) -> dict[str, Any]:
        """The JSON data blocks, parsed, by element id."""
        return {
            str(attrs["id"]): json.loads(body)
            for attrs, body in self.scripts
            if attrs.get("type") == "application/json"
        }

    def plain(self) -> str:
        """The visible text (scripts and styles aside), whitespace collapsed."""
        return " ".join(" ".join(self.text).split())

    def attr(self, tag: str, name: str) -> list[str | None]:
        return [attrs.get(name) for t, attrs in self.tags if t == tag and name in attrs]


def visible_rows(table: dict[str, Any], label: str) -> int:
    """How many rows the page's filter ``label`` shows (the flags test the script applies)."""
    (mask,) = [f["mask"] for f in table["filters"] if f["label"].startswith(label)]
    return sum((flag & mask) == mask for flag in table["flags"])

"""The page around a report: head with the inline CSS and script, the verdict banner, the
section cards, the footer; and the atomic write to disk.

The Content-Security-Policy allows only the page's own script (by its hash), inline styles and
``data:`` images; every other load (scripts, frames, fetches, fonts, images from anywhere) is
refused by the browser, so even text that slipped through unescaped could neither run nor
reach the network.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from decguard_pipeline.core.atomic_file import atomic_output
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.html.blocks import reasons, tally
from decguard_pipeline.core.html.markup import Html, el, join
from decguard_pipeline.core.product import PRODUCER_VERSION

STATUS_WORDS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}


@cache
def asset(name: str) -> str:
    return (
        resources.files("decguard_pipeline.core.html")
        .joinpath("assets", name)
        .read_text(encoding="utf-8")
    )


def _csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
    )


def status_class(status: Any) -> str:
    return f"st-{status}" if status in STATUS_WORDS else "st-unknown"


@dataclass
class Section:
    anchor: str
    title: str
    body: Html
    note: str = ""


@dataclass
class Page:
    """One report page: the heading, the verdict, the section cards and the data blocks."""

    kind: str  # "DecGuard report · test", shown above the title
    title: str
    subtitle: str
    status: str
    headline: str  # the verdict in words
    tally: str = ""  # "16 of 18 gates hold"
    reasons: list[Html] = field(default_factory=list)  # failing/warning gates, one per line
    also: list[Html] = field(default_factory=list)  # secondary verdicts (extension gates)
    facts: list[tuple[str, Any]] = field(default_factory=list)  # what was evaluated
    sections: list[Section] = field(default_factory=list)
    blocks: list[Html] = field(default_factory=list)  # JSON data blocks for the tables
    source: str = ""  # the file the page was made from

    @classmethod
    def judged(
        cls,
        doc: dict[str, Any],
        verdicts: Mapping[str, str],
        *,
        kind: str,
        subtitle: str,
        facts: list[tuple[str, Any]],
        source: str = "",
    ) -> Page:
        """The page of a judged document (a report, a diff): titled by its contract, its
        verdict told in ``verdicts``' words, its checks tallied and the failing ones named."""
        status, checks = doc["status"], doc["checks"]
        return cls(
            kind=kind,
            title=doc["contract"]["name"],
            subtitle=subtitle,
            status=status,
            headline=verdicts.get(status, status),
            tally=tally(checks),
            reasons=reasons(checks),
            facts=facts,
            source=source,
        )

    def render(self) -> str:
        script = asset("page.js")
        word = STATUS_WORDS.get(self.status, str(self.status).upper())
        head = join(
            [
                Html('<meta charset="utf-8">'),
                el("meta", http_equiv="Content-Security-Policy", content=_csp(script)),
                el("meta", name="viewport", content="width=device-width, initial-scale=1"),
                el("meta", name="generator", content=f"decguard-pipeline {PRODUCER_VERSION}"),
                el("title", f"{word} · {self.title} · {self.kind}"),
                el("style", Html(asset("page.css"))),
            ]
        )
        body = join(
            [
                el(
                    "header",
                    el(
                        "div",
                        el("div", self.kind, class_="kind"),
                        el("h1", self.title),
                        el("div", self.subtitle, class_="sub"),
                        class_="wrap",
                    ),
                    class_="top",
                ),
                self._verdict(word),
                self._nav(),
                el("main", el("div", [self._card(s) for s in self.sections], class_="wrap")),
                el("footer", el("div", self._footer(), class_="wrap")),
                self.blocks,
                el("script", Html(script)),
            ]
        )
        return (
            "<!DOCTYPE html>\n" + el("html", el("head", head), el("body", body), lang="en") + "\n"
        )

    def _verdict(self, word: str) -> Html:
        badge = el(
            "div",
            el("div", word, class_="word"),
            el("div", "verdict", class_="small"),
            class_="badge",
            data_verdict=self.status,
        )
        why = el(
            "div",
            el("p", self.headline, class_="headline"),
            el("p", self.tally, class_="tally") if self.tally else None,
            el("ul", [el("li", r) for r in self.reasons]) if self.reasons else None,
            [el("div", a, class_="also") for a in self.also],
            class_="why",
        )
        facts = el("dl", [[el("dt", k), el("dd", v)] for k, v in self.facts], class_="facts")
        return el(
            "section",
            el("div", badge, why, facts, class_="wrap"),
            class_=f"verdict {status_class(self.status)}",
            id="verdict",
        )

    def _nav(self) -> Html:
        links = [el("a", s.title, href=f"#{s.anchor}") for s in self.sections]
        return el("nav", el("div", links, class_="wrap"), class_="sections")

    @staticmethod
    def _card(section: Section) -> Html:
        title = el(
            "h2",
            section.title,
            " ",
            el("span", section.note, class_="note") if section.note else None,
        )
        return el("section", title, section.body, class_="card", id=section.anchor)

    def _footer(self) -> Html:
        made = f"Made by decguard-pipeline {PRODUCER_VERSION}"
        source = f" from {self.source}" if self.source else ""
        return el(
            "p",
            made + source + ". Self-contained: this file loads nothing from the"
            " network. Numbers are shown to 4 significant digits; the JSON report holds"
            " the exact values.",
        )


def write_html(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (``core.atomic_file``): a reader sees the old
    file or the whole new one, never a part."""
    path = Path(path)
    try:
        with atomic_output(path) as out:
            out.write(text.encode("utf-8"))
    except OSError as exc:
        raise ReportError(f"{path}: cannot write HTML report: {exc.strerror or exc}") from exc
    return path

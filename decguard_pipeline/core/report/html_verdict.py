"""The report page's banner when the pipeline's verdict judges the run (``core.verdict``):
DecGuard's gates are then one part of it, and the page must not say PASS while the run tag,
the scoreboard and ``evaluate`` say FAIL.

The badge and the page's title take the pipeline's verdict; the headline is
``Pipeline verdict: FAIL — regression vs default@v1 (max_mean_tv_distance) → diff`` (the
arrow links the regression diff's page when there is one); under it DecGuard's own verdict
over its gates with their tally, then every gate that does not hold, named ``<suite>.<gate>``,
with its message.
"""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.html.blocks import MAX_REASONS, tally
from decguard_pipeline.core.html.markup import Html, el
from decguard_pipeline.core.html.page import STATUS_WORDS, Page
from decguard_pipeline.core.verdict import WARN, Verdict

HEADLINE = "Pipeline verdict: "


def headline(verdict: Verdict, diff_href: str | None) -> Html:
    """The banner's headline, with the link to the diff's page."""
    link = None if diff_href is None else [" → ", el("a", "diff", href=diff_href)]
    return el("span", HEADLINE + verdict.headline(), link, data_pipeline_verdict=verdict.status)


def reasons(verdict: Verdict) -> list[Html]:
    """Every gate not holding, failing ones first, one line each."""
    out = [
        el(
            "span",
            el("span", gate.name, class_="gate"),
            f" — {gate.message or gate.text()}",
            " (warning)" if gate.status == WARN else "",
        )
        for gate in verdict.gates[:MAX_REASONS]
    ]
    if len(verdict.gates) > MAX_REASONS:
        more = len(verdict.gates) - MAX_REASONS
        out.append(el("span", f"and {more} more (see the gates)", class_="muted"))
    return out


def judge(page: Page, doc: dict[str, Any], verdict: Verdict, diff_href: str | None) -> None:
    """Make ``page`` (built on DecGuard's verdict) show the pipeline's verdict."""
    decguard = STATUS_WORDS.get(doc["status"], str(doc["status"]).upper())
    page.status = verdict.status
    page.headline = headline(verdict, diff_href)
    page.tally = f"DecGuard's gates: {decguard} — {tally(doc['checks'])}"
    page.reasons = reasons(verdict)

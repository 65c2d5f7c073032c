"""Write ``cases.jsonl``: support tickets to route to billing, technical or sales.

Each ticket is one or two sentences carrying a topic's keywords (the evidence the demo LLM
server reads, ``decguard_pipeline/demo/llm_server.py``) between a greeting and a sign-off
that carry none. A ``clear`` ticket speaks of one topic, an ``ambiguous`` one of two. The
expected label is *drawn* from ``belief(ticket, labels, "tickets-calibrated")``: of the
tickets on which that model says 0.8, about 80% carry its top label, so it is calibrated by
construction and the other demo models (over-confident, under-confident, one-hot) are not.

    .venv/bin/python data/contracts/tickets/make_cases.py   # rewrites cases.jsonl (same seed,
                                                            # same bytes)
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from decguard_pipeline.demo.llm_server import belief, evidence

LABELS = ("billing", "technical", "sales")
CASES = 300
SEED = 20260115
AMBIGUOUS_SHARE = 0.4

# one keyword of its topic per sentence, no keyword of another (checked below)
SENTENCES: dict[str, tuple[str, ...]] = {
    "billing": (
        "I was charged twice this month.",
        "Can you resend the invoice for March?",
        "I still have not received my refund.",
        "My payment did not go through.",
        "Where can I download the receipt?",
        "The subscription fee went up without notice.",
    ),
    "technical": (
        "The app shows an error when I open it.",
        "It keeps freezing and then it crashes.",
        "I cannot login since yesterday.",
        "The reset password link does not work.",
        "There seems to be a bug in the export.",
        "The install fails halfway.",
        "Everything is very slow today.",
    ),
    "sales": (
        "What is the pricing for a team of ten?",
        "Could you send me a quote?",
        "Is there a discount for nonprofits?",
        "We would like to book a demo.",
        "How do I upgrade to the business plan?",
        "Do you offer a site licence?",
        "We need more seats for new hires.",
    ),
}
OPENINGS = ("Hello,", "Hi there,", "Good morning,", "Hi team,", "")
CLOSINGS = ("Thanks.", "Thank you in advance.", "Best regards, Sam", "Cheers, Alex", "")


def ticket(rng: random.Random, topics: list[tuple[str, int]]) -> str:
    """A ticket with ``count`` different sentences of each ``(topic, count)``, shuffled."""
    sentences = [s for topic, count in topics for s in rng.sample(SENTENCES[topic], count)]
    rng.shuffle(sentences)
    parts = [rng.choice(OPENINGS), *sentences, rng.choice(CLOSINGS)]
    return " ".join(p for p in parts if p)


def make_cases(seed: int = SEED, n: int = CASES) -> list[dict[str, object]]:
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        ambiguous = rng.random() < AMBIGUOUS_SHARE
        if ambiguous:
            first, second = rng.sample(LABELS, 2)
            topics = [(first, rng.choice((1, 1, 2))), (second, 1)]
        else:
            topics = [(rng.choice(LABELS), rng.choice((1, 1, 2)))]
        text = ticket(rng, topics)
        hits = evidence(text)
        assert hits == {t: dict(topics).get(t, 0) for t in LABELS}, (text, hits)
        label = rng.choices(LABELS, weights=belief(text, list(LABELS)))[0]
        cases.append(
            {
                "id": f"t{i + 1:03d}",
                "input": text,
                "expected": label,
                "metadata": {"difficulty": "ambiguous" if ambiguous else "clear"},
            }
        )
    return cases


OUT = Path(__file__).with_name("cases.jsonl")


def main(out: Path = OUT) -> None:
    lines = [json.dumps(case, ensure_ascii=False) for case in make_cases()]
    out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} cases written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()

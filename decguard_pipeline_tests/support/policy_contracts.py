"""Contracts shared by the policy and SDK tests: the routing rules and an http-backend contract
served on loopback."""

from __future__ import annotations

HTTP_CONTRACT = """
    schema_version: "0.1"
    decision: {name: refund_request, type: choice, options: [refund, reject, review]}
    backend: {provider: http, url: "URL", health_url: "HEALTH", timeout_s: 5}
    backends:
      strong: {provider: mock, default: {refund: 0.98, reject: 0.01, review: 0.01}}
    policy:
      routes:
        - {when: {confidence_gte: 0.95}, action: accept}
        - {when: {confidence_gte: 0.75}, action: fallback, backend: strong}
        - {action: human_review}
"""


RULES = {
    "rules": [{"contains": "damaged", "probabilities": {"refund": 0.96, "reject": 0.01,
                                                       "review": 0.03}}],
    "default": {"refund": 0.2, "reject": 0.15, "review": 0.65},
}  # fmt: skip

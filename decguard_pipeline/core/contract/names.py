"""The metamorphic properties' names, in DecGuard's order. Free of pydantic: the typed
records of a stored report's pairs name them (``core.properties.typed_section``)."""

from __future__ import annotations

from typing import Literal, get_args

PropertyName = Literal[
    "option_order",
    "label_format",
    "irrelevant_context",
    "repeated_context",
    "whitespace",
    "paraphrase",
    "inversion",
    "monotonic",
]
PROPERTY_NAMES: tuple[PropertyName, ...] = get_args(PropertyName)  # DecGuard's order

"""The metamorphic properties' names, in DecGuard's order, and what their settings share with
the structs that read them without pydantic. Free of pydantic: the typed records of a stored
report's pairs name them (``core.properties.typed_section``), and ``report`` checks a stored
report's settings with those structs (``core.contract.settings_structs``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, get_args

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

LabelStyle = Literal["upper", "lower", "capitalized", "lettered", "numbered", "quoted", "bracketed"]
LABEL_STYLES: tuple[LabelStyle, ...] = get_args(LabelStyle)
DEFAULT_FRAGMENTS: tuple[str, ...] = (
    "The weather was mild that day.",
    "This note was written on a Tuesday.",
    "The office is on the third floor.",
    "The meeting room has a large window.",
    "There is a small plant on the desk.",
    "The train was on time this morning.",
    "The corridor lights were repainted last year.",
    "A colleague brought biscuits to share.",
)
# Per-case limits of the distribution-based properties, in the order violations are listed.
TOLERANCE_KEYS = ("max_tv_distance", "max_js_divergence", "max_abs_delta", "max_confidence_delta")


def set_tolerances(settings: Any) -> dict[str, float]:
    """The per-case limits ``settings`` (of a distribution-based property) sets, in violation
    order."""
    return {k: v for k in TOLERANCE_KEYS if (v := getattr(settings, k)) is not None}


def enabled_settings(properties: Any) -> dict[str, Any]:
    """The enabled properties' settings of ``properties``, in the fixed property order."""
    found: dict[str, Any] = {}
    for name in PROPERTY_NAMES:
        config = getattr(properties, name)
        if config is not None and config.enabled:
            found[name] = config
    return found


def missing_limit(settings: Any) -> str | None:
    """Why a distribution-based property's ``settings`` would judge nothing, or None."""
    if settings.max_flip_rate is None and not settings.tolerances():
        return f"set at least one of {', '.join(TOLERANCE_KEYS)} or max_flip_rate"
    return None


def untrimmed_aliases(aliases: dict[str, Any]) -> str | None:
    """Why ``label_format``'s ``aliases`` are refused (an empty or untrimmed form), or None."""
    for label, forms in aliases.items():
        if not forms or any(not form or form != form.strip() for form in forms):
            return f"aliases for {label!r} must be non-empty, trimmed strings"
    return None


def set_gates(gates: Any, names: Iterable[str]) -> dict[str, float]:
    """The gates of ``gates`` that are set, in the order of ``names`` (its fields)."""
    return {name: value for name in names if isinstance(value := getattr(gates, name), float)}

"""Small shared types for contract sections."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegative = Annotated[float, Field(ge=0.0)]
BrierRange = Annotated[float, Field(ge=0.0, le=2.0)]
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Level = Literal["requirement", "warning"]

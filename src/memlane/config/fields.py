"""What every part's settings share: the model's rules, and the ranges knobs take.

A setting is declared as `name: Type = default` with its description in the
docstring below it (pydantic reads those: `use_attribute_docstrings`); the
README's configuration table is generated from them. A range a setting's
type cannot say on its own is a named type here, or an `Annotated` of its own.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
)

__all__ = [
    "Fraction",
    "NonNegativeFloat",
    "NonNegativeInt",
    "PositiveFloat",
    "PositiveInt",
    "ProperFraction",
    "SettingsPart",
]

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
"""A share or a weight, from 0 to 1 inclusive."""

ProperFraction = Annotated[float, Field(gt=0.0, lt=1.0)]
"""A share strictly between 0 and 1 (neither none nor all of it)."""


class SettingsPart(BaseModel):
    """One part's settings: frozen, no unknown names, described by attribute docstrings."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

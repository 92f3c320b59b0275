"""Settings owned by the governance part of memlane."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class GovernanceSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

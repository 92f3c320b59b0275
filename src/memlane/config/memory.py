"""Settings owned by the memory part of memlane."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class MemorySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

"""Settings owned by the sessions part of memlane."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SessionsSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

"""Settings owned by the proxy part of memlane."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ProxySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

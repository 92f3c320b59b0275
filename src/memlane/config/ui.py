"""Settings owned by the web inspector (`/ui`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class UISettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ui_enabled: bool = Field(
        default=True,
        description="Serve the web inspector at /ui (sessions, timelines, memories, overview); "
        "it asks for the admin token like /v1/memlane/.",
    )

"""Settings owned by the web inspector (`/ui`)."""

from __future__ import annotations

from memlane.config.fields import SettingsPart


class UISettings(SettingsPart):
    ui_enabled: bool = True
    """Serve the web inspector at /ui (sessions, timelines, memories, overview); it asks for the
    admin token like /v1/memlane/."""

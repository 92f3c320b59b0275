"""The one frozen Settings object, composed from each part's own fields.

Each part of memlane declares its knobs in its own module (`core`, `proxy`,
`governance`, `memory`, `sessions`); `Settings` is their union, flat, so every
field has one environment name: `MEMLANE_<FIELD>`.
"""

from __future__ import annotations

from pathlib import Path

from memlane.config.core import CoreSettings, is_loopback
from memlane.config.governance import GovernanceSettings
from memlane.config.memory import MemorySettings
from memlane.config.proxy import ProxySettings
from memlane.config.sessions import SessionsSettings
from memlane.config.tools import ToolsSettings
from memlane.config.ui import UISettings


class Settings(
    CoreSettings,
    ProxySettings,
    GovernanceSettings,
    MemorySettings,
    SessionsSettings,
    ToolsSettings,
    UISettings,
):
    @property
    def dense_retrieval(self) -> bool:
        """Whether recall embeds queries and entries. `auto`: only with an embeddings
        endpoint, because the packaged model costs milliseconds in front of every request
        and measured below context-expanded keyword search on held-out data (README)."""
        if self.memory_dense == "auto":
            return self.embedding_backend == "openai"
        return self.memory_dense == "on"

    @property
    def credential_tenancy(self) -> bool:
        """Whether data belongs to the credential a request carries. `auto`: whenever the
        proxy listens beyond this machine, where callers are not one person."""
        if self.tenancy == "auto":
            return not is_loopback(self.host)
        return self.tenancy == "credential"

    @property
    def home_path(self) -> Path:
        return self.home.expanduser()

    @property
    def database_path(self) -> Path:
        return self.home_path / "memlane.db"

    @property
    def sessions_path(self) -> Path:
        return self.home_path / "sessions"

    @property
    def memory_path(self) -> Path:
        return self.home_path / "memory"

"""Count `os.fsync` calls while the real ones still run: what a write made durable."""

from __future__ import annotations

import os

import pytest


def counted_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The file descriptors `os.fsync` is called with from now on (in this test)."""
    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced

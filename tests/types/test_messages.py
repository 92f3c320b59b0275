"""`Message`: the fingerprint a resent message is recognised by."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from memlane.types import Message, ToolCall


def test_a_message_is_fingerprinted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    digests: list[bytes] = []
    real = hashlib.sha256

    def counted(data: bytes) -> hashlib._Hash:
        digests.append(data)
        return real(data)

    monkeypatch.setattr(hashlib, "sha256", counted)
    message = Message("user", "hello")
    first = message.fingerprint()
    assert message.fingerprint() == first
    assert len(digests) == 1


def test_a_changed_copy_is_fingerprinted_anew() -> None:
    message = Message("assistant", "calling", tool_calls=(ToolCall("c1", "read", "{}"),))
    taken = message.fingerprint()
    assert message.with_text("other").fingerprint() != taken
    assert replace(message, tool_calls=(ToolCall("c1", "read", '{"a":1}'),)).fingerprint() != taken
    assert replace(message, raw={"role": "assistant"}).fingerprint() == taken  # the wire item
    # the remembered fingerprint is not part of what a message is
    fresh = Message("assistant", "calling", tool_calls=(ToolCall("c1", "read", "{}"),))
    assert fresh == message
    assert hash(fresh) == hash(message)
    assert "_fingerprint" not in repr(message)

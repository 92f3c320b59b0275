"""Wire formats the proxy speaks, one module each, behind the `WireAdapter` protocol."""

from __future__ import annotations

from memlane.proxy.wire.anthropic import MessagesAdapter
from memlane.proxy.wire.base import ParsedRequest, StreamAssembler, WireAdapter, WireError
from memlane.proxy.wire.chat import ChatAdapter
from memlane.proxy.wire.responses import ResponsesAdapter

CHAT = ChatAdapter()
RESPONSES = ResponsesAdapter()
MESSAGES = MessagesAdapter()

__all__ = [
    "CHAT",
    "MESSAGES",
    "RESPONSES",
    "ChatAdapter",
    "MessagesAdapter",
    "ParsedRequest",
    "ResponsesAdapter",
    "StreamAssembler",
    "WireAdapter",
    "WireError",
]

"""Wire formats the proxy speaks, one module each, behind the `WireAdapter` protocol."""

from __future__ import annotations

from memlane.proxy.wire.base import ParsedRequest, StreamAssembler, WireAdapter, WireError
from memlane.proxy.wire.chat import ChatAdapter
from memlane.proxy.wire.responses import ResponsesAdapter

CHAT = ChatAdapter()
RESPONSES = ResponsesAdapter()

__all__ = [
    "CHAT",
    "RESPONSES",
    "ChatAdapter",
    "ParsedRequest",
    "ResponsesAdapter",
    "StreamAssembler",
    "WireAdapter",
    "WireError",
]

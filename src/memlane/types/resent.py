"""Wire items a client sends again, parsed once.

An agent resends its whole conversation with every request, and the proxy parsed each
item of it into a `Message` again: at 700 items that was about 40% of the event loop's
work on such a request (a frozen `Message` takes microseconds to build, a few thousand
times over). So a long request's items are kept beside the messages they parsed into, for
the next request that starts the same way (its first two items parse to the same
messages). Each of that request's items equal (`==`) to the kept item at the same place
takes the kept messages, up to the first item that differs; the rest are parsed.

Parsing reads nothing but the item, so an equal item parses to equal messages: what a
request gets is what parsing it would give, the same fields, with the kept item (equal to
the one sent) as their `raw`. Kept per scope (a tenant's requests never find another's)
for the latest `MEMO_REQUESTS` starts, `MEMO_BYTES` of request bodies in all; `forget`
drops everything, as a deleted session's words leave this process's other memos.

    reuse = Resend(RESENT, scope=tenant, size=len(body_bytes))
    messages = reuse.parse(body["messages"], parse_item)  # parse_item(item, index)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memlane.types.messages import Message

MIN_ITEMS = 16
"""Shorter requests are parsed whole: they parse in microseconds, and are not kept."""
MEMO_REQUESTS = 256
"""Request starts kept (about one a session in flight: a session's next request replaces
its last)."""
MEMO_BYTES = 64 << 20
"""Request bodies kept, in bytes of their JSON; a larger body alone is not kept."""

ParseItem = Callable[[Any, int], Sequence[Message]]
"""One wire item (and its index, for errors) as the messages it holds, in order."""


def parse_all(items: Sequence[Any], parse_item: ParseItem) -> list[Message]:
    """Every item parsed anew."""
    return [m for index, item in enumerate(items) for m in parse_item(item, index)]


@dataclass(frozen=True, slots=True)
class _Kept:
    items: list[Any]
    parsed: list[Sequence[Message]]
    size: int


class ResentItems:
    """Requests' items and what they parsed into, by scope and first two items."""

    def __init__(self, *, requests: int = MEMO_REQUESTS, max_bytes: int = MEMO_BYTES) -> None:
        self.requests = requests
        self.max_bytes = max_bytes
        self._kept: OrderedDict[tuple[str, tuple[str, ...]], _Kept] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def parse(
        self, items: Sequence[Any], parse_item: ParseItem, scope: str, size: int
    ) -> list[Message]:
        """`items` parsed, reusing a kept request's messages for its leading equal items."""
        if len(items) < 2:  # nothing to be found by
            return parse_all(items, parse_item)
        parsed = [parse_item(items[0], 0), parse_item(items[1], 1)]
        key = (scope, tuple(m.fingerprint() for part in parsed for m in part))
        with self._lock:
            kept = self._kept.get(key)
        kept_items: list[Any] = [items[0], items[1]]
        if kept is not None:
            last = min(len(kept.items), len(items))
            index = 2
            while index < last and items[index] == kept.items[index]:
                kept_items.append(kept.items[index])  # not the copy sent: one fewer held
                parsed.append(kept.parsed[index])
                index += 1
        for index in range(len(parsed), len(items)):
            kept_items.append(items[index])
            parsed.append(parse_item(items[index], index))
        self._keep(key, _Kept(kept_items, parsed, size))
        return [message for part in parsed for message in part]

    def forget(self) -> None:
        """Drop every kept request."""
        with self._lock:
            self._kept.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    def _keep(self, key: tuple[str, tuple[str, ...]], kept: _Kept) -> None:
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._bytes -= old.size
            if kept.size > self.max_bytes:
                return
            self._kept[key] = kept
            self._bytes += kept.size
            while len(self._kept) > self.requests or self._bytes > self.max_bytes:
                _, dropped = self._kept.popitem(last=False)
                self._bytes -= dropped.size


RESENT = ResentItems()
"""The process's kept requests (the proxy's parses use it)."""


def forget_resent() -> None:
    """Drop every kept request and the words it holds (a session was deleted)."""
    RESENT.forget()


@dataclass(frozen=True, slots=True)
class Resend:
    """How one request's items are parsed: through `memo` under the request's `scope` (its
    tenant), its body `size` bytes; with no memo, each item anew."""

    memo: ResentItems | None = None
    scope: str = ""
    size: int = 0

    def parse(self, items: Sequence[Any], parse_item: ParseItem) -> list[Message]:
        if self.memo is None or len(items) < MIN_ITEMS:
            return parse_all(items, parse_item)
        return self.memo.parse(items, parse_item, self.scope, self.size)


FRESH = Resend()
"""Every item parsed anew (tests, one-off parses, `count_tokens`)."""

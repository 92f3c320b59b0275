"""memlane's own LLM calls made the way the client request that caused them was made.

A turn's fact extraction, running summary and session index are memlane's own calls,
made in the background after the response. By default they go where the turn's request
went: the same upstream, the same API (Anthropic Messages for Claude Code, OpenAI chat
completions for Codex and the SDKs) and the same credential, so a user who only has
Claude Code (an Anthropic key, no OpenAI upstream) gets facts with nothing configured.
The proxy names the route of each request (`REQUEST_ROUTE`, with its credential beside it
in `REQUEST_KEY`, in memory only); background work inherits both from the request that
queued it. A call with no route (the CLI, the library, work that outlived its request's
process) takes the configured client. Which model each call names is the caller's
choice (`engine.runtime`: the configured one, else the request's).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Unpack

from memlane.text.llm import LLM, REQUEST_ROUTE, CallOptions, Completion, LLMRoute


class RequestRoutedLLM:
    """The `LLM` whose calls follow the current request's route (`REQUEST_ROUTE`), else
    `fallback`. One client per route, made on first use by `make` (they are cheap, and
    share the pool of open connections)."""

    def __init__(self, fallback: LLM, make: Callable[[LLMRoute], LLM]) -> None:
        self.fallback = fallback
        self._make = make
        self._clients: dict[LLMRoute, LLM] = {}

    def for_route(self, route: LLMRoute | None) -> LLM:
        """The client a call on `route` uses (None: the configured one)."""
        if route is None:
            return self.fallback
        found = self._clients.get(route)
        if found is None:
            found = self._clients[route] = self._make(route)
        return found

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], **options: Unpack[CallOptions]
    ) -> Completion:
        return await self.for_route(REQUEST_ROUTE.get()).complete(messages, **options)


@contextlib.contextmanager
def following(route: LLMRoute | None) -> Iterator[None]:
    """Calls made inside take `route` when no live request names one: work kept with the
    route of the request that caused it, run after that request is gone (without its
    credential, which was never kept: the key configured for that upstream is used)."""
    if route is None or REQUEST_ROUTE.get() is not None:
        yield
        return
    token = REQUEST_ROUTE.set(route)
    try:
        yield
    finally:
        REQUEST_ROUTE.reset(token)

"""memlane's proxy served on loopback in front of the scripted upstream: `proxy`, `proxy_factory`.

- `proxy` — a `RunningProxy`: memlane's app served by uvicorn on 127.0.0.1 (port 0)
  with a temporary home, the hashing embedder and the real tokenizer, forwarding to
  `upstream`. `.url` (`…/v1`), `.base` (no `/v1`), `.runtime`, `.store`, `.settings`,
  `.admin` (the admin API's headers), `.drain()` waits for its background work,
  `.settled()` for the answers it has relayed to be stored (`.store` waits for them);
  `.call(coro_fn)` runs a coroutine on the proxy's event loop (e.g. an engine function
  that needs the running loop).
- `proxy_factory` — `proxy_factory(**settings)` starts another proxy with settings
  overrides (e.g. `admin_token="t"`, `spec_mode=True`, `upstream_timeout=1.0`), or
  `proxy_factory(runtime=rt)` with your own `Runtime` (a scripted LLM, another store).
  Every proxy it started is stopped at the end of the test.
- `closing(client)` — an SDK client (`openai.OpenAI`, …) closed when the test ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import uvicorn

from tests.support.loopback import Served, serve

if TYPE_CHECKING:
    from tests.support.upstream import ScriptedUpstream


T = TypeVar("T")
SDK_CLIENTS: list[Any] = []
"""Clients a test made, closed after it."""


def closing(client: T) -> T:
    """`client`, closed when the test ends: a pooled socket left for the garbage collector
    warns (an error under this suite's settings) in whichever later test it is collected."""
    SDK_CLIENTS.append(client)
    return client


@pytest.fixture(autouse=True)
def _close_sdk_clients() -> Iterator[None]:
    yield
    while SDK_CLIENTS:
        SDK_CLIENTS.pop().close()


@dataclass
class RunningProxy:
    """memlane's proxy served on loopback in a background thread."""

    url: str
    base: str
    runtime: Any
    settings: Any
    served: Served

    @property
    def store(self) -> Any:
        """The proxy's store, once the answers it has relayed are stored (it stores an
        answer just after its client has it)."""
        self.settled()
        return self.runtime.store

    def settled(self) -> None:
        """Wait until every answer the proxy has relayed is stored (from the test's thread:
        on the proxy's own loop, in `call`, there is nothing to wait for)."""
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is self.loop:
                return
        if self.loop.is_running():
            self.call(self.runtime.writes.settled)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.served.loop

    @property
    def admin(self) -> dict[str, str]:
        """The headers memlane's admin API requires (its configured or generated token)."""
        from memlane.files import admin_token

        token = self.settings.admin_token
        value = (
            admin_token.check(token.get_secret_value())
            if token is not None and token.get_secret_value()
            else admin_token.read(self.settings.home_path)
        )
        return {"authorization": f"Bearer {value}"}

    def call(self, fn: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
        """Run `fn()` on the proxy's event loop and return its result."""

        async def run() -> Any:
            return await fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def drain(self, timeout: float = 30.0) -> None:
        """Wait until the proxy's background work (ingest, indexing…) is done."""

        async def drain() -> None:
            async with asyncio.timeout(timeout):
                await self.runtime.settle()

        self.call(drain, timeout + 5)

    def stop(self) -> None:
        self.served.stop(timeout=15)


def start_proxy(settings: Any, runtime: Any = None) -> RunningProxy:
    """Serve memlane's app for `settings` on 127.0.0.1 (a free port) until `.stop()`."""
    from memlane.engine.runtime import Runtime
    from memlane.proxy.app import create_app
    from memlane.store import open_store

    if runtime is None:
        runtime = Runtime(settings, open_store(settings))
    app = create_app(runtime.settings, runtime=runtime)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, access_log=False)
    served = serve(config, name="memlane-proxy")
    base = f"http://127.0.0.1:{served.port}"
    return RunningProxy(
        url=f"{base}/v1", base=base, runtime=runtime, settings=runtime.settings, served=served
    )


ProxyFactory = Callable[..., RunningProxy]


@pytest.fixture
def proxy_factory(upstream: ScriptedUpstream, tmp_path: Path) -> Iterator[ProxyFactory]:
    from memlane.config import Settings

    started: list[RunningProxy] = []

    def make(*, runtime: Any = None, **overrides: Any) -> RunningProxy:
        if runtime is None:
            values: dict[str, Any] = {
                "home": tmp_path / f"home{len(started)}",
                "upstream_url": upstream.url,
                "upstream_timeout": 10.0,
                "embedding_backend": "hashing",
                "recall_deadline_ms": 30_000,  # the deadline has its own test
            }
            values.update(overrides)
            settings = Settings(**values)
            settings.home_path.mkdir(parents=True, exist_ok=True)
            running = start_proxy(settings)
        else:
            running = start_proxy(runtime.settings, runtime)
        started.append(running)
        return running

    yield make
    for running in started:
        running.stop()
        with contextlib.suppress(Exception):
            running.runtime.close()


@pytest.fixture
def proxy(proxy_factory: ProxyFactory) -> RunningProxy:
    return proxy_factory()

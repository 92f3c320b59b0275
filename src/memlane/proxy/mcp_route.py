"""The MCP server as streamable HTTP at `/mcp` on the proxy's app.

Same trust rules as the admin API: every request needs the admin token
(`Authorization: Bearer …`) or, under credential tenancy, the client's own key,
and DNS-rebinding protection is on twice over: the app's `Guard` (Host, Origin,
JSON bodies) runs first, then the SDK's own check with the same Host and Origin
allow-lists. A connection with a client's key is bound to that key's tenant; the
admin token's works on the data of no tenant (what `tenancy = none` made).

A connection's namespace comes from the request's headers, read like a model
request's: `X-Memlane-Repo` (or its fallbacks), else the namespace of the session
`X-Memlane-Session` names; without either the connection sees only global memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import Context
from typing import TYPE_CHECKING, Any

from starlette.types import Message, Receive, Scope, Send

from memlane.config import Settings
from memlane.config.core import LOOPBACK_NAMES
from memlane.engine import threads
from memlane.engine.runtime import Runtime
from memlane.engine.tenancy import NO_TENANT
from memlane.proxy import headers as h
from memlane.proxy.errors import ProxyError, send_json, stopped
from memlane.proxy.guard import WILDCARD_BINDS
from memlane.proxy.identity import bounded, header_text
from memlane.proxy.state import Access
from memlane.views.tools import Binding

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger(__name__)

PATH = "/mcp"


AccessOf = Callable[[Mapping[str, str]], Access | None]


def binding_from_headers(
    settings: Settings, access_of: AccessOf
) -> Callable[[Mapping[str, str] | None], Binding]:
    """`bind(headers)` for HTTP connections (a missing namespace is taken from the caller's
    session by `views.tools.binding.with_session`)."""

    def bind(headers: Mapping[str, str] | None) -> Binding:
        headers = headers or {}
        access = access_of(headers)
        if access is None:  # `MCPRoute` refused it before the SDK saw it; never widen
            raise PermissionError("an MCP call without a credential")

        def first(names: tuple[str, ...]) -> str | None:
            for name in names:
                value = headers.get(name)
                if value and value.strip():
                    return bounded(header_text(value).strip())
            return None

        key = first((h.SESSION, *h.SESSION_FALLBACKS))
        return Binding(
            namespace=first((h.REPO, *h.REPO_FALLBACKS)),
            session_key=key,
            all_namespaces=settings.mcp_all_namespaces,
            via="mcp",
            tenant=access.tenant or NO_TENANT,
        )

    return bind


def transport_security(settings: Settings) -> Any:
    """The SDK's Host/Origin check, with the allow-lists `Guard` uses."""
    from mcp.server.transport_security import TransportSecuritySettings

    bind = settings.host.lower()
    if "*" in settings.allowed_hosts or bind in WILDCARD_BINDS:
        # Guard accepts any Host here (any, or any literal address): a list cannot say
        # that, so Guard alone decides.
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = {*LOOPBACK_NAMES, bind, *(n.lower() for n in settings.allowed_hosts)}
    hosts = [f"[{n}]" if ":" in n else n for n in sorted(names)]
    allowed_hosts = [*hosts, *(f"{n}:*" for n in hosts)]
    origins = [f"{scheme}://{host}" for scheme in ("http", "https") for host in allowed_hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=[*origins, *settings.allowed_origins],
    )


class MCPRoute:
    """The ASGI endpoint at `/mcp`: the token check, then the SDK's session manager.

    The manager is built on the first request, not at start: importing the SDK and
    building its server were about a third of `memlane serve`'s start-up, paid by every
    proxy whether or not an MCP client ever connects. Its `run()` holds a task group
    that must be entered and left in one task, so a task of its own (`_host`) holds it
    from the first request until the app stops (`running`).
    """

    def __init__(
        self,
        settings: Settings,
        runtime_of: Callable[[], Runtime],
        access_of: AccessOf,
    ) -> None:
        self.settings = settings
        self.access_of = access_of
        self.runtime_of = runtime_of
        self._manager: asyncio.Future[StreamableHTTPSessionManager] | None = None
        self._host: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The app's lifespan: a manager a request started runs until the app stops (its
        sessions' streams ended); the next lifespan builds a new one when asked."""
        self._manager, self._host, self._stop = None, None, asyncio.Event()
        try:
            yield
        finally:
            self._stop.set()
            if self._host is not None:
                await self._host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._authorized(scope):
            await _refuse(send)
            return
        try:
            manager = await self._started()
        except ProxyError as exc:  # a request that came as the app stops
            await exc.response(scope["path"])(scope, receive, send)
            return
        # as the admin API: a tool reads what a client of the proxy was answered, and an
        # answer is stored just after its client has it
        await self.runtime_of().writes.settled()
        if scope["method"] == "GET":  # the server's event stream, open until it ends
            await self._event_stream(manager, scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)

    async def _started(self) -> StreamableHTTPSessionManager:
        """The running session manager, started by the first request that needs it."""
        if self._manager is None:
            if self._stop.is_set():
                raise stopped()
            self._manager = asyncio.get_running_loop().create_future()
            # a context of its own: the manager's tasks outlive the request that started it
            self._host = asyncio.create_task(
                self._hold(self._manager), name="mcp-session-manager", context=Context()
            )
        return await asyncio.shield(self._manager)

    async def _hold(self, ready: asyncio.Future[StreamableHTTPSessionManager]) -> None:
        try:
            manager = await threads.to_thread(self._build)  # the SDK's import off the loop
            async with manager.run():
                ready.set_result(manager)
                await self._stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)  # every request that waits for it fails with it
                return
            log.exception("the MCP server stopped")

    def _build(self) -> StreamableHTTPSessionManager:
        from memlane.mcp.server import build_server

        settings = self.settings
        server = build_server(self.runtime_of, binding_from_headers(settings, self.access_of))
        server.streamable_http_app(
            streamable_http_path=PATH,
            # Several workers serve one port, and a client's next request may reach another
            # one: no MCP session may live in one worker's memory. The tools need none (each
            # request carries its headers, which bind the namespace).
            stateless_http=settings.workers > 1,
            transport_security=transport_security(settings),
            max_request_body_size=settings.max_body_bytes,
        )
        return server.session_manager

    async def _event_stream(
        self, manager: StreamableHTTPSessionManager, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """The SDK's event stream for a session, ended with its last message.

        On a graceful stop the SDK's SSE library ends every open stream (it listens for
        the server's exit signal) but leaves its response unfinished: the client saw a
        broken connection, not an end, and uvicorn logged an error at every stop with an
        MCP client connected. The end is sent here when the SDK did not send it.
        """
        started = ended = False

        async def tracked(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        await manager.handle_request(scope, receive, tracked)
        if started and not ended:
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _authorized(self, scope: Scope) -> bool:
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers", [])
        }
        return self.access_of(headers) is not None


async def _refuse(send: Send) -> None:
    payload = {
        "error": {
            "message": "memlane's MCP server needs Authorization: Bearer <token>: "
            "MEMLANE_ADMIN_TOKEN, or the token in $MEMLANE_HOME/admin_token",
            "type": "authentication_error",
            "param": None,
            "code": "invalid_admin_token",
        }
    }
    await send_json(send, 401, payload, [(b"www-authenticate", b"Bearer")])

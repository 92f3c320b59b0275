"""The ASGI application: OpenAI and Anthropic routes, pass-through, health, the admin API.

`create_app(settings)` opens the store in the lifespan; tests and the server
pass `runtime=` to share one they built (a scripted LLM, a store to inspect).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast, get_args

from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memlane import __version__
from memlane.config import Settings
from memlane.engine import threads
from memlane.engine.memory.lifecycle import start_memory, stop_memory
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle
from memlane.engine.sessions.indexing import startup_warnings
from memlane.files import admin_token
from memlane.proxy import admin, governance_routes, messages, sessions_routes, status
from memlane.proxy.access import AccessLog
from memlane.proxy.body_limit import BodyLimit
from memlane.proxy.errors import ProxyError, install_handlers, stop_handled, stopped
from memlane.proxy.forward import Upstream, UpstreamError, relayed_headers
from memlane.proxy.guard import Guard
from memlane.proxy.state import ProxyState, WorkerInfo, current_state, proxy_state
from memlane.proxy.status import publish_activity
from memlane.proxy.turns import read_body, serve_model
from memlane.proxy.warmup import warm_up
from memlane.proxy.wire import CHAT, RESPONSES
from memlane.text import secret_detectors
from memlane.text.llm import ClientPool
from memlane.text.tokens import EncodingName, get_tokenizer

log = logging.getLogger("memlane.proxy")


def load_tokenizers(rt: Runtime) -> None:
    """The runtime's tokenizer, and with `tokenizer = auto` every encoding a request's model
    may count with (governance picks one per model, on the event loop)."""
    rt.tokenizer  # noqa: B018 (a cached property: loads it)
    if rt.settings.tokenizer == "auto":
        for name in get_args(EncodingName):
            get_tokenizer(name)


def _salt(rt: Runtime) -> bytes:
    return rt.tenant_salt


def admin_routers() -> list[APIRouter]:
    """Routers under /v1/memlane/: each part of memlane adds its own module here."""
    return [admin.router, sessions_routes.router, governance_routes.router, status.router]


def create_app(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    worker: WorkerInfo | None = None,
) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        rt = runtime
        if rt is None:
            from memlane.store import open_store

            rt = Runtime(settings, await asyncio.to_thread(open_store, settings))
        if rt.llm_clients is None:  # memlane's own LLM calls reuse one client, closed below
            rt.llm_clients = ClientPool()
        clients = rt.llm_clients
        # loaded once, never on a request: a new session's title is redacted as its row is
        # written, and a first load of the detectors (0.3–1.4 s) held the store's writer
        await asyncio.to_thread(load_tokenizers, rt)
        await asyncio.to_thread(secret_detectors.load)
        if rt.primary:  # said once, however many workers serve
            for warning in startup_warnings(settings):
                log.warning("%s", warning)
        upstream = Upstream(settings)
        anthropic = Upstream(settings, provider="anthropic")
        configured = settings.admin_token.get_secret_value() if settings.admin_token else None
        token = await asyncio.to_thread(admin_token.ensure, settings.home_path, configured)
        salt = await asyncio.to_thread(_salt, rt) if settings.credential_tenancy else None
        app.state.proxy = ProxyState(
            settings,
            rt,
            upstream,
            admin_token=token,
            anthropic=anthropic,
            tenant_salt=salt,
            worker=worker,
        )
        await start_memory(rt)  # files -> index catch-up (background), optional watcher
        if rt.primary:  # titles stored before they were redacted, once per store
            titles = threads.to_thread(lifecycle.redact_stored_titles, rt.store)
            rt.background.spawn(titles, name="redact-stored-titles")
        rt.background.spawn(warm_up(rt), name="warm-up")  # embedder + vector cache
        if worker is not None:  # what `memlane status` adds up across the workers
            rt.background.start_service(publish_activity(rt, worker), name="worker-activity")
        try:
            async with mcp_running():
                yield
        finally:
            with contextlib.suppress(TimeoutError):  # what is left resumes at the next start
                async with asyncio.timeout(settings.shutdown_drain_seconds):
                    await rt.settle()
            cancelled = await rt.background.cancel_all()  # never under a closing store
            if cancelled:
                log.warning(
                    "stopped %d background job(s) after %g s (MEMLANE_SHUTDOWN_DRAIN_SECONDS); "
                    "the memory work of their turns resumes at the next start",
                    cancelled,
                    settings.shutdown_drain_seconds,
                )
            await stop_memory(rt)  # commits what is queued
            await upstream.aclose()
            await anthropic.aclose()
            await clients.aclose()
            del app.state.proxy
            if runtime is None:
                rt.close()

    app = ProxyApp(
        title="memlane",
        version=__version__,
        description="Memory proxy for OpenAI-compatible and Anthropic clients: stores every "
        "turn, keeps requests inside the model's window, and injects what the model should "
        "remember.",
        lifespan=lifespan,
    )
    install_handlers(app)

    def current_runtime() -> Runtime | None:
        state = getattr(app.state, "proxy", None)
        return state.runtime if isinstance(state, ProxyState) else None

    def live_state() -> ProxyState:
        state = getattr(app.state, "proxy", None)
        if not isinstance(state, ProxyState):
            raise RuntimeError("memlane is starting or stopping")
        return state

    mcp_running = mount_mcp(app, settings, live_state)
    # outermost: refusals touch nothing; then the access line; then the route
    limited = BodyLimit(app.dispatch, settings.max_body_bytes, own_paths=MODEL_ROUTES)
    app.front = Guard(AccessLog(limited, runtime_of=current_runtime), settings=settings)

    @app.get("/health", tags=["proxy"], summary="Liveness")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    for path, (handler, name, summary) in MODEL_ROUTES.items():
        app.add_api_route(
            path, documented(handler, name), methods=["POST"], tags=["proxy"], summary=summary
        )

    @app.get("/v1/models", tags=["proxy"], summary="The upstream's models (passed through)")
    async def models(request: Request, state: ProxyState = Depends(proxy_state)) -> Response:
        return await pass_through(state, request, "models")

    for router in admin_routers():
        app.include_router(router)
    if settings.ui_enabled:
        from memlane.ui import mount

        mount(app)

    @app.api_route("/v1/{path:path}", methods=["GET", "POST", "DELETE"], include_in_schema=False)
    async def other(
        path: str, request: Request, state: ProxyState = Depends(proxy_state)
    ) -> Response:
        if path == "memlane" or path.startswith("memlane/"):
            raise ProxyError(404, f"no memlane route {request.url.path}", type="not_found")
        return await pass_through(state, request, path)

    return app


ModelRoute = Callable[[ProxyState, Request], Awaitable[Response]]


async def chat_completions(state: ProxyState, request: Request) -> Response:
    return await serve_model(state, request, CHAT)


async def responses(state: ProxyState, request: Request) -> Response:
    return await serve_model(state, request, RESPONSES)


MODEL_ROUTES: dict[str, tuple[ModelRoute, str, str]] = {
    "/v1/chat/completions": (
        chat_completions,
        "chat_completions",
        "Chat Completions, through memory",
    ),
    "/v1/responses": (responses, "responses", "Responses, through memory"),
    "/v1/messages": (
        messages.serve_messages,
        "anthropic_messages",
        "Anthropic Messages, through memory",
    ),
    "/v1/messages/count_tokens": (
        messages.count_tokens,
        "anthropic_count_tokens",
        "Anthropic token count (passed through; memlane counts if the upstream cannot)",
    ),
}
"""The routes a client sends all its traffic to (POST): served by `ProxyApp` directly."""


def documented(handler: ModelRoute, name: str) -> Callable[..., Awaitable[Response]]:
    """`handler` as a FastAPI endpoint: what the OpenAPI schema lists (and what serves a
    request that reaches the router all the same)."""

    async def endpoint(request: Request, state: ProxyState = Depends(proxy_state)) -> Response:
        return await handler(state, request)

    endpoint.__name__ = name
    return endpoint


class ProxyApp(FastAPI):
    """FastAPI, with the model routes served without its per-request layers.

    Every HTTP request passes `front` (the Guard, then the access line) first. A model
    request then goes straight to its handler: no route table walk, no dependency
    resolution, no exception middlewares, no wrapper around each streamed chunk; that
    was a third of the CPU the HTTP face spends on a request. Its refusals are
    answered as before (a `ProxyError` in the client's format; anything else a 500),
    and so is one a graceful stop cuts before its answer began (a 503: `stopped`; a
    stream already begun ends with an error event, `proxy.relay`).
    Every other request goes through FastAPI, unchanged.
    """

    front: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.front is None:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        await self.front(scope, receive, send)

    async def dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = MODEL_ROUTES.get(scope["path"]) if scope["method"] == "POST" else None
        if route is None:
            await super().__call__(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = await route[0](current_state(request), request)
        except ProxyError as exc:
            response = exc.response(scope["path"])
        except asyncio.CancelledError:  # a graceful stop's grace ran out (uvicorn cancels)
            stop_handled()
            response = stopped().response(scope["path"])
        await response(scope, receive, send)


def mount_mcp(
    app: FastAPI, settings: Settings, state: Callable[[], ProxyState]
) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    """Serve the MCP server at `/mcp` (unless `mcp_enabled` is off); returns what the
    lifespan enters to run its session manager."""
    if not settings.mcp_enabled:
        return contextlib.nullcontext
    from memlane.proxy.mcp_route import PATH, MCPRoute

    route = MCPRoute(
        settings,
        runtime_of=lambda: state().runtime,
        access_of=lambda headers: state().access(headers),
    )
    # A Route whose endpoint is not a function serves it as a plain ASGI app.
    endpoint = cast(Any, route)
    app.add_route(PATH, endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    return route.running


async def pass_through(state: ProxyState, request: Request, path: str) -> Response:
    """Forward a request memlane has nothing to add to (models, embeddings, …) as it is."""
    body = await read_body(request, state.settings.max_body_bytes)
    url = state.upstream.url("/" + path)
    if request.url.query:
        url += "?" + request.url.query
    try:
        upstream = await state.upstream.send(
            request.method, url, body, state.upstream.headers(request.headers.raw)
        )
    except UpstreamError as exc:
        raise ProxyError(
            502,
            f"the upstream at {state.upstream.base} could not be reached ({exc.reason})",
            type="upstream_error",
            code="upstream_unavailable",
        ) from None
    return Response(
        upstream.content, upstream.status_code, headers=relayed_headers(upstream.headers)
    )

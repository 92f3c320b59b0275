"""The ASGI application: OpenAI and Anthropic routes, pass-through, health, the admin API.

`create_app(settings)` opens the store in the lifespan; tests and the server
pass `runtime=` to share one they built (a scripted LLM, a store to inspect).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, cast, get_args

from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.responses import Response

from memlane import __version__
from memlane.config import Settings
from memlane.engine.memory.lifecycle import start_memory, stop_memory
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.indexing import startup_warnings
from memlane.files import admin_token
from memlane.proxy import admin, governance_routes, messages, sessions_routes, status
from memlane.proxy.access import AccessLog
from memlane.proxy.errors import ProxyError, install_handlers
from memlane.proxy.forward import Upstream, UpstreamError, relayed_headers
from memlane.proxy.guard import Guard
from memlane.proxy.state import ProxyState, WorkerInfo, proxy_state
from memlane.proxy.status import publish_activity
from memlane.proxy.turns import read_body, serve_model
from memlane.proxy.warmup import warm_up
from memlane.proxy.wire import CHAT, RESPONSES
from memlane.text.llm import ClientPool
from memlane.text.tokens import EncodingName, get_tokenizer

log = logging.getLogger("memlane.proxy")

SHUTDOWN_DRAIN_SECONDS = 5.0
"""How long stopping waits for background work (fact extraction, summaries) to finish."""


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
            rt.llm_clients = ClientPool(settings.llm_timeout)
        clients = rt.llm_clients
        await asyncio.to_thread(load_tokenizers, rt)  # load once, never on a request
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
        rt.background.spawn(warm_up(rt), name="warm-up")  # embedder + vector cache
        if worker is not None:  # what `memlane status` adds up across the workers
            rt.background.start_service(publish_activity(rt, worker), name="worker-activity")
        try:
            async with mcp_running():
                yield
        finally:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SHUTDOWN_DRAIN_SECONDS):
                    await rt.background.drain()
            cancelled = await rt.background.cancel_all()  # never under a closing store
            if cancelled:
                log.warning("stopped %d background task(s) still running at shutdown", cancelled)
            await stop_memory(rt)  # commits what is queued
            await upstream.aclose()
            await anthropic.aclose()
            await clients.aclose()
            del app.state.proxy
            if runtime is None:
                rt.close()

    app = FastAPI(
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
    app.add_middleware(AccessLog, runtime_of=current_runtime)
    app.add_middleware(Guard, settings=settings)  # outermost: refusals touch nothing

    @app.get("/health", tags=["proxy"], summary="Liveness")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    @app.post("/v1/chat/completions", tags=["proxy"], summary="Chat Completions, through memory")
    async def chat_completions(
        request: Request, state: ProxyState = Depends(proxy_state)
    ) -> Response:
        return await serve_model(state, request, CHAT)

    @app.post("/v1/responses", tags=["proxy"], summary="Responses, through memory")
    async def responses(request: Request, state: ProxyState = Depends(proxy_state)) -> Response:
        return await serve_model(state, request, RESPONSES)

    @app.post("/v1/messages", tags=["proxy"], summary="Anthropic Messages, through memory")
    async def anthropic_messages(
        request: Request, state: ProxyState = Depends(proxy_state)
    ) -> Response:
        return await messages.serve_messages(state, request)

    @app.post(
        "/v1/messages/count_tokens",
        tags=["proxy"],
        summary="Anthropic token count (passed through; memlane counts if the upstream cannot)",
    )
    async def anthropic_count_tokens(
        request: Request, state: ProxyState = Depends(proxy_state)
    ) -> Response:
        return await messages.count_tokens(state, request)

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

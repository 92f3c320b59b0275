"""What the app holds for its lifetime, and the FastAPI dependencies that hand it to routes.

Routers added by other parts of memlane (sessions, governance, memory) take
`rt: Runtime = Depends(runtime)` and `dependencies=[Depends(require_admin)]`.
The dependencies are `async def`: FastAPI runs a plain `def` dependency in its
thread pool, a thread hop per request for what is an attribute read.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from datetime import datetime

from fastapi import Request

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.proxy.errors import ProxyError
from memlane.proxy.forward import Upstream


@dataclass(frozen=True)
class WorkerInfo:
    """Which of `serve --workers N`'s processes this is."""

    index: int
    """0 is the primary: it does the once-per-home work (`Runtime.primary`)."""
    count: int
    serving_since: datetime
    """When the supervisor started: the proxy's uptime, whichever worker answers."""


@dataclass
class ProxyState:
    settings: Settings
    runtime: Runtime
    upstream: Upstream
    admin_token: str = field(default="", repr=False)
    """What `/v1/memlane/…` requires (configured, or generated into the home)."""
    worker: WorkerInfo | None = None
    """Set in a worker of several; None when one process serves."""
    anthropic: Upstream | None = None
    """The Anthropic upstream (`/v1/messages`)."""

    def upstream_for(self, wire: str) -> Upstream:
        """The upstream a wire format's requests go to (never the other one: keys differ)."""
        if wire != "anthropic":
            return self.upstream
        if self.anthropic is None:
            raise ProxyError(503, "memlane has no Anthropic upstream", type="server_error")
        return self.anthropic


def current_state(request: Request) -> ProxyState:
    state = getattr(request.app.state, "proxy", None)
    if not isinstance(state, ProxyState):
        raise ProxyError(503, "memlane is starting or stopping", type="server_error")
    return state


async def proxy_state(request: Request) -> ProxyState:
    return current_state(request)


async def runtime(request: Request) -> Runtime:
    return current_state(request).runtime


async def require_admin(request: Request) -> None:
    """The admin API always needs `Authorization: Bearer <token>`: the configured
    `MEMLANE_ADMIN_TOKEN`, or the one memlane generated into `$MEMLANE_HOME/admin_token`."""
    expected = current_state(request).admin_token.encode("utf-8")
    sent = request.headers.get("authorization", "")
    scheme, _, value = sent.partition(" ")
    if (
        not expected
        or scheme.lower() != "bearer"
        or not hmac.compare_digest(value.strip().encode(), expected)
    ):
        raise ProxyError(
            401,
            "the memlane admin API needs Authorization: Bearer <token>: MEMLANE_ADMIN_TOKEN, "
            "or the token in $MEMLANE_HOME/admin_token",
            type="authentication_error",
            code="invalid_admin_token",
        )

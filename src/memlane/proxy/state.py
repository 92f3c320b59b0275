"""What the app holds for its lifetime, and the FastAPI dependencies that hand it to routes.

Routers added by other parts of memlane (sessions, governance, memory) take
`rt: Runtime = Depends(runtime)` and `dependencies=[Depends(require_admin)]`; a
route that reads or changes sessions takes `access: Access = Depends(require_admin)`
and keeps to `access.tenant`.
The dependencies are `async def`: FastAPI runs a plain `def` dependency in its
thread pool, a thread hop per request for what is an attribute read.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from fastapi import Request

from memlane.config import Settings
from memlane.engine.runtime import Runtime
from memlane.engine.tenancy import NO_TENANT, OPERATOR, tenant_of
from memlane.proxy.errors import ProxyError
from memlane.proxy.forward import Upstream
from memlane.proxy.identity import credential


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
    tenant_salt: bytes | None = field(default=None, repr=False)
    """Set under credential tenancy: tenant ids are made with it (`engine.tenancy`)."""

    def upstream_for(self, wire: str) -> Upstream:
        """The upstream a wire format's requests go to (never the other one: keys differ)."""
        if wire != "anthropic":
            return self.upstream
        if self.anthropic is None:
            raise ProxyError(503, "memlane has no Anthropic upstream", type="server_error")
        return self.anthropic

    def tenant(self, headers: Mapping[str, str]) -> str:
        """Whose request this is: "" without tenancy, else its credential's tenant; under
        credential tenancy a request without a key is refused (401), never shared."""
        if self.tenant_salt is None:
            return NO_TENANT
        key = credential(headers)
        if key is None:
            raise ProxyError(
                401,
                "memlane keeps each client's sessions and memories apart by its key "
                "(MEMLANE_TENANCY=credential): send Authorization: Bearer <your key> or "
                "x-api-key",
                type="authentication_error",
                code="missing_credential",
            )
        return tenant_of(self.tenant_salt, key)

    def access(self, headers: Mapping[str, str]) -> Access | None:
        """Who may use memlane's own API with these (lower-case) headers: the operator (the
        admin token), under credential tenancy a client with its own key (its tenant), or
        nobody (None)."""
        expected = self.admin_token.encode("utf-8")
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if (
            expected
            and scheme.lower() == "bearer"
            and hmac.compare_digest(value.strip().encode(), expected)
        ):
            return Access(OPERATOR)
        if self.tenant_salt is not None and credential(headers) is not None:
            return Access(self.tenant(headers))
        return None


@dataclass(frozen=True, slots=True)
class Access:
    """Who called an admin route: the operator (`tenant` None: every tenant's sessions),
    or, under credential tenancy, a client with its own key (its tenant's alone)."""

    tenant: str | None


def current_state(request: Request) -> ProxyState:
    state = getattr(request.app.state, "proxy", None)
    if not isinstance(state, ProxyState):
        raise ProxyError(503, "memlane is starting or stopping", type="server_error")
    return state


async def proxy_state(request: Request) -> ProxyState:
    return current_state(request)


async def runtime(request: Request) -> Runtime:
    return current_state(request).runtime


def _bad_token() -> ProxyError:
    return ProxyError(
        401,
        "the memlane admin API needs Authorization: Bearer <token>: MEMLANE_ADMIN_TOKEN, "
        "or the token in $MEMLANE_HOME/admin_token",
        type="authentication_error",
        code="invalid_admin_token",
    )


async def require_admin(request: Request) -> Access:
    """The admin API always needs a credential. `Authorization: Bearer <token>` with the
    configured `MEMLANE_ADMIN_TOKEN` (or the one generated into `$MEMLANE_HOME/admin_token`)
    is the operator; under credential tenancy a client's own key reaches its own tenant."""
    state = current_state(request)
    access = state.access(request.headers)
    if access is None:
        raise _bad_token()
    await state.runtime.writes.settled()  # what a client was answered is readable
    return access


async def require_operator(request: Request) -> None:
    """Routes about the whole proxy (its status, every tenant's counts): the token only."""
    access = current_state(request).access(request.headers)
    if access is None or access.tenant is not OPERATOR:
        raise _bad_token()

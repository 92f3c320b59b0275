"""The session a route's `{ref}` names, found by the one lookup rule of `views.sessions`.

Routes take `session: FoundSession`: FastAPI resolves it (in its thread pool: the
lookup reads the store) before the route runs, answering 404 when nothing matches
and 409, naming the candidates, when several do. Only sessions the caller may reach
take part (`proxy.state.Access`): a client's own tenant, or every tenant for the
operator's token; another tenant's session is a 404 like one that does not exist.
A route that changes or destroys the session takes `session: ExactSession`: its
`{ref}` must name it exactly (no fuzzy match on titles), so a retried DELETE is a
404, not another session's deletion.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from memlane.engine.runtime import Runtime
from memlane.proxy.errors import ProxyError
from memlane.proxy.state import Access, require_admin, runtime
from memlane.types import Session
from memlane.views.sessions import AmbiguousSession, NoSuchSession, find_session


def found_session(rt: Runtime, ref: str, access: Access, *, exact: bool = False) -> Session:
    """The session `ref` names, or the admin API's 404 / 409 error."""
    try:
        return find_session(rt.store, ref, tenant=access.tenant, exact=exact)
    except NoSuchSession as exc:
        raise ProxyError(404, str(exc), type="not_found", code="session_not_found") from None
    except AmbiguousSession as exc:
        raise ProxyError(409, str(exc), code="ambiguous_session") from None


def session_from_path(
    ref: str,
    rt: Annotated[Runtime, Depends(runtime)],
    access: Annotated[Access, Depends(require_admin)],
) -> Session:
    return found_session(rt, ref, access)


def exact_session_from_path(
    ref: str,
    rt: Annotated[Runtime, Depends(runtime)],
    access: Annotated[Access, Depends(require_admin)],
) -> Session:
    return found_session(rt, ref, access, exact=True)


FoundSession = Annotated[Session, Depends(session_from_path)]
ExactSession = Annotated[Session, Depends(exact_session_from_path)]
Caller = Annotated[Access, Depends(require_admin)]

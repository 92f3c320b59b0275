"""`memlane sessions rename REF NAME`: give a session the name `@@name` and lookups find it by.

The session is named like one to delete (`exact=True`: its id, a unique id prefix, its key
or its whole name, never part of a title). The name must be one `@@` reads and free in the
session's namespace (`engine.sessions.naming`); indexing keeps it afterwards.
"""

from __future__ import annotations

from typing import Annotated

import typer

from memlane.cli.context import fail, opened_runtime, report
from memlane.cli.options import JsonOpt


def rename(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="Session id, id prefix, key or whole name.")],
    name: Annotated[str, typer.Argument(help="The new name, e.g. queue-design.")],
    as_json: JsonOpt = False,
) -> None:
    """Rename a session: the name `@@name` and every lookup find it by (unique in its namespace)."""
    from memlane.engine.sessions.lookup import SessionLookupError, find_session, session_name
    from memlane.engine.sessions.naming import NameProblem
    from memlane.engine.sessions.naming import rename as rename_session
    from memlane.engine.tenancy import OPERATOR
    from memlane.store import StoreError
    from memlane.views.sessions import session_json

    with opened_runtime(ctx) as rt:
        try:
            session = find_session(rt.store, ref, tenant=OPERATOR, exact=True)
        except SessionLookupError as exc:
            fail(str(exc))
        try:
            renamed = rename_session(rt.store, rt.settings, session, name)
        except NameProblem as exc:
            fail(str(exc))
        except StoreError as exc:  # deleted meanwhile
            fail(f"the session is not renamed: {exc}")
        data = session_json(rt.store, renamed)
    before = session_name(session)
    was = f" (was {before})" if before else ""
    report(as_json, data, f"renamed {session.id} to {data['name']}{was}")

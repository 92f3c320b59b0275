"""The inspector's session pages: the searchable list, one session's timeline, and its edits.

Edits go through the code paths the CLI and the admin API use: todo and
pinned through the scaffold's state texts (the files the proxy injects from),
fork, export and delete through `engine.sessions.lifecycle`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from memlane.config import Settings
from memlane.engine import scaffold, threads
from memlane.engine.governance.ledger import OutputNotFound, offloaded_output, outputs_folder
from memlane.engine.runtime import Runtime
from memlane.engine.sessions import lifecycle
from memlane.engine.sessions.lifecycle import title_from_prompt
from memlane.engine.tenancy import OPERATOR
from memlane.files.git_purge import PurgeError
from memlane.files.projects import display_name
from memlane.store import StoreError
from memlane.types import Fact, Session
from memlane.ui import timeline
from memlane.ui.paging import page_count, rows_of
from memlane.ui.render import SECURITY_HEADERS, page
from memlane.ui.web import (
    PREFIX,
    PageNumber,
    Rt,
    UIError,
    Who,
    confirm,
    context,
    read_form,
    redirect,
)
from memlane.views.sessions import AmbiguousSession, NoSuchSession, find_session, index_cost

router = APIRouter(prefix=PREFIX, include_in_schema=False)

WINDOW = 100
"""Messages shown at once on a timeline; earlier ones are a link away."""
EVENTS_READ = 2_000
TEXTS = ("todo", "pinned")
"""The session's texts its page edits (`scaffold.set_text`)."""


def display_title(session: Session) -> str:
    """The title a person gave or the first prompt, else the indexed name, else the key."""
    name = session.metadata.get("name")
    return session.title or (name if isinstance(name, str) and name else "") or session.key


def total_cost(session: Session) -> float:
    """The conversation's own cost plus what memlane's index and query calls for it cost."""
    return session.cost_usd + index_cost(session)


def find(rt: Runtime, ref: str, *, exact: bool = False) -> Session:
    """The session `ref` names, by the rule every face uses (id, key, id prefix, name).

    `exact` for an edit or a delete: no fuzzy match on titles, so a form sent twice
    (its session deleted by the first) never reaches another session."""
    try:
        return find_session(rt.store, ref, tenant=OPERATOR, exact=exact)  # the admin's view
    except NoSuchSession as exc:
        raise UIError(404, str(exc)) from None
    except AmbiguousSession as exc:
        raise UIError(409, str(exc)) from None


def project_label(namespace: str) -> str:
    """A project in the filter: its name, with its path when found by its folder (two
    repositories both called `api` stay apart)."""
    name = display_name(namespace)
    return name if name == namespace else f"{name} — {namespace}"


@router.get("/sessions")
async def sessions_page(
    request: Request,
    who: Who,
    rt: Rt,
    q: str = "",
    namespace: str = "",
    page_number: PageNumber = 1,
) -> Response:
    offset, limit = rows_of(page_number)

    def read() -> dict[str, Any]:
        found, total = rt.store.page_sessions(
            query=q,
            namespace=namespace or None,
            offset=offset,
            limit=limit,
        )
        return {
            "sessions": found,
            "total": total,
            "namespaces": rt.store.session_namespaces(),
        }

    values = await threads.to_thread(read)
    pages = page_count(values["total"])
    return page(
        request,
        "sessions.html",
        context(
            request,
            who,
            "sessions",
            q=q,
            namespace=namespace,
            page=page_number,
            pages=pages,
            title_of=display_title,
            cost_of=total_cost,
            project_name=display_name,
            project_label=project_label,
            **values,
        ),
    )


def _timeline(rt: Runtime, session: Session, start: int | None) -> dict[str, Any]:
    store = rt.store
    probe = max(0, session.message_count - 1)
    last = store.list_messages(session.id, since_position=probe, include_superseded=True)
    end = last[-1].position if last else 0
    first = max(0, end - WINDOW + 1) if start is None else max(0, start)
    window = store.list_messages(session.id, since_position=first, include_superseded=True)
    messages = [m for m in window if m.position < first + WINDOW]
    events = store.list_events(session.id, limit=EVENTS_READ)
    if first > 0 and messages:
        events = [e for e in events if e.created_at >= messages[0].created_at]
    if messages and messages[-1].position < end:  # an earlier window: events up to its end
        cut = messages[-1].created_at
        events = [e for e in events if e.created_at <= cut]
    items = timeline.build(messages, events)
    return {
        "items": items,
        "facts": _facts(rt, timeline.recalled_refs(items)),
        "first": first,
        "earlier": first > 0,
        "later": bool(messages) and messages[-1].position < end,
        "after_position": messages[-1].position if messages else -1,
        "after_event": max((e.id for e in events), default=0),
        "texts": scaffold.read_texts(rt, session),
    }


def _facts(rt: Runtime, refs: list[str]) -> dict[str, Fact]:
    found = {ref: rt.store.get_fact(ref) for ref in refs}
    return {ref: fact for ref, fact in found.items() if fact is not None}


@router.get("/sessions/{session_id}")
async def session_page(
    request: Request,
    who: Who,
    rt: Rt,
    session_id: str,
    start: Annotated[int | None, Query(ge=0)] = None,
    cut: Annotated[list[str] | None, Query(max_length=len(TEXTS))] = None,
) -> Response:
    def read() -> dict[str, Any]:
        session = find(rt, session_id)
        return {"session": session, **_timeline(rt, session, start)}

    values = await threads.to_thread(read)
    return page(
        request,
        "session.html",
        context(
            request,
            who,
            "sessions",
            title=display_title(values["session"]),
            cost=total_cost(values["session"]),
            window=WINDOW,
            origins=timeline.ORIGINS,
            notes=cut_notes(rt.settings, cut or []),
            **values,
        ),
    )


@router.get("/sessions/{session_id}/live")
async def session_live(
    request: Request,
    who: Who,
    rt: Rt,
    session_id: str,
    after: Annotated[int, Query(ge=-1)] = -1,
    events_after: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    """What arrived since the page was drawn: new items, then a poller that asks again."""

    def read() -> dict[str, Any]:
        session = find(rt, session_id)
        messages = rt.store.list_messages(
            session.id, since_position=after + 1, include_superseded=True
        )
        events = [e for e in rt.store.list_events(session.id, limit=200) if e.id > events_after]
        items = timeline.build(messages, events)
        return {
            "session": session,
            "items": items,
            "facts": _facts(rt, timeline.recalled_refs(items)),
            "after_position": messages[-1].position if messages else after,
            "after_event": max((e.id for e in events), default=events_after),
        }

    values = await threads.to_thread(read)
    return page(
        request,
        "session_live.html",
        context(
            request,
            who,
            "sessions",
            cost=total_cost(values["session"]),
            origins=timeline.ORIGINS,
            **values,
        ),
    )


@router.post("/sessions/{session_id}/texts")
async def set_texts(request: Request, who: Who, rt: Rt, session_id: str) -> Response:
    """Todo and pinned text, as the scaffold injects them into the session's next request."""
    form = await read_form(request, who)
    texts = {name: form[name].replace("\r\n", "\n") for name in TEXTS if name in form}

    def write() -> None:
        session = find(rt, session_id, exact=True)
        for name, value in texts.items():
            scaffold.set_text(rt, session, name, value)

    await threads.to_thread(write)
    cut = urlencode([("cut", n) for n, v in texts.items() if scaffold.cut_at(rt.settings, n, v)])
    return redirect(f"/ui/sessions/{session_id}" + (f"?{cut}" if cut else "") + "#texts")


def cut_notes(settings: Settings, cut: list[str]) -> list[str]:
    """What the texts form says after a save that cut a text to its limit (as every face
    that sets it does: the API, `memlane chat`, the MCP tool)."""
    notes = []
    for name in dict.fromkeys(n for n in cut if n in TEXTS):
        limit = getattr(settings, scaffold.LIMITS[name])
        notes.append(
            f"The {name} was longer than {limit:,} characters, the most memlane keeps "
            f"({scaffold.LIMITS[name]}): it was cut, and ends in “[… truncated by memlane]”."
        )
    return notes


@router.post("/sessions/{session_id}/title")
async def set_title(request: Request, who: Who, rt: Rt, session_id: str) -> Response:
    form = await read_form(request, who)
    title = title_from_prompt(form.get("title", ""))
    if not title:
        raise UIError(400, "a title needs some text")

    def write() -> None:
        rt.store.update_session(find(rt, session_id, exact=True).id, title=title)

    await threads.to_thread(write)
    return redirect(f"/ui/sessions/{session_id}")


@router.post("/sessions/{session_id}/fork")
async def fork(request: Request, who: Who, rt: Rt, session_id: str) -> Response:
    await read_form(request, who)

    def write() -> Session:
        source = find(rt, session_id)
        stamp = f"{datetime.now(UTC):%Y%m%d%H%M%S%f}"
        key = f"{source.key}~fork-{source.message_count}-{stamp}"
        return lifecycle.fork(rt.store, source, new_key=key)

    try:
        forked = await threads.to_thread(write)
    except StoreError as exc:
        raise UIError(409, str(exc)) from None
    return redirect(f"/ui/sessions/{forked.id}")


@router.get("/sessions/{session_id}/export")
async def export(who: Who, rt: Rt, session_id: str) -> Response:
    def read() -> tuple[Session, str]:
        session = find(rt, session_id)
        lines = lifecycle.export_lines(rt.store, session)
        return session, "".join(line + "\n" for line in lines)

    session, text = await threads.to_thread(read)
    headers = {
        **SECURITY_HEADERS,
        "content-disposition": f'attachment; filename="memlane-session-{session.id}.jsonl"',
    }
    return Response(text, media_type="application/x-ndjson", headers=headers)


@router.get("/sessions/{session_id}/delete")
async def confirm_delete(request: Request, who: Who, rt: Rt, session_id: str) -> Response:
    session = await threads.to_thread(find, rt, session_id, exact=True)
    return confirm(
        request,
        who,
        "sessions",
        heading=f"Delete the session “{display_title(session)}”?",
        detail=f"Its {session.message_count} messages, events, todo, pinned text, offloaded "
        "tool outputs and the memories extracted from it are removed for good: from the "
        "memory's git history too (rewritten) and from the database's files.",
        action=f"/ui/sessions/{session.id}/delete",
        button="Delete the session",
    )


@router.post("/sessions/{session_id}/delete")
async def delete(request: Request, who: Who, rt: Rt, session_id: str) -> Response:
    await read_form(request, who)

    def write() -> None:
        session = find(rt, session_id, exact=True)
        try:
            lifecycle.delete(rt.store, rt.settings, session, purge=True)
        except PurgeError as exc:  # it says what is done, and what finishes it
            raise UIError(500, str(exc)) from None

    await threads.to_thread(write)
    return redirect("/ui/sessions")


@router.get("/sessions/{session_id}/outputs/{event_id}")
async def output(who: Who, rt: Rt, session_id: str, event_id: int) -> Response:
    """The full text of a tool output governance masked (offloaded to a file or the event)."""

    def read() -> str:
        session = find(rt, session_id)
        return offloaded_output(
            rt.store, session.id, event_id, folder=outputs_folder(rt.settings, session)
        )

    try:
        text = await threads.to_thread(read)
    except OutputNotFound as exc:
        raise UIError(404, str(exc)) from None
    return PlainTextResponse(text, headers=SECURITY_HEADERS)

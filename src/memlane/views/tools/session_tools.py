"""The session tools: find sessions, read a page of one, ask one a question; the caller's todo.

Sessions are found by what the index wrote about them (name, description, tags,
summary) and their title. A session is named by id, id prefix, key or indexed
name, inside the caller's namespace (`Binding.lookup_namespace`).
"""

from __future__ import annotations

import bisect
from datetime import datetime
from functools import partial

from pydantic import BaseModel, Field

from memlane.engine import scaffold, threads
from memlane.engine.runtime import Runtime
from memlane.engine.sessions.lifecycle import session_title
from memlane.engine.sessions.lookup import session_name
from memlane.engine.sessions.query import query_session
from memlane.store.analysis import terms
from memlane.text.llm import LLMError
from memlane.types import Session, StoredMessage
from memlane.views.sessions import SessionLookupError, find_session
from memlane.views.tools.binding import Binding, ToolRefusal
from memlane.views.tools.text import day, one_line, short_id

DEFAULT_SESSIONS = 8
DEFAULT_PAGE = 20
MAX_PAGE = 100
MESSAGE_CHARS = 600
FIELD_WEIGHTS = {"name": 3.0, "tags": 3.0, "title": 2.0, "description": 2.0, "summary": 1.0}
EVERY_NAMESPACE = frozenset({"*", "all", "any"})


class SessionsSearchArgs(BaseModel):
    query: str = Field(min_length=1, description="Words about the session's topic.")
    limit: int | None = Field(
        default=None, ge=1, le=50, description=f"How many (default {DEFAULT_SESSIONS})."
    )
    namespace: str | None = Field(
        default=None,
        description="Another namespace to search, or '*' for all (only on a server started "
        "with --all-namespaces). Default: this project's namespace.",
    )


class SessionGetArgs(BaseModel):
    ref: str = Field(
        min_length=1, description="The session: id, id prefix, key or name (sessions_search)."
    )
    around: int | None = Field(
        default=None, ge=0, description="Message number to centre the page on (default: the end)."
    )
    limit: int | None = Field(
        default=None, ge=1, le=MAX_PAGE, description=f"Messages per page (default {DEFAULT_PAGE})."
    )


class SessionAskArgs(BaseModel):
    ref: str = Field(
        min_length=1, description="The session: id, id prefix, key or name (sessions_search)."
    )
    question: str = Field(min_length=1, description="What to ask about that session.")


class NoArgs(BaseModel):
    pass


class TodoSetArgs(BaseModel):
    text: str = Field(
        description="The whole new TODO list (Markdown checkboxes work well); empty clears it."
    )


async def resolve(rt: Runtime, binding: Binding, ref: str) -> Session:
    """The session `ref` names, inside what the binding may see."""
    try:
        session = await threads.to_thread(
            find_session,
            rt.store,
            ref,
            tenant=binding.tenant,
            namespace=binding.namespace,
            within=binding.lookup_namespace(),
        )
    except SessionLookupError as exc:
        raise ToolRefusal(f"{exc} (looked in {binding.describe()}; try sessions_search)") from None
    if not binding.session_visible(session):
        raise ToolRefusal(f"no session matches {ref!r} in {binding.describe()}")
    return session


def _score(session: Session, wanted: set[str]) -> float:
    meta = session.metadata
    tags = meta.get("tags")
    fields = {
        "name": session_name(session) or "",
        "tags": " ".join(str(t) for t in tags) if isinstance(tags, list) else "",
        "title": session.title or "",
        "description": str(meta.get("description") or ""),
        "summary": str(meta.get("summary") or ""),
    }
    score = 0.0
    for name, text in fields.items():
        found = wanted & set(terms(text))
        score += FIELD_WEIGHTS[name] * len(found)
    return score


def _session_line(rt: Runtime, session: Session) -> str:
    meta = session.metadata
    title = session_title(rt.store, session)
    description = meta.get("description")
    about = f": {one_line(str(description), 140)}" if description else ""
    tags = meta.get("tags")
    tagged = f" [{', '.join(str(t) for t in tags)}]" if isinstance(tags, list) and tags else ""
    return (
        f"- {short_id(session.id)} {one_line(title, 80)}{about}{tagged} "
        f"({session.message_count} messages, {day(session.updated_at)}, ns {session.namespace})"
    )


async def sessions_search(rt: Runtime, binding: Binding, args: SessionsSearchArgs) -> str:
    namespace: str | None = binding.namespace
    if args.namespace is not None and args.namespace != binding.namespace:
        if not binding.all_namespaces:
            raise ToolRefusal(
                f"this connection sees {binding.describe()}; another namespace can be searched "
                "only on a server started with --all-namespaces"
            )
        namespace = None if args.namespace.strip() in EVERY_NAMESPACE else args.namespace
    if namespace is None and not (binding.all_namespaces and args.namespace is not None):
        return f"No sessions: {binding.describe()} (connect with a namespace to see its sessions)."
    wanted = set(terms(args.query))

    def ranked() -> list[str]:
        sessions = rt.store.list_sessions(namespace=namespace, tenant=binding.tenant)
        scored = [(s, _score(s, wanted)) for s in sessions]
        best = sorted(
            (pair for pair in scored if pair[1] > 0),
            key=lambda pair: (-pair[1], -_stamp(pair[0].updated_at)),
        )[: args.limit or DEFAULT_SESSIONS]
        return [_session_line(rt, s) for s, _ in best]

    lines = await threads.to_thread(ranked)
    where = f"namespace {namespace!r}" if namespace is not None else "every namespace"
    if not lines:
        return f"No sessions about {args.query!r} in {where}."
    head = (
        f"{len(lines)} sessions about {args.query!r} in {where} "
        "(read one with session_get, or ask it with session_ask):"
    )
    return "\n".join([head, *lines])


def _stamp(moment: datetime) -> float:
    return moment.timestamp()


def message_line(item: StoredMessage) -> str:
    message = item.message
    who = (
        message.role if message.origin == "client" else f"{message.role} [memlane {message.origin}]"
    )
    if message.tool_calls:
        calls = "; ".join(f"{c.name}({one_line(c.arguments, 200)})" for c in message.tool_calls)
        body = f"calls {calls}"
    elif message.kind == "tool_result":
        body = f"result of {message.call_id or message.name or 'a call'}: "
        body += one_line(message.text, MESSAGE_CHARS)
    elif message.kind == "reasoning":
        body = "(reasoning) " + one_line(message.text, 200)
    else:
        body = one_line(message.text, MESSAGE_CHARS)
    return f"#{item.position} {who}: {body}"


async def session_get(rt: Runtime, binding: Binding, args: SessionGetArgs) -> str:
    session = await resolve(rt, binding, args.ref)
    stored = await threads.to_thread(rt.store.list_messages, session.id)
    size = args.limit or DEFAULT_PAGE
    if not stored:
        return f"Session {session.id} has no messages yet."
    if args.around is None:
        start = max(0, len(stored) - size)
    else:
        centre = bisect.bisect_left([m.position for m in stored], args.around)
        start = max(0, min(centre - size // 2, len(stored) - size))
    page = stored[start : start + size]
    title = await threads.to_thread(session_title, rt.store, session)
    head = [
        f"Session {session.id} ({one_line(title, 80)}), namespace {session.namespace}, "
        f"{len(stored)} messages; showing #{page[0].position}-#{page[-1].position}."
    ]
    if start > 0:
        head.append(
            f"Earlier: session_get with around={stored[max(0, start - size // 2)].position}."
        )
    if start + size < len(stored):
        head.append(f"Later: session_get with around={stored[start + size].position}.")
    summary = session.metadata.get("summary")
    if isinstance(summary, str) and summary and start > 0:
        head.append(f"Summary: {one_line(summary, 600)}")
    return "\n".join([*head, "", *(message_line(m) for m in page)])


async def session_ask(rt: Runtime, binding: Binding, args: SessionAskArgs) -> str:
    session = await resolve(rt, binding, args.ref)
    try:
        answer = await query_session(rt, session, args.question)
    except LLMError as exc:
        raise ToolRefusal(
            f"the model that answers questions about sessions failed: {exc}; read the session "
            "with session_get instead"
        ) from None
    return answer.text or "(the model gave no answer)"


async def _own_session(rt: Runtime, binding: Binding, *, create: bool) -> Session | None:
    if binding.session_key is None:
        raise ToolRefusal(
            "no session is known for this connection: the todo belongs to a session (start the "
            "server with --session KEY, or send X-Memlane-Session)"
        )
    key = binding.session_key
    if create:
        return await threads.to_thread(
            partial(
                rt.store.ensure_session, key, namespace=binding.namespace, tenant=binding.tenant
            )
        )
    return await threads.to_thread(partial(rt.store.find_session, key, tenant=binding.tenant))


async def todo_get(rt: Runtime, binding: Binding, args: NoArgs) -> str:
    session = await _own_session(rt, binding, create=False)
    if session is None:
        return "No TODO yet for this session."
    texts = await threads.to_thread(scaffold.read_texts, rt, session)
    todo = texts.get("todo", "").strip()
    return todo or "No TODO yet for this session."


async def todo_set(rt: Runtime, binding: Binding, args: TodoSetArgs) -> str:
    session = await _own_session(rt, binding, create=True)
    assert session is not None
    kept = await threads.to_thread(scaffold.set_text, rt, session, "todo", args.text)
    if not kept:
        return "The TODO is cleared."
    limit = scaffold.cut_at(rt.settings, "todo", args.text)
    size = f"{len(kept)} characters"
    if limit:
        size = f"cut to {limit} characters, the most a TODO keeps ({scaffold.LIMITS['todo']})"
    return f"The TODO is set ({size}); memlane shows it to the model each turn."

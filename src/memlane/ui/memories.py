"""The inspector's memory pages: browse by scope, search as the proxy recalls, read, edit, forget.

Search runs the proxy's read path (`engine.retrieval.search`, which recall ranks with: keyword and
dense candidates, fusion, threshold, recency, MMR) and shows each hit's
keyword, dense and final scores. Edits and forgetting call the same functions
as `memlane memory edit` / `forget` (`engine.memory.manage`): the file, the
git history and the index change together.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from memlane.engine import threads
from memlane.engine.memory import manage, verify
from memlane.engine.memory.scopes import CONVERSATION_PREFIX, parse_scope, unqualified
from memlane.engine.memory.versions import interval
from memlane.engine.retrieval.search import search
from memlane.engine.runtime import Runtime
from memlane.types import Fact
from memlane.ui.paging import page_count, rows_of
from memlane.ui.render import page
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
from memlane.views.memories import MemoryNotFound, get_memory

router = APIRouter(prefix=PREFIX, include_in_schema=False)

SEARCH_TOP_K = 20
PAGE_CHECKS = 500
"""Cited files a page of memories checks at most (a stat each while nothing changed)."""


def _scope(text: str) -> str | None:
    if not text.strip():
        return None
    try:
        return parse_scope(text.strip())
    except ValueError as exc:
        raise UIError(400, str(exc)) from None


def _conversation(scope: str) -> bool:
    """A `conv:` scope, a tenant's (`t:<tenant>:conv:…`) included."""
    return unqualified(scope).startswith(CONVERSATION_PREFIX)


def grouped_scopes(scopes: list[tuple[str, int]]) -> dict[str, Any]:
    """global and namespaces listed; per-conversation scopes counted (a session links them)."""
    return {
        "listed": [(s, n) for s, n in scopes if not _conversation(s)],
        "conversations": sum(1 for s, _ in scopes if _conversation(s)),
        "conversation_entries": sum(n for s, n in scopes if _conversation(s)),
    }


@router.get("/memories")
async def memories_page(
    request: Request,
    who: Who,
    rt: Rt,
    scope: str = "",
    q: str = "",
    deleted: bool = False,
    page_number: PageNumber = 1,
) -> Response:
    chosen = _scope(scope)
    hits: list[dict[str, Any]] = []
    facts: list[Fact] = []
    total = 0
    if q.strip():  # the index as it is: a catch-up with the files (at start) goes on meanwhile
        hits = await _search(rt, q, chosen)
    else:
        offset, limit = rows_of(page_number)
        facts, total = await threads.to_thread(
            lambda: rt.store.page_facts(
                scope=chosen,
                include_deleted=deleted,
                offset=offset,
                limit=limit,
            )
        )
    scopes = await threads.to_thread(rt.store.fact_scopes)
    shown = facts + [h["fact"] for h in hits if h["fact"] is not None]
    codes = await verify.checked(rt, shown, budget=PAGE_CHECKS)
    return page(
        request,
        "memories.html",
        context(
            request,
            who,
            "memories",
            scope=chosen or "",
            q=q,
            deleted=deleted,
            hits=hits,
            facts=facts,
            total=total,
            page=page_number,
            pages=page_count(total),
            scopes=grouped_scopes(scopes),
            codes=codes,
        ),
    )


async def _search(rt: Runtime, query: str, scope: str | None) -> list[dict[str, Any]]:
    """The proxy's read path (`recall` ranks with this same `search`), over the chosen scope,
    or every scope when none is chosen (an operator's view, never a request's)."""
    found = await search(rt, query, scopes=[scope] if scope else None, top_k=SEARCH_TOP_K)

    def facts() -> dict[str, Fact | None]:
        return {c.ref: rt.store.get_fact(c.ref) for c in found}

    known = await threads.to_thread(facts)
    return [{"candidate": c, "fact": known.get(c.ref)} for c in found]


@router.get("/memories/{memory_id}")
async def memory_page(request: Request, who: Who, rt: Rt, memory_id: str) -> Response:
    fact = await _get(rt, memory_id)
    history = await manage.memory_history(rt, fact)
    versions = await manage.memory_versions(rt, fact.id)
    path = await threads.to_thread(manage.memory_file, rt, fact)
    code = (await verify.checked(rt, [fact], budget=PAGE_CHECKS)).get(fact.id)
    source = (
        await threads.to_thread(rt.store.get_session, fact.source_session)
        if fact.source_session
        else None
    )
    return page(
        request,
        "memory.html",
        context(
            request,
            who,
            "memories",
            fact=fact,
            history=history,
            versions=versions if len(versions) > 1 else [],
            interval=interval,
            path=str(path) if path else None,
            source=source,
            git=rt.memory_book.git is not None,
            code=code,
        ),
    )


async def _get(rt: Runtime, memory_id: str) -> Fact:
    try:
        return await get_memory(rt, memory_id)
    except MemoryNotFound as exc:
        raise UIError(404, str(exc.args[0])) from None


@router.post("/memories/{memory_id}/edit")
async def edit(request: Request, who: Who, rt: Rt, memory_id: str) -> Response:
    form = await read_form(request, who)
    try:
        fact = await manage.edit_memory(rt, memory_id, form.get("text", "").replace("\r\n", "\n"))
    except manage.MemoryNotFound as exc:
        raise UIError(404, str(exc.args[0])) from None
    except ValueError as exc:
        raise UIError(400, str(exc)) from None
    return redirect(f"/ui/memories/{fact.id}")


@router.get("/memories/{memory_id}/forget")
async def confirm_forget(request: Request, who: Who, rt: Rt, memory_id: str) -> Response:
    fact = await _get(rt, memory_id)
    return confirm(
        request,
        who,
        "memories",
        heading="Forget this memory?",
        detail=f"“{fact.text[:300]}” leaves recall and the index. Its text stays in the file "
        "moved under deleted/ and in the memory's git history; `memlane memory forget "
        f"{fact.id} --purge` removes every copy.",
        action=f"/ui/memories/{fact.id}/forget",
        button="Forget it",
    )


@router.post("/memories/{memory_id}/forget")
async def forget(request: Request, who: Who, rt: Rt, memory_id: str) -> Response:
    await read_form(request, who)
    try:
        fact = await manage.forget_memory(rt, memory_id)
    except manage.MemoryNotFound as exc:
        raise UIError(404, str(exc.args[0])) from None
    return redirect(f"/ui/memories/{fact.id}")


@router.post("/memories/{memory_id}/confirm")
async def confirm_code(request: Request, who: Who, rt: Rt, memory_id: str) -> Response:
    """The memory still holds: record its cited files as they are now
    (`memlane memory verify --confirm`)."""
    await read_form(request, who)
    try:
        fact, _ = await verify.verify_memory(rt, memory_id, confirm=True)
    except manage.MemoryNotFound as exc:
        raise UIError(404, str(exc.args[0])) from None
    return redirect(f"/ui/memories/{fact.id}")

"""The read path: recalled memories injected into a request.

What is injected is one message, the fenced block `engine.memory.block` renders; earlier
items are never rewritten, so the cacheable prefix stays stable.

Where it goes (`governance.recall.before_question`, the place of every recalled block):
just before the latest user message when that message ends the request (a fresh turn:
the model reads summary, memories, then the question, which stays the user's last
word); at the very end when a tool loop is under way after it. The block is not
stored, so the next request drops it: placed mid-history it would make every item
after it miss the provider's prompt cache on the next turn (an agent's whole tool
loop); at the end, only the block itself does.

Nothing is injected when no memory clears the threshold. Memories that are
already in the request word for word are not repeated. With `memory_mode =
"trimmed"` the proxy recalls only when governance had to trim the request.

A request that still carries its conversation as stored (its client messages start
with every one the session's digest stands for, `carries_its_turns`) is not searched
against the conversation's own remembered turns: each would be found in the request
and dropped. Agents resend their whole history on every request, and the turns of the
conversation asking were most of what such a search read (`benchmarks/load.py`). Its
other entries (facts kept in the conversation, memories a person put there) are
searched as always, and once a client compacts its history, or governance trims the
request, the dropped turns are found again.

Time: only facts true now are recalled (an as-of search asks for another
moment). A question about change (`asks_about_change`: "before", "used to",
"previously", "since when", … a word list, no model) also brings the versions
that were replaced, and then every fact is labelled with its interval:

    [memory, 2026-01-15 → 2026-03-10, replaced] The user lives in Berlin
    [memory, since 2026-03-10] The user lives in Lisbon

Remembered turns always show when they were said (`[user, 2026-03-09 14:02 UTC]`).

The summaries session indexing writes are documents of their namespace: another
conversation of it recalls them (`[session summary, 2026-03-09 14:02 UTC] …`).

A fact extracted from a turn links to it (`Fact.source_turns`): a recalled fact
brings that turn right after it (`memory_fact_sources`), within the same top-k,
once, and only from a scope the request recalls from (by default a turn stays in
its conversation: another conversation of the namespace gets the fact alone).

A memory that cites project files (`Fact.cites`) is checked against them
(`engine.memory.stale`, `memory_cites`): one whose files changed or moved says so,
one whose file is gone is ranked after the current ones:

    [memory, noted 2026-11-02; conf/app.toml has changed since (3f2a9c1..8b0d4e2)] …
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from memlane.engine import threads
from memlane.engine.memory import reuse, scopes
from memlane.engine.memory.block import Recalled, inject, render
from memlane.engine.memory.summary import summary_id
from memlane.engine.memory.verify import renames_later
from memlane.engine.retrieval.candidates import Candidate
from memlane.engine.retrieval.search import Query, ranked, reranking, search
from memlane.engine.runtime import Runtime
from memlane.engine.turn import RecallNote, Turn
from memlane.store.documents import is_turn, session_doc
from memlane.store.transcript import digested
from memlane.types import DocKind, Fact, Message

CHANGE_WORDS = re.compile(
    r"\b(?:before|used to|use to|previous(?:ly)?|formerly|former|earlier|originally|"
    r"at first|no longer|any ?more|since when|until when|how long|in the past|back then|"
    r"chang(?:e|ed|es|ing)|switch(?:ed|es|ing)?|mov(?:e|ed|ing)|history)\b",
    re.IGNORECASE,
)
"""Words of a question about change: such a question also recalls replaced versions."""


def asks_about_change(query: str) -> bool:
    """Whether `query` asks how something changed (a word list: cheap, no model)."""
    return CHANGE_WORDS.search(query) is not None


def search_ahead(rt: Runtime, turn: Turn) -> Callable[[list[Message]], Ahead] | None:
    """The turn's recall, to run in the worker thread that shaped the request, on the
    shaped messages (None: not ahead of governance).

    It reads only what earlier turns stored (the turn's own text is not a memory yet),
    so it runs in the same read as the shaping, before governance; when governance leaves the
    request's texts as they were, what it found is injected as it is, else its hits
    are checked again against the governed request (`recall_for_turn`). A tool loop's
    next step asks the same question: it takes the conversation's last search
    (`engine.memory.reuse`). Not with a reranker (an async call) nor in `trimmed` mode
    (whether to recall depends on governance).
    """
    settings = rt.settings
    query = turn.user_text
    if not settings.memory_enabled or settings.memory_mode == "trimmed" or not query.strip():
        return None
    if reranking(rt):
        return None

    def search_now(messages: list[Message]) -> Ahead:
        session_id = turn.session.id if turn.session is not None else None
        wanted = scopes.recall_scopes(settings, session_id, turn.namespace, turn.tenant)
        exclude = _texts(messages)
        own = scopes.conversation_scope(session_id, turn.tenant) if session_id else None
        left_out = own if own in wanted and carries_its_turns(turn) else None
        asked = _asked(rt, query, wanted, exclude, None, session_id, turns_left_out=left_out)
        searched = _find(rt, asked, session_id)
        hits, found, summary = searched.hits, searched.found, searched.summary
        return Ahead(
            wanted, hits, frozenset(exclude), found, summary, searched.reused, left_out is not None
        )

    return search_now


def carries_its_turns(turn: Turn) -> bool:
    """Whether the request still carries its conversation as stored: its client messages
    begin with every one the session's digest stands for (`store.transcript.digested`),
    which the writer moves to the end of each turn's client messages. A client that
    compacted or edited its history fails the test, as does a session without a digest.
    The answer stored after the digest's end is the one the client resends now."""
    session = turn.session
    if session is None or not session.client_digest or turn.continued or turn.server_history:
        return False
    hashes = [m.fingerprint() for m in turn.messages if m.origin == "client"]
    return digested(session.client_digest, hashes) is not None


@dataclass(frozen=True, slots=True)
class _Found:
    """A request's search, and what it chose from it."""

    hits: list[Candidate]
    reused: bool
    """`hits` are the conversation's last search, not one run for this request."""
    found: list[Recalled]
    summary: str


def _find(
    rt: Runtime,
    asked: _Asked,
    session_id: str | None,
    hits: list[Candidate] | None = None,
    *,
    reused: bool = False,
) -> _Found:
    """What a request recalls: from `hits` (a search it ran ahead; `reused`: the
    conversation's last one), else from the conversation's last search when it asked the
    same (`engine.memory.reuse`), else from a new one. Reused hits are checked: when an
    entry they bring was deleted or changed since, the request searches anew."""
    if hits is None:
        kept = _kept_search(rt, asked, session_id)
        reused = kept is not None
        hits = kept if kept is not None else _search(rt, asked, session_id)
    found, summary = _chosen(rt, asked, hits, session_id)
    if reused and _drifted(rt, found):
        hits, reused = _search(rt, asked, session_id), False
        found, summary = _chosen(rt, asked, hits, session_id)
    return _Found(hits, reused, found, summary)


def _kept_search(rt: Runtime, asked: _Asked, session_id: str | None) -> list[Candidate] | None:
    if asked.query is None or session_id is None or rt.settings.memory_recall_reuse_seconds <= 0:
        return None
    return reuse.SEARCHES.get(session_id, asked.query)


def _search(rt: Runtime, asked: _Asked, session_id: str | None) -> list[Candidate]:
    """The hits of `asked`, kept for the conversation's next request (`reuse`)."""
    if asked.query is None:
        return []
    hits = ranked(rt, asked.query)
    seconds = rt.settings.memory_recall_reuse_seconds
    if session_id is not None and seconds > 0:
        reuse.SEARCHES.put(session_id, asked.query, hits, seconds)
    return hits


def _drifted(rt: Runtime, found: Sequence[Recalled]) -> bool:
    """Whether an entry among `found` changed since its search: a fact gone, forgotten or
    reworded (each was just read from the store), a session summary whose session is gone
    or was summarised anew."""
    for recalled in found:
        hit, fact = recalled.candidate, recalled.fact
        if hit.kind == "session":
            session = rt.store.get_session(hit.ref)
            doc = session_doc(session) if session is not None else None
            if doc is None or doc[0].text != hit.text:
                return True
        elif fact is None or fact.deleted or fact.text != hit.text:
            return True
    return False


@dataclass(frozen=True, slots=True)
class Ahead:
    """A recall run ahead of governance: where it looked, what it found, and what it
    chose for a request holding exactly the texts `exclude`."""

    scopes: Sequence[str]
    hits: list[Candidate]
    exclude: frozenset[str]
    found: list[Recalled]
    summary: str
    reused: bool = False
    """`hits` are the conversation's last search (`engine.memory.reuse`)."""
    turns_left_out: bool = False
    """The conversation's own remembered turns were not searched (`carries_its_turns`)."""


def _texts(messages: Sequence[Message]) -> set[str]:
    return {m.text.strip() for m in messages if m.text}


async def recall_for_turn(
    rt: Runtime, turn: Turn, messages: list[Message], ahead: Awaitable[Ahead] | None = None
) -> list[Message]:
    """The request's messages with recalled memories injected (or unchanged); `ahead`: the
    recall `search_ahead` ran for this turn."""
    settings = rt.settings
    if not settings.memory_enabled:
        return messages
    if settings.memory_mode == "trimmed" and not turn.trimmed:
        return messages
    query = turn.user_text
    if not query.strip():
        return messages
    session_id = turn.session.id if turn.session is not None else None
    exclude = _texts(messages)
    wanted = scopes.recall_scopes(settings, session_id, turn.namespace, turn.tenant)
    if ahead is None and reranking(rt):  # the reranker's call is async: a trip per stage
        found = await recall(rt, query, scopes=wanted, exclude=exclude, session_id=session_id)
        summary = await conversation_summary(rt, session_id) if found and session_id else ""
    else:
        searched = await ahead if ahead is not None else None
        if searched is not None and searched.exclude == exclude:
            found, summary = searched.found, searched.summary  # governance changed no text
        else:

            def chosen() -> tuple[list[Recalled], str]:
                """One trip to a worker thread (each costs a wake-up and the GIL on the
                way back): the search unless it ran ahead, the entries, the summary."""
                if searched is None or searched.turns_left_out:  # governance dropped some
                    asked = _asked(rt, query, wanted, exclude, None, session_id)
                    again = _find(rt, asked, session_id)
                else:
                    asked = _asked(rt, query, searched.scopes, exclude, None, session_id)
                    again = _find(rt, asked, session_id, searched.hits, reused=searched.reused)
                return again.found, again.summary

            found, summary = await threads.to_thread(chosen)
    renames_later(rt)
    if not found:
        return messages
    turn.recalled = tuple(
        RecallNote(
            ref=r.candidate.ref,
            scope=r.candidate.scope,
            keyword=r.candidate.keyword_score,
            dense=r.candidate.dense_score,
            score=r.candidate.score,
            kind=r.candidate.kind,
            code=r.staleness.status if r.staleness is not None and r.staleness.stale else None,
        )
        for r in found
    )
    return inject(messages, render(found, summary))


async def recall(
    rt: Runtime,
    query: str,
    *,
    scopes: Sequence[str] | None,
    exclude: set[str] | None = None,
    as_of: datetime | None = None,
    session_id: str | None = None,
    distinct: bool = True,
    top_k: int | None = None,
) -> list[Recalled]:
    """The top-k memories for `query` (`top_k`, default `memory_top_k`), with their roles,
    skipping texts in `exclude`.

    `distinct` False keeps one text remembered in several scopes once per scope (an
    operator's search shows each where it is); a request reads it once.
    `scopes` None searches every scope: for an operator (CLI), never for a request.
    Facts true now, or at `as_of`; a question about change brings replaced ones too.
    Session summaries of the scopes come too (`memory_session_summaries`), except the
    summary of `session_id`, the conversation asking (it is what the model reads).
    """
    asked = _asked(rt, query, scopes, exclude, as_of, session_id, top_k=top_k)
    asked = replace(asked, distinct=distinct)
    q = asked.query
    if q is None:
        return []
    if not reranking(rt):
        found = await threads.to_thread(lambda: _recalled(rt, asked, ranked(rt, q)))
        renames_later(rt)
        return found
    hits = await search(
        rt,
        query,
        scopes=scopes,
        kinds=q.flt.kinds,
        top_k=q.k,
        as_of=as_of,
        superseded=q.flt.valid_at is None,
    )
    found = await threads.to_thread(_recalled, rt, asked, hits)
    renames_later(rt)
    return found


@dataclass(frozen=True, slots=True)
class _Asked:
    """A recall's search, and what decides which of its hits are kept and how shown."""

    query: Query | None
    k: int
    skip: set[str]
    scopes: Sequence[str] | None
    session_id: str | None
    dated: bool
    distinct: bool = True
    """One hit per text (else per scope and text)."""


def _asked(
    rt: Runtime,
    query: str,
    scopes: Sequence[str] | None,
    exclude: set[str] | None,
    as_of: datetime | None,
    session_id: str | None,
    *,
    turns_left_out: str | None = None,
    top_k: int | None = None,
) -> _Asked:
    settings = rt.settings
    k = top_k or settings.memory_top_k
    skip = exclude or set()
    change = as_of is None and asks_about_change(query)
    summaries = settings.memory_session_summaries
    kinds: tuple[DocKind, ...] = ("fact", "session") if summaries else ("fact",)
    extra = min(len(skip), k) + (summaries and session_id is not None)
    searched = Query.of(
        rt,
        query,
        scopes,
        kinds=kinds,
        top_k=k + extra,
        as_of=as_of,
        superseded=change,
        turns_left_out=turns_left_out,
    )
    return _Asked(searched, k, skip, scopes, session_id, change or as_of is not None)


def _chosen(
    rt: Runtime, asked: _Asked, hits: Sequence[Candidate], session_id: str | None
) -> tuple[list[Recalled], str]:
    """The entries to inject from `hits`, and the conversation's summary when there are any."""
    found = _recalled(rt, asked, hits)
    return found, _summary(rt, session_id) if found and session_id else ""


def _recalled(rt: Runtime, asked: _Asked, hits: Sequence[Candidate]) -> list[Recalled]:
    """The hits not already in the request, each with its entry (and, `memory_fact_sources`,
    the turns its fact came from), top-k; in the calling thread (it reads the store)."""
    seen: set[str] = set()
    hits = [h for h in hits if _fresh(h, asked, seen)][: asked.k]
    if not hits:
        return []
    follow = rt.settings.memory_fact_sources
    facts, sources = _load(rt, hits, asked.scopes, follow=follow)
    out: list[Recalled] = []
    taken: set[str] = set()
    for hit in hits:
        if hit.ref in taken:
            continue  # a source turn brought up by its fact already
        fact = facts.get(hit.ref)
        role = fact.role if fact is not None else hit.kind
        out.append(Recalled(role, hit.text, hit, fact, asked.dated))
        taken.add(hit.ref)
        for turn in sources.get(hit.ref, ()):
            if turn.id not in taken and turn.text.strip() not in asked.skip:
                out.append(Recalled(turn.role, turn.text, _brought(turn, hit), turn, asked.dated))
                taken.add(turn.id)
    return _checked(rt, out)[: asked.k]


def _checked(rt: Runtime, found: list[Recalled]) -> list[Recalled]:
    """The memories citing project files checked against them (`memory_cites`, at most
    `memory_cites_per_recall` files): each carries what changed, and one whose cited file
    is gone goes after the current ones (in order otherwise)."""
    settings = rt.settings
    facts = [r.fact for r in found if r.fact is not None and r.fact.cites is not None]
    if not facts or not settings.memory_cites:
        return found
    checks = rt.project_checks.check_all(facts, budget=settings.memory_cites_per_recall)
    marked = [
        replace(r, staleness=checks.get(r.fact.id)) if r.fact is not None else r for r in found
    ]
    return sorted(marked, key=lambda r: r.staleness is not None and r.staleness.status == "deleted")


def _fresh(hit: Candidate, asked: _Asked, seen: set[str]) -> bool:
    """Not in the request already, not said by an earlier hit (a fork's summary is its
    parent's; of the same scope only, unless `distinct`); a session summary is not the
    asking conversation's own, nor inside a message of the request (an `@@` reference
    brings it)."""
    text = hit.text.strip()
    said = text if asked.distinct else f"{hit.scope}\n{text}"
    if text in asked.skip or said in seen:
        return False
    skip = asked.skip
    if hit.kind == "session" and (hit.ref == asked.session_id or any(text in s for s in skip)):
        return False
    seen.add(said)
    return True


def _load(
    rt: Runtime, hits: Sequence[Candidate], scopes: Sequence[str] | None, *, follow: bool
) -> tuple[dict[str, Fact | None], dict[str, list[Fact]]]:
    """The hits' entries, and (`follow`) the live source turns of the facts among them that
    the request may see: a turn of a scope it does not recall from stays there."""
    store = rt.store
    facts = {h.ref: store.get_fact(h.ref) if h.kind == "fact" else None for h in hits}
    sources: dict[str, list[Fact]] = {}
    if not follow:
        return facts, sources
    allowed = None if scopes is None else set(scopes)
    for ref, fact in facts.items():
        if fact is None or fact.deleted or not fact.source_turns:
            continue
        turns = [store.get_fact(turn_id) for turn_id in fact.source_turns]
        sources[ref] = [
            t
            for t in turns
            if t is not None and is_turn(t) and (allowed is None or t.scope in allowed)
        ]
    return facts, sources


def _brought(turn: Fact, fact: Candidate) -> Candidate:
    """A source turn as a result: ranked with the fact that brought it."""
    return Candidate(
        "fact",
        turn.id,
        turn.scope,
        turn.conversation_id,
        turn.text,
        turn.created_at,
        relevance=fact.relevance,
        score=fact.score,
        role=turn.role,
    )


async def conversation_summary(rt: Runtime, session_id: str) -> str:
    return await threads.to_thread(_summary, rt, session_id)


def _summary(rt: Runtime, session_id: str) -> str:
    fact = rt.store.get_fact(summary_id(session_id))
    return fact.text if fact is not None and not fact.deleted else ""

"""Where governance keeps what it decides and what it drops, per session.

`StoreLedger` is the proxy's: the plan lives in the session's state, dropped
items and offloaded tool outputs become events (keyword-indexed, so they can be
recalled), full tool outputs are written to the session folder (SQLite mode) or
kept in the event itself (PostgreSQL mode, where replicas share no disk).
`MemoryLedger` serves ephemeral sessions and the library: the same decisions,
kept in memory for as long as the caller keeps the object.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any, Protocol

from memlane.config import Settings
from memlane.engine.governance.plan import Plan
from memlane.engine.governance.recall import Snippet, best_window
from memlane.files.atomic import write_atomic
from memlane.files.paths import session_dir
from memlane.store import MessageLog, NewEvent, SearchFilter, Store
from memlane.store.analysis import query_terms, terms
from memlane.store.documents import window_documents
from memlane.types import Message, Session

PLAN_STATE = "governance.plan"
"""Name of the session state entry that holds the plan."""
EVENT_DROPPED = "governance.dropped"
EVENT_OFFLOADED = "governance.tool_output"
EVENT_COMPACTED = "governance.compacted"
"""One per compaction: tokens before and after, what was masked and dropped, the snapshot
(`report.context_event`)."""
EVENT_LOOP = "governance.loop"
EVENT_INFLATED = "governance.summary_inflated"
EVENT_SUMMARY_FAILED = "governance.summary_failed"

DROPPED_TEXT_CHARS = 2_000
"""Characters of one dropped item kept in its (indexed) event; full tool outputs are offloaded."""
OUTPUTS_FOLDER = "tool-outputs"
OUTPUT_SUFFIX = ".txt"


class Ledger(Protocol):
    def load_plan(self) -> Plan: ...

    def save_plan(self, plan: Plan) -> None: ...

    def offload(self, index: int, message: Message, tokens: int) -> str:
        """Keep a tool result's full text; return where a person (or the model) finds it."""
        ...

    def record_dropped(self, items: Sequence[tuple[int, Message]]) -> None: ...

    def record_event(self, kind: str, payload: Mapping[str, Any], text: str = "") -> None: ...

    def recall(self, query: str, limit: int, chars: int, *, version: str = "") -> list[Snippet]:
        """Dropped history relevant to `query`, best first, each at most `chars` long.

        `version` names the state of the dropped history (the plan's anchor): the same
        query at the same version has the same answer, so a ledger may remember it.
        """
        ...

    def recalled(
        self, query: str, limit: int, chars: int, *, version: str = ""
    ) -> list[Snippet] | None:
        """`recall`'s answer when the ledger has it without reading the store (remembered,
        or held in memory); None when only `recall` can tell, in a worker thread."""
        ...


def describe(message: Message) -> str:
    """One item as plain text, for the event log and the summariser."""
    if message.kind == "tool_call":
        calls = "; ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        prefix = f"{message.text}\n" if message.text else ""
        return f"{prefix}assistant called {calls}"
    if message.kind == "tool_result":
        return f"tool {message.name or message.call_id or ''} returned: {message.text}"
    if message.kind == "reasoning":
        return f"assistant reasoning: {message.text}"
    return f"{message.role}: {message.text}"


def output_name(message: Message) -> str:
    """A file name for an offloaded output: stable for the same output, never a path."""
    digest = hashlib.sha256(message.fingerprint().encode()).hexdigest()[:16]
    return f"{digest}{OUTPUT_SUFFIX}"


@dataclass(eq=False)
class StoreLedger:
    settings: Settings
    store: Store
    session_id: str
    key: str
    _: KW_ONLY
    files: bool
    """Full outputs go to disk (SQLite mode); otherwise they stay in the event (PostgreSQL
    mode: every replica reads the same database, not the same disk)."""
    tenant: str = ""
    state: Mapping[str, str] | None = None
    """The session's state as the turn found it (`Turn.stored_state`), read in front of the
    request once for the scaffold and governance both; dropped once a plan is saved."""
    row: Callable[[], object] | None = None
    """Writes a new session's row, made ahead of it (`engine.sessions.ahead`): called
    before the ledger's first write, which can come in front of the request."""

    def _with_row(self) -> None:
        if self.row is not None:
            self.row()
            self.row = None

    def load_plan(self) -> Plan:
        state = self.state if self.state is not None else self.store.get_state(self.session_id)
        return Plan.from_json(state.get(PLAN_STATE))

    def save_plan(self, plan: Plan) -> None:  # behind the turn's store: the row is there
        self.store.set_state(self.session_id, PLAN_STATE, plan.to_json())
        self.state = None

    def offload(self, index: int, message: Message, tokens: int) -> str:
        self._with_row()
        payload: dict[str, Any] = {
            "index": index,
            "call_id": message.call_id,
            "name": message.name,
            "chars": len(message.text),
            "tokens": tokens,
            "fingerprint": message.fingerprint(),
        }
        reference = ""
        if self.files:
            folder = (
                session_dir(self.settings.sessions_path, self.key, self.tenant) / OUTPUTS_FOLDER
            )
            path = folder / output_name(message)
            _write_once(path, message.text)
            payload["path"] = str(path)
            reference = home_relative(path, self.settings.home_path)
        else:
            payload["content"] = message.text
        text = describe(message)[:DROPPED_TEXT_CHARS]
        event = self.store.add_event(self.session_id, EVENT_OFFLOADED, payload, text=text)
        return reference or f"memlane event {event.id} of this session"

    def record_dropped(self, items: Sequence[tuple[int, Message]]) -> None:
        """One event per dropped item, each found by its own words and its neighbours', dated
        when it was said (recall shows that time), all in one transaction: a compaction at
        128k drops a hundred items."""
        texts = [describe(message)[:DROPPED_TEXT_CHARS] for _, message in items]
        documents = window_documents(texts)
        said = self._said(message for _, message in items)
        events = [
            NewEvent(
                EVENT_DROPPED,
                {
                    "index": index,
                    "role": message.role,
                    "kind": message.kind,
                    "call_ids": list(message.call_ids),
                    "fingerprint": message.fingerprint(),
                },
                text,
                document,
                at,
            )
            for (index, message), text, document, at in zip(
                items, texts, documents, said, strict=True
            )
        ]
        if events:
            self._with_row()
            self.store.add_events(self.session_id, events)

    def _said(self, messages: Iterable[Message]) -> list[datetime | None]:
        """When each message was stored, matched by fingerprint in order (None: not stored)."""
        stored: dict[str, list[datetime]] = {}
        for item in self.store.list_messages(self.session_id, include_superseded=True):
            stored.setdefault(item.content_hash, []).append(item.created_at)
        out: list[datetime | None] = []
        for message in messages:
            times = stored.get(message.fingerprint())
            out.append(times.pop(0) if times else None)
        return out

    def record_event(self, kind: str, payload: Mapping[str, Any], text: str = "") -> None:
        self._with_row()
        self.store.add_event(self.session_id, kind, payload, text=text)

    def recalled(
        self, query: str, limit: int, chars: int, *, version: str = ""
    ) -> list[Snippet] | None:
        if not query.strip() or limit <= 0:
            return []
        if not version:
            return None
        return RECALL_MEMO.get((self.session_id, version, query, limit, chars))

    def recall(self, query: str, limit: int, chars: int, *, version: str = "") -> list[Snippet]:
        found = self.recalled(query, limit, chars, version=version)
        if found is not None:
            return found
        key = (self.session_id, version, query, limit, chars)
        flt = SearchFilter(kinds=("event",), session_id=self.session_id)
        hits = self.store.keyword_search(query, flt, limit=limit)
        snippets = [
            Snippet(best_window(hit.text, query, chars), hit.score, hit.created_at) for hit in hits
        ]
        if version:
            RECALL_MEMO.put(key, snippets)
        return snippets


class RecallMemo:
    """The latest recall answers per session, bounded: an agent's tool loop asks the same
    question (its user's last message) on every step, and the dropped history changes only
    at a compaction, so most steps need no search at all."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str, str, int, int], list[Snippet]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str, int, int]) -> list[Snippet] | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[str, str, str, int, int], snippets: list[Snippet]) -> None:
        with self._lock:
            self._items[key] = snippets
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """A deleted session's snippets leave memory with it."""
        with self._lock:
            for key in [k for k in self._items if k[0] == session_id]:
                del self._items[key]


RECALL_MEMO = RecallMemo()


class MemoryLedger:
    """A ledger held in memory: the library's, and the proxy's for ephemeral sessions."""

    def __init__(self, outputs_dir: Path | None = None) -> None:
        self.plan = Plan()
        self.outputs_dir = outputs_dir
        self.dropped: list[str] = []
        self._terms: list[frozenset[str]] = []
        self._times: list[datetime] = []
        self.outputs: dict[str, str] = {}
        self.events: list[tuple[str, dict[str, Any], str]] = []

    def load_plan(self) -> Plan:
        return self.plan

    def save_plan(self, plan: Plan) -> None:
        self.plan = plan

    def offload(self, index: int, message: Message, tokens: int) -> str:
        name = output_name(message)
        self.outputs[name] = message.text
        self._remember(describe(message)[:DROPPED_TEXT_CHARS])
        if self.outputs_dir is not None:
            path = self.outputs_dir / name
            _write_once(path, message.text)
            return str(path)
        return f"memlane output {name} (kept in memory)"

    def record_dropped(self, items: Sequence[tuple[int, Message]]) -> None:
        texts = [describe(message)[:DROPPED_TEXT_CHARS] for _, message in items]
        for text, document in zip(texts, window_documents(texts), strict=True):
            self._remember(text, document)

    def _remember(self, text: str, document: str | None = None) -> None:
        self.dropped.append(text)
        self._terms.append(frozenset(terms(document or text)))
        self._times.append(datetime.now(UTC))

    def record_event(self, kind: str, payload: Mapping[str, Any], text: str = "") -> None:
        self.events.append((kind, dict(payload), text))

    def recalled(
        self, query: str, limit: int, chars: int, *, version: str = ""
    ) -> list[Snippet] | None:
        return self.recall(query, limit, chars, version=version)  # all in memory

    def recall(self, query: str, limit: int, chars: int, *, version: str = "") -> list[Snippet]:
        wanted = set(query_terms(query))
        if not wanted:
            return []
        scored = [
            (len(wanted & found) / len(wanted), text, at)
            for text, found, at in zip(self.dropped, self._terms, self._times, strict=True)
        ]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: -s[0])[:limit]
        return [Snippet(best_window(text, query, chars), score, at) for score, text, at in ranked]


def _write_once(path: Path, text: str) -> None:
    """An offloaded output is named by its content: a file already there holds the same."""
    if not path.exists():
        write_atomic(path, text)


class OutputNotFound(Exception):
    """No offloaded tool output with that id in that session."""


def offloaded_outputs(store: MessageLog, session_id: str) -> list[dict[str, Any]]:
    """The session's offloaded tool outputs (newest last), without their content."""
    return [
        {
            "id": e.id,
            "created_at": e.created_at.isoformat(),
            **{k: v for k, v in e.payload.items() if k != "content"},
        }
        for e in store.list_events(session_id, kind=EVENT_OFFLOADED)
    ]


def home_relative(path: Path, home: Path) -> str:
    """`path` as the model may see it: from the data home on (`$MEMLANE_HOME/sessions/…`),
    never the absolute home, whose path names the user and the machine's layout."""
    try:
        return f"$MEMLANE_HOME/{path.relative_to(home).as_posix()}"
    except ValueError:
        return path.name


def outputs_folder(settings: Settings, session: Session) -> Path:
    """The one folder a session's offloaded tool outputs are written to and read from."""
    return session_dir(settings.sessions_path, session.key, session.tenant) / OUTPUTS_FOLDER


def offloaded_output(store: MessageLog, session_id: str, event_id: int, *, folder: Path) -> str:
    """The full text of one offloaded tool output: from its file, or from the event itself.

    The file is looked up by its name in the session's own `folder`, never at the path the
    event holds: an event can come from an imported file, and a path in it
    (`/etc/shadow`, `../other-session/…`) must not make memlane read anything else."""
    for event in store.list_events(session_id, kind=EVENT_OFFLOADED):
        if event.id != event_id:
            continue
        if "content" in event.payload:
            return str(event.payload["content"])
        path = confined_output(folder, event.payload.get("path"))
        if path is None:
            raise OutputNotFound(
                f"the output file of event {event_id} is not in this session's folder {folder}: "
                "memlane reads offloaded outputs from there only"
            )
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise OutputNotFound(f"the output file of event {event_id} is gone: {exc}") from None
    raise OutputNotFound(f"no offloaded tool output {event_id} in session {session_id}")


def confined_output(folder: Path, recorded: object) -> Path | None:
    """The file named by `recorded`'s last part inside `folder`, or None when that name
    cannot be a file there (empty, `.`/`..`, or a link that leads out of it)."""
    name = PurePath(str(recorded)).name if isinstance(recorded, str) else ""
    if name in ("", ".", "..") or not name.endswith(OUTPUT_SUFFIX):
        return None
    path = folder / name
    if path.resolve().parent != folder.resolve():
        return None
    return path

"""The per-session state block (pinned, anchor, todo, spec), injected append-only.

Every managed turn carries a `<memlane_state>` block built from the session's
state texts (pinned.md + the harness AGENTS.md, summary.md as the anchor,
todo.md, and the Spec Mode instruction until the spec is approved).

Prompt caches only hit while what was sent before stays a byte-identical
prefix, so the block is never edited in place:

- a block is appended after the request's last message only when its text
  differs from the last block sent; it is stored as a `state`-origin message
  right after the client messages of that turn (the transcript shows what the
  model saw), and listed in the session state `state_blocks` with the number
  of client messages it followed;
- on later turns, every listed block is re-inserted at the place it had: after
  the same number of client messages. The client's resent history plus the
  re-inserted blocks then reproduce exactly what went upstream before.

When the client edits its history (the store supersedes the tail), the blocks
sent after the edit point are dropped from the list. Reading the list is one
small state read per turn, however long the session.

The texts live in files (`files.scaffold`) or, for a store shared by several
proxies, in the store's session state: one small interface, `StateTexts`, with
both implementations.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from memlane.config import Settings
from memlane.engine import threads
from memlane.engine.fence import state_text
from memlane.engine.runtime import Runtime
from memlane.engine.turn import Turn
from memlane.files.scaffold import FileTexts, normalize_escapes, read_agents_md
from memlane.store import NewMessage, SessionNotFound, SessionStore, SyncResult
from memlane.store.transcript import fingerprints_digest
from memlane.types import Message, Role, Session, Wire

STATE_NAMES = ("todo", "pinned", "summary", "spec_approved")
EDITABLE = ("todo", "pinned", "summary")

SPEC_PROMPT = (
    "Spec Mode is on for this session. Before changing any code or file, write a "
    "reviewable specification: the goal, the approach, the files you will touch, and "
    "how the result will be verified. Then stop and wait for the user's approval; do not "
    "edit anything until the spec is approved."
)
"""What the model reads while Spec Mode is on and the spec is not approved yet."""

EMPTY_BLOCK = "<memlane_state>\n</memlane_state>"
"""Sent once when every state text was cleared, so the model stops following the old ones."""

TRUTHY = frozenset({"1", "true", "yes", "on"})

META = "scaffold"
"""Session metadata key set to `on` once a request of the session got the scaffold."""


@dataclass(frozen=True, slots=True)
class SessionRef:
    """How each `StateTexts` finds a session: files by tenant and key, the store by id."""

    key: str
    id: str | None
    tenant: str = ""


class StateTexts(Protocol):
    """Where a session's todo / pinned / summary / spec approval are kept."""

    def read(self, ref: SessionRef, state: Mapping[str, str] | None = None) -> dict[str, str]:
        """Present texts by name (`STATE_NAMES`), normalised; `state`: the session's stored
        state, when the caller has read it already."""
        ...

    def write(self, ref: SessionRef, name: str, value: str | None, *, durable: bool = True) -> None:
        """Set one text (normalised); None or empty removes it. `durable=False`: the text
        comes again with the next request, so a crash of the machine may lose it."""
        ...

    def remove(self, ref: SessionRef) -> None:
        """Forget all of the session's texts."""
        ...


class FileStateTexts:
    """Human-editable files in the session folder (the embedded default)."""

    def __init__(self, settings: Settings) -> None:
        self.files = FileTexts(settings.sessions_path)

    def read(self, ref: SessionRef, state: Mapping[str, str] | None = None) -> dict[str, str]:
        return self.files.read(ref.key, ref.tenant)

    def write(self, ref: SessionRef, name: str, value: str | None, *, durable: bool = True) -> None:
        self.files.write(ref.key, name, value, ref.tenant, durable=durable)

    def remove(self, ref: SessionRef) -> None:
        self.files.remove(ref.key, ref.tenant)


class StoreStateTexts:
    """The store's session state: shared by every proxy replica on one PostgreSQL."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def read(self, ref: SessionRef, state: Mapping[str, str] | None = None) -> dict[str, str]:
        if ref.id is None:
            return {}
        if state is None:
            state = self.store.get_state(ref.id)
        return {k: normalize_escapes(v) for k, v in state.items() if k in STATE_NAMES}

    def write(self, ref: SessionRef, name: str, value: str | None, *, durable: bool = True) -> None:
        # `durable` is the store's commit's matter here
        if ref.id is None:
            return
        self.store.set_state(ref.id, name, normalize_escapes(value) if value else None)

    def remove(self, ref: SessionRef) -> None:
        if ref.id is None:
            return
        for name in STATE_NAMES:
            self.store.set_state(ref.id, name, None)


def state_texts(rt: Runtime) -> StateTexts:
    """The configured `StateTexts`: auto means the store for PostgreSQL, files otherwise."""
    choice = rt.settings.scaffold_store
    if choice == "auto":
        choice = "store" if rt.store_kind == "postgres" else "files"
    if choice == "store":
        return StoreStateTexts(rt.store)
    return FileStateTexts(rt.settings)


# --- reading and editing a session's texts (admin API, CLI) ---------------------------


def ref_of(session: Session) -> SessionRef:
    return SessionRef(session.key, session.id, session.tenant)


def read_texts(rt: Runtime, session: Session) -> dict[str, str]:
    return state_texts(rt).read(ref_of(session))


def set_text(rt: Runtime, session: Session, name: str, value: str | None) -> str | None:
    """Set todo / pinned / summary (capped like the proxy caps them); returns what was kept."""
    if name not in EDITABLE:
        raise ValueError(f"unknown state text {name!r}: use one of {', '.join(EDITABLE)}")
    kept = _cap(normalize_escapes(value), _limit(rt.settings, name)) if value else None
    state_texts(rt).write(ref_of(session), name, kept)
    return kept


def approve_spec(rt: Runtime, session_id: str) -> Session:
    """Mark the session's spec approved: Spec Mode stops asking for one from the next turn."""
    session = rt.store.get_session(session_id) or rt.store.find_session(session_id)
    if session is None:
        raise SessionNotFound(f"no session {session_id!r}: see `memlane sessions list`")
    state_texts(rt).write(ref_of(session), "spec_approved", "1")
    return session


def forget_texts(rt: Runtime, session: Session) -> None:
    """Remove the session's state texts (when the session is deleted)."""
    state_texts(rt).remove(ref_of(session))


# --- the block -------------------------------------------------------------------------


def render_block(parts: Sequence[tuple[str, str]]) -> str:
    """`<memlane_state>` with one tag per non-empty part, in the given order; no text can
    close a tag or the block, or start a role line (`fence.state_text`)."""
    body = [f"<{tag}>\n{state_text(text.strip())}\n</{tag}>" for tag, text in parts if text.strip()]
    if not body:
        return ""
    return "<memlane_state>\n" + "\n".join(body) + "\n</memlane_state>"


def block_for(settings: Settings, texts: dict[str, str], *, spec_mode: bool) -> str:
    """The state block for these texts and settings; empty when there is nothing to say."""
    parts: list[tuple[str, str]] = []
    if settings.pinned_enabled:
        pinned = [texts.get("pinned", ""), read_agents_md(settings.harness_root)]
        merged = "\n\n".join(p.strip() for p in pinned if p.strip())
        parts.append(("pinned", _cap(merged, settings.pinned_max_chars)))
    if settings.anchor_enabled:
        parts.append(("anchor", _cap(texts.get("summary", ""), settings.anchor_max_chars)))
    if settings.todo_enabled:
        parts.append(("todo", _cap(texts.get("todo", ""), settings.todo_max_chars)))
    if spec_mode and not texts.get("spec_approved"):
        parts.append(("spec", SPEC_PROMPT))
    return render_block(parts)


LIMITS = {"todo": "todo_max_chars", "pinned": "pinned_max_chars", "summary": "anchor_max_chars"}
"""The setting that caps each editable text (`set_text` cuts a longer one to it)."""


def _limit(settings: Settings, name: str) -> int:
    limit: int = getattr(settings, LIMITS[name])
    return limit


def cut_at(settings: Settings, name: str, value: str | None) -> int | None:
    """The length `set_text` cuts `value` to (its setting, `LIMITS`) when it is longer;
    None when it is kept whole. Every face that sets a text says so with this."""
    limit = _limit(settings, name)
    return limit if value and len(normalize_escapes(value)) > limit else None


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = "\n[… truncated by memlane]"
    return text[: max(0, limit - len(marker))] + marker if limit > len(marker) else text[:limit]


def any_part_enabled(settings: Settings) -> bool:
    return (
        settings.pinned_enabled
        or settings.anchor_enabled
        or settings.todo_enabled
        or settings.spec_mode
    )


# --- placing blocks so that earlier requests stay a prefix ---------------------------------


@dataclass(frozen=True, slots=True)
class Placed:
    """A block that was sent, and how many client messages preceded it then (-1: never replay)."""

    after: int
    message: Message
    prefix: str = ""
    """The digest of those client messages (`prefix_digest`); empty in blocks kept before
    it was recorded."""


def prefix_digest(client: Sequence[Message], count: int) -> str:
    """A digest of the first `count` client messages: a block whose prefix a request
    still sends was not cut off by an edit, and the stored history need not be read to
    know it (reading every stored message's hash took 9% of the event loop's time in a
    600-message session)."""
    return fingerprints_digest([m.fingerprint() for m in client[:count]])


BLOCKS_STATE = "state_blocks"
"""Session-state entry listing the blocks sent so far, so a turn never re-reads the history."""


def load_blocks(state: dict[str, str]) -> list[Placed]:
    try:
        rows = json.loads(state.get(BLOCKS_STATE) or "[]")
        return [_placed(*row) for row in rows]
    except (ValueError, TypeError):
        return []  # an unreadable index costs one cache miss upstream, never a failed turn


def _placed(after: int, role: Role, wire: Wire, text: str, prefix: str = "") -> Placed:
    return Placed(int(after), Message(role, text, origin="state", wire=wire), str(prefix))


def dump_blocks(placed: Sequence[Placed]) -> str:
    rows = [[p.after, p.message.role, p.message.wire, p.message.text, p.prefix] for p in placed]
    return json.dumps(rows, ensure_ascii=False)


def weave(messages: Sequence[Message], placed: Sequence[Placed]) -> list[Message]:
    """Insert each block before the client message that followed it when it was sent.

    Blocks placed after more client messages than this request carries are left
    out (they belong to a longer history than the one the client sent).
    """
    out: list[Message] = []
    pending = list(placed)
    seen = 0
    for message in messages:
        if message.origin == "client":
            while pending and pending[0].after <= seen:
                placed_before = pending.pop(0)
                if placed_before.after >= 0:
                    out.append(placed_before.message)
            seen += 1
        out.append(message)
    out.extend(p.message for p in pending if 0 <= p.after <= seen)
    return out


Writes = list[Callable[[], object]]
"""What a turn's scaffold keeps for later requests (its TODO text, the block it appended
and the list of blocks placed), in order: run after the turn's own messages are stored,
since the block follows them in the transcript."""

Edit = Callable[[], int | None]
"""How many of the request's client messages are stored already when the request edits
the stored history (the stored rest is superseded); None when it does not. Asked only
when blocks were placed (a store read)."""


async def add_state_block(rt: Runtime, turn: Turn, messages: list[Message]) -> list[Message]:
    """Re-insert earlier blocks and append a new one if the state changed (one store hop)."""
    if not applies(rt, turn):
        return messages
    return await threads.to_thread(with_state_block, rt, turn, messages)


def with_state_block(rt: Runtime, turn: Turn, messages: list[Message]) -> list[Message]:
    """`add_state_block` for a caller already off the event loop, once the turn is stored."""
    if not applies(rt, turn):
        return messages
    shaped, writes = state_block(rt, turn, messages, edit=lambda: edit_of(turn.synced))
    for write in writes:
        write()
    return shaped


def edit_of(synced: SyncResult | None) -> int | None:
    """`Edit` from what storing the turn did."""
    return synced.matched if synced is not None and synced.superseded else None


def applies(rt: Runtime, turn: Turn) -> bool:
    return turn.managed and (any_part_enabled(rt.settings) or _spec_header(turn))


def _spec_header(turn: Turn) -> bool:
    return turn.flags.get("spec-mode", "").strip().lower() in TRUTHY


def state_block(
    rt: Runtime, turn: Turn, messages: list[Message], *, edit: Edit
) -> tuple[list[Message], Writes]:
    """The request with its earlier blocks woven back and a new one appended when the
    state changed, and the writes that keep this for later requests (read only: the
    caller runs the writes once the turn's own messages are stored)."""
    settings = rt.settings
    texts_store = state_texts(rt)
    writes: Writes = []
    # ephemeral: read, never write
    session = turn.session or rt.store.find_session(turn.key, tenant=turn.tenant)
    ref = SessionRef(turn.key, session.id if session else None, turn.tenant)
    texts = texts_store.read(ref, turn.stored_state(rt.store) if turn.session else None)
    header_todo = turn.flags.get("todo")
    if header_todo is not None and settings.todo_enabled:
        todo = _cap(normalize_escapes(header_todo.strip()), settings.todo_max_chars)
        if not turn.ephemeral and texts.get("todo", "") != todo:
            # from the header, which the client sends with every request: not synced (two
            # fsyncs held the store's writer, and every batch behind it, for a new session)
            keep = functools.partial(texts_store.write, ref, "todo", todo or None, durable=False)
            writes.append(keep)
        texts["todo"] = todo
    block = block_for(settings, texts, spec_mode=settings.spec_mode or _spec_header(turn))
    role: Role = "developer" if turn.wire == "responses" else "system"

    if turn.session is None:  # ephemeral: nothing stored, nothing to keep stable
        return ([*messages, _state_message(block, role, turn)] if block else messages), writes

    session_id = turn.session.id
    placed = load_blocks(turn.stored_state(rt.store))
    index_changed = False
    matched = _edit_point(placed, messages, edit) if placed and not turn.continued else None
    if matched is not None:
        live = [p for p in placed if p.after <= matched]  # the edited-away branch goes
        index_changed = len(live) != len(placed)
        placed = live
    out = list(messages) if turn.continued else weave(messages, placed)
    last = placed[-1].message.text if placed else None
    if block == (last or "") or (not block and last == EMPTY_BLOCK):
        if index_changed:
            writes.append(functools.partial(_keep_blocks, rt, session_id, placed))
        return out, writes
    new = _state_message(block or EMPTY_BLOCK, role, turn)
    client = [m for m in messages if m.origin == "client"]
    after = -1 if turn.continued else len(client)
    placed.append(Placed(after, new, "" if turn.continued else prefix_digest(client, after)))
    writes.append(functools.partial(_append_block, rt, session_id, new))
    writes.append(functools.partial(_keep_blocks, rt, session_id, placed))
    return [*out, new], writes


def _edit_point(placed: Sequence[Placed], messages: Sequence[Message], edit: Edit) -> int | None:
    """Where the client's history departs from the stored one (`edit`: it reads every
    stored message's hash), or None. Not read when the request still sends the client
    messages the latest block followed, as they were: then no block was cut off."""
    latest = max((p for p in placed if p.after >= 0), key=lambda p: p.after, default=None)
    if latest is not None and latest.prefix:
        client = [m for m in messages if m.origin == "client"]
        if len(client) >= latest.after and prefix_digest(client, latest.after) == latest.prefix:
            return None
    return edit()


def _append_block(rt: Runtime, session_id: str, block: Message) -> None:
    rt.store.append_messages(session_id, [NewMessage(block, rt.tokenizer.count_message(block))])


def _keep_blocks(rt: Runtime, session_id: str, placed: Sequence[Placed]) -> None:
    rt.store.set_state(session_id, BLOCKS_STATE, dump_blocks(placed))


def pending_block(rt: Runtime, session: Session) -> Message | None:
    """The block the session's next request would append (its texts changed since the last
    block sent), read only; None when it would append none. Request headers (a TODO, Spec
    Mode) are not known here: only the stored texts and the settings count."""
    texts = state_texts(rt).read(ref_of(session))
    block = block_for(rt.settings, texts, spec_mode=rt.settings.spec_mode)
    placed = load_blocks(rt.store.get_state(session.id))
    last = placed[-1].message.text if placed else None
    if block == (last or "") or (not block and last in (None, EMPTY_BLOCK)):
        return None
    wire = placed[-1].message.wire if placed else "chat"
    role: Role = "developer" if wire == "responses" else "system"
    return Message(role=role, text=block or EMPTY_BLOCK, origin="state", wire=wire)


def _state_message(text: str, role: Role, turn: Turn) -> Message:
    return Message(role=role, text=text, origin="state", wire=turn.wire)

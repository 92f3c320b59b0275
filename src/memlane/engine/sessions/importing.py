"""Import a session from `memlane sessions export` output, trusting nothing in the file.

An export file may come from anyone, so every part of it is checked as the proxy checks
a request: roles, kinds and origins are the ones memlane knows; keys and namespaces hold
no control characters and fit `MAX_KEY_CHARS`; no namespace is another session's own
(`session:…`); an offloaded output's file is named, never located, by the file (the
reader looks in the session's own folder, `ledger.offloaded_output`).

The file is read as a stream, one line at a time, and each line written as it is
checked, all inside one transaction: memory stays at about one line, and a bad line
anywhere rolls the whole import back. A line may be as long as the largest request the
proxy accepts (`max_body_bytes`, 32 MiB: one message cannot be larger), and a file at
most `MAX_FILE_BYTES`; past either the import stops with the line's number.

The exported name is kept unless another session of the namespace holds it already
(`naming.holder`): the copy is then named `<name>-2` (`-3`…) so that `@@name` still
finds one session, and its metadata keeps the exported name as `imported_name`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import PurePath
from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from memlane.engine.sessions.naming import free_name
from memlane.store import NewMessage, Store
from memlane.store.codec import message_from_json
from memlane.text.redact import redact, redact_fields
from memlane.types import Session
from memlane.types.keys import OWN_NAMESPACE, plain_key_problem
from memlane.types.messages import Kind, Origin, Role, Wire

IMPORTED_NAME = "imported_name"
"""Session metadata: the exported name, set when the import gave the copy another one."""
EXPORT_FORMAT = "memlane-session"
EXPORT_VERSION = 1
MAX_FILE_BYTES = 256 * 1024 * 1024
"""Largest export file imported (256 MiB): far above a real session's transcript, low
enough that a mistaken or hostile file cannot fill the disk through the store."""
DEFAULT_LINE_BYTES = 32 * 1024 * 1024
"""Largest line when the caller names none: the proxy's default body limit."""
OFFLOADED_KIND = "governance.tool_output"
NAME_CHARS = 200
"""Longest event kind or state name; memlane's own are under 40."""


class ImportProblem(ValueError):
    """The file cannot be imported; the message names the line and what is wrong."""


class _SessionLine(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["session"]
    format: Literal["memlane-session"]
    version: int = Field(ge=1, le=EXPORT_VERSION)
    id: str
    key: str = Field(min_length=1)
    namespace: str
    title: str | None = None
    parent_id: str | None = None
    summary: str = ""
    summarized_count: int = Field(default=0, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)
    created_at: str | None = None
    updated_at: str | None = None


class _MessageData(BaseModel):
    """The fields of a message memlane reads back, each of a kind memlane writes."""

    model_config = ConfigDict(extra="ignore")
    role: Role
    text: str = ""
    kind: Kind = "message"
    tool_calls: list[tuple[str, str, str]] = Field(default_factory=list)
    call_id: str | None = None
    name: str | None = None
    raw: dict[str, Any] | None = None
    wire: Wire = "internal"
    origin: Origin = "client"
    continues: bool = False


class _MessageLine(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["message"]
    position: int = Field(ge=0)
    status: Literal["ok", "failed", "superseded"] = "ok"
    token_count: int = Field(default=0, ge=0)
    created_at: str | None = None
    message: _MessageData


class _EventLine(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["event"]
    kind: str = Field(min_length=1, max_length=NAME_CHARS, pattern=r"^[\x21-\x7e]+$")
    payload: dict[str, Any] = Field(default_factory=dict)
    text: str = ""
    created_at: str | None = None


class _StateLine(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["state"]
    name: str = Field(min_length=1, max_length=NAME_CHARS, pattern=r"^[\x21-\x7e]+$")
    value: str


_Line = Annotated[_MessageLine | _EventLine | _StateLine, Field(discriminator="type")]
_LINE = TypeAdapter(_Line)


def stream_lines(
    stream: IO[bytes], *, max_line: int = DEFAULT_LINE_BYTES, max_file: int = MAX_FILE_BYTES
) -> Iterator[str]:
    """The lines of `stream` as text, one at a time; ImportProblem at the first line over
    `max_line` bytes, past `max_file` bytes in all, or not UTF-8 (nothing longer is read)."""
    total = 0
    number = 0
    while True:
        raw = stream.readline(max_line + 1)
        if not raw:
            return
        number += 1
        total += len(raw)
        if len(raw) > max_line:
            raise ImportProblem(
                f"line {number} is longer than {max_line:,} bytes, the most one line may hold "
                "(one message, as large as the largest request the proxy accepts)"
            )
        if total > max_file:
            raise ImportProblem(
                f"the file is larger than {max_file:,} bytes (at line {number}), the most one "
                "import reads"
            )
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ImportProblem(f"line {number} is not UTF-8 text") from None


def import_lines(
    store: Store, lines: Iterable[str], *, key: str | None = None, tenant: str = ""
) -> Session:
    """Recreate an exported session (under `key` if given) in `tenant`: every line checked
    as it is written, in one transaction, so a bad file changes nothing."""
    numbered = _entries(lines)
    head = _head(numbered)
    new_key = key or head.key
    namespace = _namespace(head, new_key)
    problem = plain_key_problem(new_key)
    if problem:
        raise ImportProblem(f"the session key {new_key!r} {problem}: import it with --key")
    if store.find_session(new_key, tenant=tenant) is not None:
        raise ImportProblem(
            f"a session with key {new_key!r} already exists: delete it first, "
            "or import under another key with --key"
        )
    with store.transaction():
        session = store.ensure_session(new_key, namespace=namespace, tenant=tenant)
        _write_body(store, session, numbered)
        _finish(store, session, head)
    created = store.get_session(session.id)
    assert created is not None
    return created


def _entries(lines: Iterable[str]) -> Iterator[tuple[int, Any]]:
    """Each non-blank line's number and decoded JSON."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportProblem(f"line {number} is not JSON ({exc.msg})") from None
        except RecursionError:
            raise ImportProblem(f"line {number} nests too deeply to be an export") from None


def _head(numbered: Iterator[tuple[int, Any]]) -> _SessionLine:
    for number, data in numbered:
        try:
            return _SessionLine.model_validate(data)
        except ValidationError as exc:
            raise ImportProblem(
                f"line {number} is not the session header of a memlane export: {_short(exc)}"
            ) from None
    raise ImportProblem("the file is empty: expected a memlane session export (JSON lines)")


def _namespace(head: _SessionLine, new_key: str) -> str:
    """The imported session's namespace. Its own (`session:<exported key>`) follows it to
    its new key; another session's own would let it read that session's memories."""
    if head.namespace == OWN_NAMESPACE + head.key:
        return OWN_NAMESPACE + new_key
    if head.namespace.startswith(OWN_NAMESPACE):
        raise ImportProblem(
            f"the namespace {head.namespace!r} is another session's own: memlane gives each "
            f"session without a repo its own {OWN_NAMESPACE}<key>; edit the header's namespace"
        )
    problem = plain_key_problem(head.namespace)
    if problem:
        raise ImportProblem(f"the namespace {head.namespace!r} {problem}")
    return head.namespace


def _write_body(store: Store, session: Session, numbered: Iterator[tuple[int, Any]]) -> None:
    last_position = -1
    for number, data in numbered:
        try:
            item = _LINE.validate_python(data)
        except ValidationError as exc:
            raise ImportProblem(
                f"line {number} is not an entry of a memlane export: {_short(exc)}"
            ) from None
        if isinstance(item, _MessageLine):
            if item.position <= last_position:
                raise ImportProblem(f"line {number}: message positions are not increasing")
            last_position = item.position
            message = message_from_json(item.message.model_dump())
            (stored,) = store.append_messages(session.id, [NewMessage(message, item.token_count)])
            if item.status != "ok":
                store.set_message_status(stored.id, item.status)
        elif isinstance(item, _EventLine):
            store.add_event(session.id, item.kind, _payload(item), text=item.text)
        else:
            store.set_state(session.id, item.name, item.value)


def _payload(event: _EventLine) -> dict[str, Any]:
    """The event's payload; an offloaded output keeps only its file's name (the reader
    finds the file in this session's own folder, whatever path the file claimed)."""
    payload = dict(event.payload)
    if event.kind == OFFLOADED_KIND and "path" in payload:
        payload["path"] = PurePath(str(payload["path"])).name
    return payload


def _finish(store: Store, session: Session, head: _SessionLine) -> None:
    """The session's title, summary and metadata from the export, redacted as memlane's
    own are when they are made (an export from an older memlane, or written by hand, may
    carry a credential in them); its messages are kept as sent, like a transcript's."""
    metadata = {**redact_fields(head.metadata), "imported_from": head.id}
    if head.parent_id:
        metadata["imported_parent_id"] = head.parent_id
    metadata.pop(IMPORTED_NAME, None)  # an earlier import's: this one says its own
    name = metadata.get("name")
    if isinstance(name, str) and name:
        free = free_name(
            store, name, namespace=session.namespace, tenant=session.tenant, exclude=session.id
        )
        if free != name:
            metadata["name"] = free
            metadata[IMPORTED_NAME] = name
    store.update_session(
        session.id,
        title=redact(head.title) if head.title is not None else None,
        summary=redact(head.summary),
        summarized_count=head.summarized_count,
        metadata=metadata,
    )
    store.add_usage(
        session.id,
        prompt_tokens=head.prompt_tokens,
        completion_tokens=head.completion_tokens,
        cost_usd=head.cost_usd,
    )


def _short(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "line"
    return f"{where}: {first['msg']}"

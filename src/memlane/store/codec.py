"""Plain-value encodings every backend shares, so `dump` of one `load`s into another.

A stored message keeps the whole `Message` (with its `raw` wire item) as JSON;
timestamps travel as ISO-8601 UTC text; a vector travels as base64 of its
little-endian float32 bytes. Backends use these helpers for their columns and
for the rows of `Store.dump` / `Store.load`, whose shape is pinned here:

- sessions: the `Session` fields (metadata as an object, timestamps as text)
- session_state: session_id, name, value
- messages: id, session_id, position, role, kind, origin, wire, content (the
  `message_to_json` object), text, content_hash, token_count, status, created_at
- events: id, session_id, kind, payload (an object), text, created_at
- facts: the `Fact` fields (timestamps as text; `source_turns` as a JSON array text or null;
  `cites` as JSON text `{"root", "head", "noted_at", "files": [{"path", "blob"}]}` or null)
- vectors: kind, ref, model, dim, vec (base64)
- meta: key, value
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np
import orjson

from memlane.store.base import StoreError, Vector
from memlane.types import Citations, CitedFile, Fact, Message, ToolCall


def now() -> datetime:
    return datetime.now(UTC)


def ts_to_text(value: datetime) -> str:
    """ISO-8601 in UTC with microseconds: sorts as text in time order."""
    zone = value.tzinfo
    if zone is None:
        value = value.replace(tzinfo=UTC)
    elif zone is not UTC:  # every stamp `now` makes is in UTC already: no conversion
        value = value.astimezone(UTC)
    return value.isoformat(timespec="microseconds")


def ts_from_text(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def moment(value: str | datetime) -> datetime:
    """A timestamp column's value: ISO text (SQLite, dumps) or a `datetime` (PostgreSQL)."""
    return ts_from_text(value) if isinstance(value, str) else value


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""`json.dumps` with options builds an encoder per call; every stored message is dumped."""
_ORJSON_STRICT = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
"""orjson refuses what the standard encoder refuses (a `datetime`, a dataclass, a subclass
of a plain type), so those go the standard encoder's way and fail, or not, as it says."""


def dumps(value: Any) -> str:
    """Compact JSON that keeps non-ASCII text readable, as the standard encoder writes it.

    orjson writes it (a stored message with its wire form: 0.8 µs against 8.7); what orjson
    refuses (an integer beyond 64 bits, a key that is not text, a lone surrogate, a type
    above) is left to the standard encoder. The differences: a float that is not finite is
    written `null` (the standard encoder wrote `NaN`, which strict JSON readers refuse), a
    small float's exponent without its leading zero (`2.5e-7`, not `2.5e-07`: the same
    number), and an `Enum` member or a `UUID` as its value, where the standard encoder
    refused them. Nothing compares stored JSON as text."""
    try:
        return orjson.dumps(value, option=_ORJSON_STRICT).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return _COMPACT.encode(value)


def message_to_json(message: Message) -> dict[str, Any]:
    """Every field of the message, `raw` included, so it round-trips exactly."""
    return {
        "role": message.role,
        "text": message.text,
        "kind": message.kind,
        "tool_calls": [[c.id, c.name, c.arguments] for c in message.tool_calls],
        "call_id": message.call_id,
        "name": message.name,
        "raw": dict(message.raw) if message.raw is not None else None,
        "wire": message.wire,
        "origin": message.origin,
        **({"continues": True} if message.continues else {}),
    }


def message_from_json(data: Mapping[str, Any]) -> Message:
    return Message(
        role=data["role"],
        text=data.get("text", ""),
        kind=data.get("kind", "message"),
        tool_calls=tuple(ToolCall(*call) for call in data.get("tool_calls", ())),
        call_id=data.get("call_id"),
        name=data.get("name"),
        raw=data.get("raw"),
        wire=data.get("wire", "internal"),
        origin=data.get("origin", "client"),
        continues=bool(data.get("continues", False)),
    )


FACT_COLUMNS = (
    "id",
    "scope",
    "conversation_id",
    "role",
    "text",
    "created_at",
    "updated_at",
    "deleted",
    "replaced_by",
    "summary_kind",
    "source_session",
    "source_message",
    "content_hash",
    "valid_from",
    "valid_to",
    "supersedes",
    "source_turns",
    "cites",
)
FACT_TIMES = ("created_at", "updated_at", "valid_from", "valid_to")
"""The fact columns that hold a moment (`valid_from` and `valid_to` may be empty)."""


def fact_to_row(fact: Fact) -> dict[str, Any]:
    # by name, not `asdict`: its deep copy cost more than the rest of a memory's write
    row = {name: getattr(fact, name) for name in FACT_COLUMNS}
    for name in FACT_TIMES:
        value = row[name]
        row[name] = None if value is None else ts_to_text(value)
    row["deleted"] = bool(fact.deleted)
    row["source_turns"] = links_to_text(fact.source_turns)
    row["cites"] = cites_to_text(fact.cites)
    return row


def cites_to_json(cites: Citations) -> dict[str, Any]:
    """A memory's cited files as plain data: the `cites` column, the front matter, the API."""
    return {
        "root": cites.root,
        "head": cites.head,
        "noted_at": ts_to_text(cites.noted_at),
        "files": [{"path": f.path, "blob": f.blob} for f in cites.files],
    }


def cites_from_json(data: Mapping[str, Any]) -> Citations:
    """The inverse of `cites_to_json`; raises ValueError (or KeyError, TypeError) on a bad
    shape, which a caller reading a person's file reports."""
    files = data["files"]
    if not isinstance(files, list):
        raise ValueError("files must be a list")
    head = data.get("head")
    noted = data["noted_at"]
    return Citations(
        root=str(data["root"]),
        files=tuple(CitedFile(str(f["path"]), str(f["blob"])) for f in files),
        noted_at=ts_from_text(noted.isoformat() if isinstance(noted, datetime) else str(noted)),
        head=None if head is None else str(head),
    )


def cites_to_text(cites: Citations | None) -> str | None:
    """The `cites` column (JSON text; none: NULL)."""
    return None if cites is None else dumps(cites_to_json(cites))


def cites_from_text(value: Any) -> Citations | None:
    """`cites` as stored (JSON text), dumped (text or an object), or missing."""
    if value is None or value == "":
        return None
    return cites_from_json(json.loads(value) if isinstance(value, str) else value)


def links_to_text(ids: Sequence[str]) -> str | None:
    """Entry ids as the `source_turns` column holds them (a JSON array; none: NULL)."""
    return json.dumps(list(ids)) if ids else None


def links_from_text(value: Any) -> tuple[str, ...]:
    """`source_turns` as stored (JSON text), dumped, or missing (a row from before it)."""
    if value is None or value == "":
        return ()
    items = json.loads(value) if isinstance(value, str) else value
    return tuple(str(item) for item in items)


def vector_to_bytes(vector: Vector) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def vector_from_bytes(blob: bytes) -> Vector:
    return cast(Vector, np.frombuffer(blob, dtype="<f4").astype(np.float32))


def vector_to_text(vector: Vector) -> str:
    return base64.b64encode(vector_to_bytes(vector)).decode("ascii")


def vector_from_text(text: str) -> Vector:
    return vector_from_bytes(base64.b64decode(text))


def as_vector(vector: Vector | Any, *, what: str) -> Vector:
    """A finite 1-d float32 copy, or a clear error."""
    array = np.asarray(vector, dtype=np.float32)
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
        raise StoreError(f"{what}: a vector must be a non-empty 1-d array of finite numbers")
    return array

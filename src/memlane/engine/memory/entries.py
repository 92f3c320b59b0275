"""A new memory entry, stamped: what ingest, the CLI, the library and tools all create."""

from __future__ import annotations

from datetime import datetime

from memlane.files.memory_files import now_utc
from memlane.types import Fact, FactRole


def new_fact(
    *,
    scope: str,
    conversation_id: str,
    role: FactRole,
    text: str,
    fact_id: str,
    source_session: str | None = None,
    source_message: int | None = None,
    summary_kind: str | None = None,
    created_at: datetime | None = None,
    valid_from: datetime | None = None,
) -> Fact:
    """A fresh entry stamped now (or at `created_at`), true from `valid_from` (default:
    from when it was stamped)."""
    when = created_at or now_utc()
    return Fact(
        id=fact_id,
        scope=scope,
        conversation_id=conversation_id,
        role=role,
        text=text,
        created_at=when,
        updated_at=when,
        summary_kind=summary_kind,
        source_session=source_session,
        source_message=source_message,
        valid_from=valid_from,
    )

"""Scope strings: who may see a memory.

- `conv:<session id>`: one conversation (its turns, its rolling summary);
- `ns:<namespace>`: every conversation of a namespace (a repo, by default the
  session key itself); extracted facts live here unless `memory_fact_scope`
  says `conversation`;
- `global`: everything, added on purpose (CLI `--scope global`, the library).

A request recalls from its conversation, its namespace and `global` (as
`memory_scopes` allows); it never names another namespace, so namespaces never
see each other's memories.
"""

from __future__ import annotations

from memlane.config import Settings

GLOBAL = "global"
CONVERSATION_PREFIX = "conv:"
NAMESPACE_PREFIX = "ns:"


def conversation_scope(session_id: str) -> str:
    return f"{CONVERSATION_PREFIX}{session_id}"


def namespace_scope(namespace: str) -> str:
    return f"{NAMESPACE_PREFIX}{namespace}"


def fact_scope(settings: Settings, session_id: str, namespace: str) -> str:
    """Where facts extracted from this conversation are kept."""
    if settings.memory_fact_scope == "conversation":
        return conversation_scope(session_id)
    return namespace_scope(namespace)


def recall_scopes(settings: Settings, session_id: str | None, namespace: str) -> tuple[str, ...]:
    """The scopes a request of this conversation may recall from."""
    out: list[str] = []
    levels = settings.memory_scopes
    if "conversation" in levels and session_id is not None:
        out.append(conversation_scope(session_id))
    if "namespace" in levels:
        out.append(namespace_scope(namespace))
    if "global" in levels:
        out.append(GLOBAL)
    return tuple(out)


def parse_scope(text: str) -> str:
    """A scope as a person types it: `global`, `ns:<name>` or `conv:<session id>`."""
    value = text.strip()
    if value == GLOBAL:
        return value
    for prefix in (CONVERSATION_PREFIX, NAMESPACE_PREFIX):
        if value.startswith(prefix) and value[len(prefix) :].strip():
            return value
    raise ValueError(
        f"invalid scope {text!r}: use 'global', 'ns:<namespace>' or 'conv:<session id>'"
    )

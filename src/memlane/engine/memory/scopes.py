"""Scope strings: who may see a memory (the strings themselves: `types.scopes`).

- `conv:<session id>`: one conversation (its turns, its rolling summary);
- `ns:<namespace>`: every conversation of a namespace (a project: the repo a request
  names or the repository the agent works in, else the tenant's `default`,
  `proxy.identity`); extracted facts live here unless `memory_fact_scope` says
  `conversation`;
- `global`: everything of a tenant, added on purpose (CLI `--scope global`, the library).

Under credential tenancy a tenant's scopes are qualified with its id,
`t:<tenant>:conv:…`, `t:<tenant>:ns:…`, `t:<tenant>:global`, so no search of one
tenant can name another's memories, and a memory file says whose it is.

A request recalls from its conversation, its namespace and its tenant's `global`
(as `memory_scopes` allows); it never names another namespace or tenant, so
namespaces never see each other's memories.
"""

from __future__ import annotations

import re

from memlane.config import Settings
from memlane.types.scopes import (
    CONVERSATION_PREFIX,
    GLOBAL,
    NAMESPACE_PREFIX,
    TENANT_PREFIX,
    conversation_scope,
    global_scope,
    namespace_scope,
    qualified,
)

__all__ = [
    "CONVERSATION_PREFIX",
    "GLOBAL",
    "NAMESPACE_PREFIX",
    "TENANT_PREFIX",
    "conversation_scope",
    "fact_scope",
    "global_scope",
    "namespace_scope",
    "parse_scope",
    "qualified",
    "recall_scopes",
    "tenant_of",
    "unqualified",
]

_QUALIFIED = re.compile(r"^t:(?P<tenant>[0-9a-f]{32}):(?P<scope>.+)$", re.S)


def tenant_of(scope: str) -> str:
    """The tenant a stored scope belongs to ("" for an unqualified one)."""
    match = _QUALIFIED.match(scope)
    return match.group("tenant") if match else ""


def unqualified(scope: str) -> str:
    """A stored scope without its tenant (`t:<tenant>:ns:repo` -> `ns:repo`)."""
    match = _QUALIFIED.match(scope)
    return match.group("scope") if match else scope


def fact_scope(settings: Settings, session_id: str, namespace: str, tenant: str = "") -> str:
    """Where facts extracted from this conversation are kept."""
    if settings.memory_fact_scope == "conversation":
        return conversation_scope(session_id, tenant)
    return namespace_scope(namespace, tenant)


def recall_scopes(
    settings: Settings, session_id: str | None, namespace: str, tenant: str = ""
) -> tuple[str, ...]:
    """The scopes a request of this conversation may recall from."""
    out: list[str] = []
    levels = settings.memory_scopes
    if "conversation" in levels and session_id is not None:
        out.append(conversation_scope(session_id, tenant))
    if "namespace" in levels:
        out.append(namespace_scope(namespace, tenant))
    if "global" in levels:
        out.append(global_scope(tenant))
    return tuple(out)


def parse_scope(text: str) -> str:
    """A scope as a person types it: `global`, `ns:<name>` or `conv:<session id>`, each
    optionally qualified by a tenant (`t:<tenant id>:ns:<name>`)."""
    value = text.strip()
    match = _QUALIFIED.match(value)
    inner = match.group("scope") if match else value
    if inner == GLOBAL:
        return value
    for prefix in (CONVERSATION_PREFIX, NAMESPACE_PREFIX):
        if inner.startswith(prefix) and inner[len(prefix) :].strip():
            return value
    raise ValueError(
        f"invalid scope {text!r}: use 'global', 'ns:<namespace>' or 'conv:<session id>' "
        "(a tenant's: 't:<tenant id>:' before it)"
    )

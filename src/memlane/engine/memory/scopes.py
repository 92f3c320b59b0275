"""Scope strings: who may see a memory (the strings themselves: `types.scopes`).

- `conv:<session id>`: one conversation (its turns, its rolling summary);
- `ns:<namespace>`: every conversation of a namespace (a project: the repo a request
  names or the repository the agent works in, else the tenant's `default`,
  `proxy.identity`); extracted facts about the project live here unless
  `memory_fact_scope` says `conversation`;
- `global`: everything of a tenant: extracted facts about the user (who they are,
  preferences, people, habits: they follow the user into every project), and what was
  added on purpose (CLI `--scope global`, the library).

Under credential tenancy a tenant's scopes are qualified with its id,
`t:<tenant>:conv:…`, `t:<tenant>:ns:…`, `t:<tenant>:global`, so no search of one
tenant can name another's memories, and a memory file says whose it is.

A request recalls from its conversation, its namespace and its tenant's `global`
(as `memory_scopes` allows); it never names another namespace or tenant, so
namespaces never see each other's memories.
"""

from __future__ import annotations

from memlane.config import Settings
from memlane.engine.memory.extract import PROJECT, USER, About
from memlane.types.scopes import (
    CONVERSATION_PREFIX,
    GLOBAL,
    NAMESPACE_PREFIX,
    QUALIFIED,
    TENANT_PREFIX,
    check_scope,
    conversation_scope,
    global_scope,
    namespace_scope,
    qualified,
)

__all__ = [
    "CONVERSATION",
    "CONVERSATION_PREFIX",
    "GLOBAL",
    "NAMESPACE_PREFIX",
    "PROJECT",
    "TENANT_PREFIX",
    "USER",
    "about",
    "conversation_scope",
    "fact_scope",
    "global_scope",
    "namespace_scope",
    "parse_scope",
    "qualified",
    "recall_scopes",
    "tenant_of",
    "unqualified",
    "where",
]


def tenant_of(scope: str) -> str:
    """The tenant a stored scope belongs to ("" for an unqualified one)."""
    match = QUALIFIED.match(scope)
    return match.group("tenant") if match else ""


def unqualified(scope: str) -> str:
    """A stored scope without its tenant (`t:<tenant>:ns:repo` -> `ns:repo`)."""
    match = QUALIFIED.match(scope)
    return match.group("scope") if match else scope


CONVERSATION = "conversation"
"""What a memory of a conversation's scope is about, beside `USER` and `PROJECT`."""


def about(scope: str) -> tuple[str, str | None]:
    """Whom a memory of `scope` is about, and where: (`user`, None) for the tenant's global
    scope (recalled in every session), (`project`, the namespace) for a project's, and
    (`conversation`, the session id) for one conversation's."""
    inner = unqualified(scope)
    if inner == GLOBAL:
        return USER, None
    if inner.startswith(NAMESPACE_PREFIX):
        return PROJECT, inner.removeprefix(NAMESPACE_PREFIX)
    return CONVERSATION, inner.removeprefix(CONVERSATION_PREFIX)


def where(scope: str) -> str:
    """`about` in words, for a table: `user`, `project api`, `conversation 3f2a…`."""
    kind, name = about(scope)
    return kind if name is None else f"{kind} {name}"


def fact_scope(
    settings: Settings, session_id: str, namespace: str, tenant: str = "", label: About = PROJECT
) -> str:
    """Where facts extracted from this conversation are kept, by their `label`: a fact about
    the user in the tenant's `global` (recalled in every session), one about the project in
    its namespace (never seen by another). `memory_fact_scope = conversation` keeps both in
    the conversation; a user fact stays in the namespace when `memory_scopes` recalls no
    `global` (where nothing would find it)."""
    if settings.memory_fact_scope == "conversation":
        return conversation_scope(session_id, tenant)
    if label == USER and "global" in settings.memory_scopes:
        return global_scope(tenant)
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
    return check_scope(text.strip())

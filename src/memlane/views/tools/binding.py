"""Who a tool call acts for: the namespace it is bound to, and the session it speaks from.

Every memory and session tool (the MCP server's, the proxy's own) receives a
`Binding` and asks it, never the caller, what it may see. A binding holds one
namespace; memories of another namespace, and sessions of another namespace,
are invisible unless the server was started with `--all-namespaces` *and* the
call names them. A binding also holds one tenant (`engine.tenancy`): scopes it
names are that tenant's (`t:<tenant>:ns:…`), and nothing of another tenant is
visible, whatever the namespace settings. Access rules live only here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from memlane.engine import threads
from memlane.engine.memory import scopes as scoping
from memlane.engine.memory.scopes import (
    CONVERSATION_PREFIX,
    GLOBAL,
    NAMESPACE_PREFIX,
)
from memlane.store import SessionStore
from memlane.types import Fact, Session

NAMESPACE_WORDS = frozenset({"namespace", "ns", "project", "repo", "repository"})
SESSION_WORDS = frozenset({"conversation", "conv", "session", "this session"})
EVERY_WORDS = frozenset({"", "all", "any", "default", "*", "everything"})
SCOPE_FORMS = "'namespace', 'global', 'session', 'ns:<name>' or 'conv:<session id>'"
"""The scopes a tool call may name (`Binding.scope`), as the tools' arguments describe
them and the refusal of any other lists them."""


class ToolRefusal(Exception):
    """The call asks for something this binding may not see or cannot do; the message says
    what to do instead (it is shown to the model as the tool's error)."""


NO_NAMESPACE = (
    "this connection is bound to no namespace: use scope 'global', or connect with a "
    "namespace (memlane mcp --namespace NAME, or the X-Memlane-Repo header)"
)
NO_SESSION = (
    "no session is known for this connection: name one as 'conv:<session id>', or connect "
    "with a session (memlane mcp --session KEY, or X-Memlane-Session)"
)


def known(value: str | None, refusal: str) -> str:
    """`value`, which a scope word needs this binding to have; the `refusal` when it has none."""
    if value is None:
        raise ToolRefusal(refusal)
    return value


@dataclass(frozen=True, slots=True)
class Binding:
    namespace: str | None
    """The namespace this connection is bound to; None sees only `global` memory."""
    session_key: str | None = None
    """The caller's own session (its key), when the client said which it is."""
    session_id: str | None = None
    """The caller's stored session, once resolved (the proxy knows it; MCP looks it up)."""
    all_namespaces: bool = False
    """The server was started with `--all-namespaces`: a call may name another namespace."""
    via: str = "mcp"
    """The face the calls come through: the provenance of memories they add."""
    tenant: str = ""
    """Whose data the calls may reach ("" without credential tenancy)."""

    def _conversation(self, session_id: str) -> str:
        return scoping.conversation_scope(session_id, self.tenant)

    def _namespace(self, namespace: str) -> str:
        return scoping.namespace_scope(namespace, self.tenant)

    # --- memory scopes ---------------------------------------------------------------
    def default_scopes(self) -> tuple[str, ...]:
        """What a search without a scope looks at: this namespace, the caller's own
        conversation, and global memory."""
        scopes: list[str] = []
        if self.session_id is not None:
            scopes.append(self._conversation(self.session_id))
        if self.namespace is not None:
            scopes.append(self._namespace(self.namespace))
        scopes.append(scoping.global_scope(self.tenant))
        return tuple(scopes)

    def write_scope(self, requested: str | None) -> str:
        """Where a new memory goes: the named scope, else this namespace (else global)."""
        if requested is None or requested.strip().lower() in EVERY_WORDS:
            if self.namespace is not None:
                return self._namespace(self.namespace)
            return scoping.global_scope(self.tenant)
        return self.scope(requested)

    def scope(self, requested: str) -> str:
        """A scope as a model may write it (`global`, `namespace`, `session`, `ns:<name>`,
        `conv:<session id>`), checked against this binding."""
        text = requested.strip()
        owner = scoping.tenant_of(text)
        if owner:  # a stored scope as listed: only this binding's tenant's
            if owner != self.tenant:
                raise ToolRefusal(f"scope {requested!r} is not one this connection may see")
            text = scoping.unqualified(text)
        word = text.lower()
        if word == GLOBAL:
            return scoping.global_scope(self.tenant)
        if word in NAMESPACE_WORDS:
            return self._namespace(known(self.namespace, NO_NAMESPACE))
        if word in SESSION_WORDS:
            return self._conversation(known(self.session_id, NO_SESSION))
        if text.startswith(NAMESPACE_PREFIX) and text[len(NAMESPACE_PREFIX) :].strip():
            if self.namespace_allowed(text[len(NAMESPACE_PREFIX) :]):
                return scoping.qualified(text, self.tenant)
            raise ToolRefusal(
                f"scope {text!r} belongs to another namespace; this connection sees "
                f"{self.describe()} (a server started with --all-namespaces may name others)"
            )
        if text.startswith(CONVERSATION_PREFIX) and text[len(CONVERSATION_PREFIX) :].strip():
            # checked against the session's namespace by the caller (needs the store)
            return scoping.qualified(text, self.tenant)
        raise ToolRefusal(f"unknown scope {requested!r}: use {SCOPE_FORMS}")

    def namespace_allowed(self, namespace: str) -> bool:
        return self.all_namespaces or namespace == self.namespace

    def fact_visible(self, fact: Fact, conversation_namespace: str | None) -> bool:
        """Whether a stored memory may be shown. `conversation_namespace` is the namespace of
        the session a `conv:` scope belongs to (None when there is no such session)."""
        return self.scope_visible(fact.scope, conversation_namespace)

    def scope_visible(self, scope: str, conversation_namespace: str | None) -> bool:
        if scoping.tenant_of(scope) != self.tenant:
            return False  # another tenant's, whatever its namespace
        scope = scoping.unqualified(scope)
        if scope == GLOBAL:
            return True
        if scope.startswith(NAMESPACE_PREFIX):
            return self.namespace_allowed(scope[len(NAMESPACE_PREFIX) :])
        if scope.startswith(CONVERSATION_PREFIX):
            if scope == scoping.conversation_scope(self.session_id or ""):
                return True
            return conversation_namespace is not None and self.namespace_allowed(
                conversation_namespace
            )
        return False

    # --- sessions ------------------------------------------------------------------------
    def session_visible(self, session: Session) -> bool:
        if session.tenant != self.tenant:
            return False
        return session.id == self.session_id or self.namespace_allowed(session.namespace)

    def lookup_namespace(self) -> str | None:
        """The namespace a session lookup is confined to (None: every namespace)."""
        return None if self.all_namespaces else (self.namespace or "")

    def describe(self) -> str:
        where = f"namespace {self.namespace!r}" if self.namespace is not None else "no namespace"
        return where + (" (all namespaces when named)" if self.all_namespaces else "")


async def with_session(store: SessionStore, binding: Binding) -> Binding:
    """The binding with its caller's stored session filled in, when the key names one.

    A caller that named its session but no namespace works in that session's namespace
    (where the proxy keeps the session's memories)."""
    if binding.session_key is None or binding.session_id is not None:
        return binding
    session = await threads.to_thread(
        partial(store.find_session, binding.session_key, tenant=binding.tenant)
    )
    if session is None:
        return binding
    namespace = binding.namespace if binding.namespace is not None else session.namespace
    return replace(binding, session_id=session.id, namespace=namespace)

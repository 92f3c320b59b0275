"""Child sessions: a subagent's calls get a session of their own, linked to their parent's.

An agent that delegates (Claude Code's Agent tool) runs the subagent as a separate
conversation with its own history. Stored into the parent's session, its turns would
interleave with the parent's and break the parent's history at every call; so each
subagent gets a child session (`parent_id` names the parent, `fork_position` 0: it
starts empty), created on its first call.
"""

from __future__ import annotations

from memlane.store import Store, StoreError
from memlane.types import Session

SUBAGENT = "subagent"
"""Session metadata flag of a child session made for a subagent."""


def open_session(
    store: Store, key: str, *, namespace: str, tenant: str = "", parent_key: str | None = None
) -> Session:
    """The session for `key` in `tenant`, created on first use; under `parent_key` (of the
    same tenant) when it is a child."""
    found = store.find_session(key, tenant=tenant)
    if found is not None:
        return found
    if parent_key is None:
        return store.ensure_session(key, namespace=namespace, tenant=tenant)
    parent = store.ensure_session(parent_key, namespace=namespace, tenant=tenant)
    try:
        child = store.fork_session(parent.id, new_key=key, at_position=0)
    except StoreError:  # a concurrent call of the same subagent created it first
        found = store.find_session(key, tenant=tenant)
        if found is None:
            raise
        return found
    return store.update_session(child.id, metadata={SUBAGENT: True})

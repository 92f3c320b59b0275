"""Sessions: working context, index metadata, @@ references, query_session, lifecycle.

For agent code that keeps its own loop, `working_context(rt, session_id)` is
the session memory manager: the running summary plus the unsummarised turns.
"""

from memlane.engine.sessions.indexing import IndexResult, SessionMeta, index_session
from memlane.engine.sessions.lookup import AmbiguousSession, NoSuchSession, find_session
from memlane.engine.sessions.query import SessionAnswer, query_session
from memlane.engine.sessions.working import WorkingContext, working_context

__all__ = [
    "AmbiguousSession",
    "IndexResult",
    "NoSuchSession",
    "SessionAnswer",
    "SessionMeta",
    "WorkingContext",
    "find_session",
    "index_session",
    "query_session",
    "working_context",
]

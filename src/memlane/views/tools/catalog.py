"""Every tool memlane offers a model, in one place: name, when to use it, arguments, handler.

The MCP server registers all of them; the proxy offers the ones in
`PROXY_TOOLS` to the upstream under a `memlane_` prefix. Descriptions are the
prompt a model reads to decide when to call a tool: they say when, not how.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from memlane.engine.runtime import Runtime
from memlane.store import StoreError
from memlane.views.tools import memory_tools as m
from memlane.views.tools import session_tools as s
from memlane.views.tools.args import ArgumentError, read_arguments
from memlane.views.tools.binding import Binding, ToolRefusal

log = logging.getLogger("memlane.tools")

Handler = Callable[[Runtime, Binding, Any], Awaitable[str]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    args: type[BaseModel]
    run: Handler
    example: str
    read_only: bool = True
    group: str = "memory"
    """`memory` or `sessions`: what `X-Memlane-Tools` enables on the proxy."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    text: str
    error: bool = False


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memory_search",
        "Search memory",
        "Search long-term memory (facts about the user, the project and past decisions, "
        "remembered across sessions). Use it before answering anything that may depend on "
        "what was said or decided earlier. Returns ids and one-line snippets with when each "
        "was true; open the ones you need with memory_get. `as_of` asks what was true at a "
        "date.",
        m.MemorySearchArgs,
        m.memory_search,
        '{"query": "deploy steps", "limit": 5}',
    ),
    ToolSpec(
        "memory_get",
        "Open memories",
        "Read memories in full, with where and when each was learned. Use it on ids from "
        "memory_search when a snippet is not enough.",
        m.MemoryGetArgs,
        m.memory_get,
        '{"ids": ["3f2a9c1e0b4d"]}',
    ),
    ToolSpec(
        "memory_history",
        "A memory's history",
        "See how a memory changed over time: every version, when each was true and the "
        "message that caused it. Use it when the user asks what something used to be, since "
        "when it holds, or what replaced it.",
        m.MemoryHistoryArgs,
        m.memory_history,
        '{"id": "3f2a9c1e0b4d"}',
    ),
    ToolSpec(
        "memory_add",
        "Remember a fact",
        "Remember a durable fact (a preference, a decision, a name, how something works) for "
        "future sessions. It is compared with what is already known: a repeat is kept once, a "
        "change replaces the old fact (kept as what was true before). Do not store secrets or "
        "passing details.",
        m.MemoryAddArgs,
        m.memory_add,
        '{"text": "The user deploys with make release"}',
        read_only=False,
    ),
    ToolSpec(
        "memory_update",
        "Correct a memory",
        "Correct a memory that is wrong or outdated, keeping its id. Use memory_search first "
        "to find its id.",
        m.MemoryUpdateArgs,
        m.memory_update,
        '{"id": "3f2a9c1e0b4d", "text": "The user deploys with make ship"}',
        read_only=False,
    ),
    ToolSpec(
        "memory_delete",
        "Forget a memory",
        "Forget a memory that is no longer true or was never wanted (a soft delete: it leaves "
        "recall, its file is kept under deleted/).",
        m.MemoryDeleteArgs,
        m.memory_delete,
        '{"id": "3f2a9c1e0b4d"}',
        read_only=False,
    ),
    ToolSpec(
        "sessions_search",
        "Find past sessions",
        "Find past sessions (conversations with agents) by topic: their names, descriptions, "
        "tags and summaries. Use it when the user refers to earlier work ('the refactor we "
        "did last week').",
        s.SessionsSearchArgs,
        s.sessions_search,
        '{"query": "login refactor"}',
        group="sessions",
    ),
    ToolSpec(
        "session_get",
        "Read a session",
        "Read a page of one past session's messages (the latest by default, or around a "
        "message number). Use it to see exactly what was said or done.",
        s.SessionGetArgs,
        s.session_get,
        '{"ref": "login-refactor", "limit": 20}',
        group="sessions",
    ),
    ToolSpec(
        "session_ask",
        "Ask a session",
        "Ask one question about a past session and get a short answer from its transcript "
        "and summaries. Cheaper than reading it when you need one detail.",
        s.SessionAskArgs,
        s.session_ask,
        '{"ref": "login-refactor", "question": "Which library did we choose?"}',
        group="sessions",
    ),
    ToolSpec(
        "todo_get",
        "Read the TODO",
        "Read this session's TODO list, which memlane keeps in front of the model every turn.",
        s.NoArgs,
        s.todo_get,
        "{}",
        group="sessions",
    ),
    ToolSpec(
        "todo_set",
        "Set the TODO",
        "Replace this session's TODO list (the whole list). Keep it current as steps are done: "
        "memlane shows it to the model every turn, even after older messages were compacted.",
        s.TodoSetArgs,
        s.todo_set,
        '{"text": "- [x] reproduce the bug\\n- [ ] write the fix"}',
        read_only=False,
        group="sessions",
    ),
)

BY_NAME: Mapping[str, ToolSpec] = {tool.name: tool for tool in TOOLS}

PROXY_PREFIX = "memlane_"
PROXY_TOOLS: tuple[str, ...] = ("memory_search", "session_ask")
"""The tools the proxy offers upstream models (opt-in), as `memlane_<name>`."""


async def call_tool(rt: Runtime, binding: Binding, name: str, arguments: Any) -> ToolResult:
    """Run one tool call; every failure is a `ToolResult(error=True)` the model can read."""
    spec = BY_NAME.get(name)
    if spec is None:
        known = ", ".join(BY_NAME)
        return ToolResult(f"no tool {name!r}: memlane's tools are {known}", error=True)
    try:
        args = read_arguments(name, spec.args, arguments, spec.example)
        return ToolResult(await spec.run(rt, binding, args))
    except (ArgumentError, ToolRefusal) as exc:
        return ToolResult(str(exc), error=True)
    except StoreError as exc:
        log.warning("tool %s: store error: %s", name, exc)
        return ToolResult(f"{name} failed: memlane's store answered: {exc}", error=True)
    except Exception:
        log.exception("tool %s failed", name)
        return ToolResult(
            f"{name} failed inside memlane (the server's log has the details); try again "
            "or continue without it",
            error=True,
        )

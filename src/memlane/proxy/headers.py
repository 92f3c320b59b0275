"""Every header the proxy reads, in one place (the README's header table lists them)."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.datastructures import Headers

from memlane.text.llm import OWN_CALL_HEADER as OWN_CALL_HEADER  # made where the calls are

PREFIX = "x-memlane-"
"""Every header with this prefix is memlane's: read, then stripped before forwarding."""

SESSION = "x-memlane-session"
REPO = "x-memlane-repo"
TODO = "x-memlane-todo"
SPEC_MODE = "x-memlane-spec-mode"
EPHEMERAL = "x-memlane-ephemeral"
TOOLS = "x-memlane-tools"
TOOLS_FLAG = TOOLS.removeprefix(PREFIX)

CREDENTIALS = ("authorization", "x-api-key", "api-key")
"""Where a client's key travels (OpenAI and most: a bearer `Authorization`; Anthropic:
`x-api-key`; Azure: `api-key`): under credential tenancy it names the tenant."""

SESSION_FALLBACKS = ("x-session-id",)

CLAUDE_SESSION = "x-claude-code-session-id"
"""Claude Code's conversation id (the same across `--continue` and `--resume`)."""
CLAUDE_AGENT = "x-claude-code-agent-id"
"""Set on a Claude Code subagent's calls: they get a child session of the conversation's."""
CLAUDE_PARENT_AGENT = "x-claude-code-parent-agent-id"
"""A nested subagent's parent agent: its child session hangs under that agent's."""
REPO_FALLBACKS = ("x-repo-path", "x-workspace-root", "x-project-root")

MEMLANE_HEADERS: dict[str, str] = {
    "X-Memlane-Session": "Session key (first in the resolution order).",
    "X-Memlane-Repo": "Namespace for memory shared by the sessions of one project (default: "
    "the repository the agent works in, else the tenant's `default`).",
    "X-Memlane-Todo": "Store this text as the session's TODO (escaped `\\n` become line breaks).",
    "X-Memlane-Spec-Mode": "true: ask for a reviewable spec before any code change until approved.",
    "X-Memlane-Ephemeral": "true: govern and forward the request, store nothing.",
    "X-Memlane-Tools": "memory, sessions (comma-separated), all or off: offer memlane's own "
    "tools (memlane_memory_search, memlane_session_ask) to the model and answer its calls "
    "(default: MEMLANE_PROXY_TOOLS).",
    "X-Memlane-Own-Call": "Sent by memlane on its own LLM calls (facts, summaries, session "
    "metadata and questions); a memlane proxy refuses a request carrying it with 508.",
    "X-Memlane-History": "server: the request carries only its new messages; memlane "
    "prepends the session's working context (running summary + the rest). client: as sent.",
}
"""Documentation of the headers, used for the README table."""

CLIENT_HEADERS: dict[str, str] = {
    "X-Claude-Code-Session-Id": "Claude Code's conversation id: the session key (after "
    "`X-Memlane-Session`), the same across `--continue` and `--resume`.",
    "X-Claude-Code-Agent-Id": "A Claude Code subagent's call: stored in a child session "
    "`<key>:agent:<id>` linked to the conversation's.",
    "X-Claude-Code-Parent-Agent-Id": "A nested subagent: its child session hangs under that "
    "agent's.",
    "anthropic-beta": "`context-1m-…`: the request is governed against a 1M-token window "
    "(passed on as sent).",
    "X-Session-Id": "Session key, after the Claude Code ones.",
    "X-Repo-Path, X-Workspace-Root, X-Project-Root": "Namespace, after `X-Memlane-Repo`.",
}
"""Other clients' headers memlane reads (never strips), for the README table."""

HOP_BY_HOP = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
    }
)
"""Request headers that belong to one connection, not to the request: never forwarded."""

RESPONSE_DROP = frozenset(
    {
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "date",
        "server",
    }
)
"""Upstream response headers not relayed (the proxy's own server sets them)."""

CONTEXT = "x-memlane-context"
"""Response header: what governance forwarded (`tokens=…; limit=…; compacted=0|1`)."""


def context_value(tokens: int, limit: int, compacted: bool) -> str:
    return f"tokens={tokens}; limit={limit}; compacted={int(compacted)}"


SERVER_TIMING = "server-timing"
"""memlane's stages of the request (`engine.stages`), after the upstream's own, if any."""
TIMING_PREFIX = "memlane-"


def timing_value(stages: Iterable[tuple[str, float]]) -> str:
    """`memlane-wait;dur=0.02, memlane-shape;dur=0.91, …` (milliseconds)."""
    return ", ".join(f"{TIMING_PREFIX}{name};dur={ms:.2f}" for name, ms in stages)


def first_values(headers: Headers) -> dict[str, str]:
    """Each header's first value by its lower-case name, decoded once.

    A turn reads a dozen headers (its key, tenant, identity, flags, client name), and
    `Headers.get` decodes and scans the whole raw list on each call: 48 µs per request
    against 20 (first values, as `Headers.get` gives them).
    """
    return dict(reversed(headers.items()))

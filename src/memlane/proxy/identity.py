"""Who is asking: the session key, the memory namespace, the kind of client, memlane's flags.

The session key follows one fixed order of headers and body fields; a key too long or with control
characters is replaced by its hash, so what is stored stays bounded (folders
are made from keys only through `files.paths.safe_key`). Without any key the
session is a hash of Authorization (or `x-api-key`) + User-Agent: the raw values are
never kept. A Claude Code subagent's calls get a child session of the conversation's.

The namespace (the project) is what the request names, else the project of the folder the
agent says it works in (an absolute path: two repositories both called `api` stay apart),
else the tenant's `default` namespace shared by every session that names no project.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlane.engine.governance.budget import compacts_itself as client_compacts_itself
from memlane.files.projects import project_of
from memlane.proxy import headers as h
from memlane.proxy.workdir import working_directory
from memlane.types import Message
from memlane.types.keys import CONTROL as _CONTROL
from memlane.types.keys import MAX_KEY_CHARS, OWN_NAMESPACE

DEFAULT_NAMESPACE = "default"
"""The namespace of the sessions that name no project (`sessions_without_project = shared`):
one per tenant, so a plain client's facts, summaries and `@@` references reach its other
sessions. No repo header may claim it."""


class IdentityError(ValueError):
    """A request names a namespace memlane reserves; the message says what to send."""


_AGENTIC_UA = re.compile(
    r"(?<![a-z])(codex|claude-cli|factory-cli|droid|warp)(?![a-z])", re.IGNORECASE
)
TRUTHY = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True)
class Identity:
    key: str
    namespace: str
    agentic: bool
    ephemeral: bool
    flags: Mapping[str, str] = field(default_factory=dict)
    """`X-Memlane-*` values by lower-case suffix (`todo`, `spec-mode`, …)."""
    parent_key: str | None = None
    """A subagent's call: the session its own session is a child of."""


def resolve(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    messages: Sequence[Message] = (),
    instructions: str = "",
    *,
    without_project: str = "shared",
) -> Identity:
    """Read identity from lower-case `headers`, the decoded request body and its parsed items.

    The namespace is, first found: the repo headers and `metadata.repo` as sent; the project
    of the folder the client says it works in (`workdir`, `files.projects`); else
    `default` (`without_project = "shared"`) or the session's own (`"isolated"`).
    """
    flags = {
        name.removeprefix(h.PREFIX): header_text(value)
        for name, value in headers.items()
        if name.startswith(h.PREFIX)
    }
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    key = _first(
        [
            headers.get(h.SESSION),
            headers.get(h.CLAUDE_SESSION),
            claude_user_session(metadata.get("user_id")),
            *(headers.get(n) for n in h.SESSION_FALLBACKS),
            body.get("prompt_cache_key"),
            metadata.get("session_id"),
            body.get("session_id"),
        ]
    )
    if key is None:
        credential = headers.get("authorization") or headers.get("x-api-key", "")
        seed = f"{credential}\n{headers.get('user-agent', '')}"
        key = "anon-" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:32]
    namespace = _first(
        [headers.get(h.REPO), *(headers.get(n) for n in h.REPO_FALLBACKS), metadata.get("repo")]
    )
    if namespace is not None:
        _check_claimable(namespace)
    else:
        namespace = _project_namespace(messages, instructions)
    root = bounded(key)
    key, parent = _agent_keys(root, headers)
    if namespace is None:
        namespace = OWN_NAMESPACE + root if without_project == "isolated" else DEFAULT_NAMESPACE
    return Identity(
        key=key,
        namespace=bounded(namespace),
        agentic=is_agentic(headers),
        ephemeral=flags.get("ephemeral", "").strip().lower() in TRUTHY,
        flags=flags,
        parent_key=parent,
    )


def _check_claimable(namespace: str) -> None:
    """A repo header may not name a namespace memlane keeps for sessions with no project."""
    if namespace.startswith(OWN_NAMESPACE):
        raise IdentityError(
            f"a repo name may not start with {OWN_NAMESPACE!r} (memlane's name for a session's "
            "own namespace): send another X-Memlane-Repo"
        )
    if namespace.lower() == DEFAULT_NAMESPACE:
        raise IdentityError(
            f"the repo name {DEFAULT_NAMESPACE!r} is memlane's namespace for sessions that name "
            "no project: send another X-Memlane-Repo, or none to use it"
        )


def _project_namespace(messages: Sequence[Message], instructions: str) -> str | None:
    """The namespace of the project the client works in, when it says where it works."""
    folder = working_directory(messages, instructions)
    project = project_of(folder) if folder is not None else None
    return project.namespace if project is not None else None


_USER_SESSION = re.compile(r"_session_([0-9A-Za-z][0-9A-Za-z-]*)$")


def claude_user_session(user_id: Any) -> str | None:
    """The session id inside Claude Code's `metadata.user_id`: a JSON string holding
    `session_id` (current versions), or `user_…_account_…_session_<uuid>` (older ones).
    Any other user id names a person, not a session."""
    if not isinstance(user_id, str) or not user_id.strip():
        return None
    text = user_id.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        session = data.get("session_id") if isinstance(data, dict) else None
        return session if isinstance(session, str) and session.strip() else None
    match = _USER_SESSION.search(text)
    return match.group(1) if match else None


def agent_key(root: str, agent: str) -> str:
    """The session key of a subagent of the conversation `root`."""
    return bounded(f"{root}:agent:{agent}")


def _agent_keys(root: str, headers: Mapping[str, str]) -> tuple[str, str | None]:
    """(key, parent key): a subagent's calls get their own session under the conversation's
    (or under their parent agent's), so they are never interleaved into it."""
    agent = _first([headers.get(h.CLAUDE_AGENT)])
    if agent is None:
        return root, None
    parent_agent = _first([headers.get(h.CLAUDE_PARENT_AGENT)])
    parent = agent_key(root, parent_agent) if parent_agent is not None else root
    return agent_key(root, agent), parent


def credential(headers: Mapping[str, str]) -> str | None:
    """The client's key: a bearer `Authorization` value (any other scheme whole), else
    `x-api-key`, else `api-key`; None when it sent none (only whitespace counts as none)."""
    for name in h.CREDENTIALS:
        value = (headers.get(name) or "").strip()
        if name == "authorization":
            scheme, _, rest = value.partition(" ")
            value = rest.strip() if scheme.lower() == "bearer" else value
        if value:
            return value
    return None


def _first(candidates: list[Any]) -> str | None:
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def bounded(key: str) -> str:
    """The key as stored: itself when short and printable, else its SHA-256."""
    if len(key) <= MAX_KEY_CHARS and not _CONTROL.search(key):
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def is_agentic(headers: Mapping[str, str]) -> bool:
    """Codex, Claude Code, factory-cli/droid, warp (by User-Agent or Codex's `originator`),
    Stainless SDKs (the official OpenAI and Anthropic ones)."""
    if any(name.startswith("x-stainless-") for name in headers):
        return True
    agent = f"{headers.get('user-agent', '')} {headers.get('originator', '')}"
    return bool(_AGENTIC_UA.search(agent))


def compacts_itself(headers: Mapping[str, str]) -> bool:
    """Codex CLI or Claude Code (by User-Agent or Codex's `originator`): they summarise their
    own history, so memlane steps in only when a request would not fit."""
    agent = f"{headers.get('user-agent', '')} {headers.get('originator', '')}"
    return client_compacts_itself(agent)


MAX_CLIENT_CHARS = 60


def client_name(headers: Mapping[str, str]) -> str:
    """The client as a person reads it: the User-Agent's first word (`codex_cli_rs/0.169.0`,
    `OpenAI/Python`), printable and bounded; empty when the client sent none."""
    agent = headers.get("user-agent", "").strip()
    first = agent.split(" ", 1)[0] if agent else ""
    return _CONTROL.sub("", first)[:MAX_CLIENT_CHARS]


def header_text(value: str) -> str:
    """Header values arrive as Latin-1; most clients meant UTF-8 (a TODO with an em dash)."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value

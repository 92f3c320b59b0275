"""Where the client works: the folder an agentic client names in what it already sends.

Each recognised client states its working directory in its own words; memlane
reads it, never asks for it (what each was checked against is in
docs/concepts/projects.md):

- Codex CLI: a user item `<environment_context>` holding `<cwd>/path</cwd>` (after the
  `# AGENTS.md instructions for …` part in the same item when the folder has an AGENTS.md);
- Claude Code (2.x): its first `<system-reminder>`, `Primary working directory: /path`
  (Cline names a multi-root workspace's folder the same way);
- an `<env>` block with `Working directory: /path` in the system prompt: OpenCode,
  the Continue CLI, Claude Code 1.x;
- Cline: `Current Working Directory: /path`; Roo Code: `Current Workspace Directory: /path`
  in the system prompt;
- Qwen Code (and other Gemini CLI descendants that speak an OpenAI format): the opening user
  item "… We are setting up the context for our chat. … I'm currently working in the
  directory: /path" (or the first of "the following directories").

Only the opening items are read (`SCANNED_MESSAGES`, each up to `SCANNED_CHARS`), and
each pattern runs only where its marker is found, so the cost is a few substring
searches per request. A user's own words are never read as a location: in a user item
only Codex's and the Gemini-style context items count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memlane.types import Message

SCANNED_MESSAGES = 16
"""Opening items read for a working directory (Codex's context is its 6th or 7th)."""
SCANNED_CHARS = 200_000
"""Characters of each item (and of the instructions) searched: a system prompt states its
environment within its first pages, before any tool listing."""

CODEX_CONTEXT = "<environment_context>"
CODEX_OPENINGS = (CODEX_CONTEXT, "# AGENTS.md instructions for", "<user_instructions>")
"""How a Codex context item opens: the environment, or the AGENTS.md part before it."""
REMINDER = "<system-reminder>"
GEMINI_CONTEXT = "This is "
"""How a Gemini-style client's context item opens ("This is the Qwen Code. We are …")."""
_CWD = re.compile(r"<cwd>([^<\r\n]+)</cwd>")
_MARK = "irectory:"
"""Every label below ends with it: one substring search finds the lines worth reading."""
_LABELLED = re.compile(
    r"[ \t]*(?:- )?(?P<label>Primary working directory|Working directory|"
    r"Current Working Directory|Current Workspace Directory|"
    r"I'm currently working in the directory):[ \t]*(?P<folder>\S[^\r\n]*?)[ \t]*$",
    re.IGNORECASE,
)
_ENV_LINE = "working directory"
"""The bare `Working directory:` label counts only inside an `<env>` block."""


def working_directory(messages: Sequence[Message], instructions: str = "") -> str | None:
    """The folder the client says it works in, or None when it names none.

    First the items that are a client's own context by their opening (Codex's, Claude
    Code's reminders, a Gemini-style context item: a few characters compared each), then
    the system prompt's items and the instructions (one substring search each).
    """
    opening = [m for m in messages[:SCANNED_MESSAGES] if m.kind == "message"]
    for message in opening:
        text = message.text
        if message.role == "user" and text.startswith(CODEX_OPENINGS):
            at = text.find(CODEX_CONTEXT, 0, SCANNED_CHARS)
            found = _CWD.search(text, at, SCANNED_CHARS) if at >= 0 else None
            if found is not None:
                return found.group(1).strip()
        elif (message.role == "user" and text.startswith(GEMINI_CONTEXT)) or (
            message.role == "system" and text.startswith(REMINDER)
        ):
            folder = _labelled(text)
            if folder is not None:
                return folder
    for message in opening:
        if message.role in ("system", "developer") and not message.text.startswith(REMINDER):
            folder = _labelled(message.text)
            if folder is not None:
                return folder
    return _labelled(instructions) if instructions else None


def _labelled(text: str) -> str | None:
    """The folder of the first labelled line of `text` (see the module's list)."""
    at = text.find(_MARK, 0, SCANNED_CHARS)
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        line = text[start : end if end >= 0 else len(text)].rstrip("\r")
        match = _LABELLED.match(line)
        if match is not None and _counts(match.group("label"), text, start):
            return match.group("folder")
        at = text.find(_MARK, at + len(_MARK), SCANNED_CHARS)
    return None


def _counts(label: str, text: str, line_start: int) -> bool:
    """A bare `Working directory:` line is read only inside an `<env>` block."""
    if label.lower() != _ENV_LINE:
        return True
    opened = text.rfind("<env>", 0, line_start)
    return opened >= 0 and text.rfind("</env>", opened, line_start) < 0

"""What the user asked: a user item's own words, without the client's scaffolding.

Agentic clients put their own text in user items: Codex its environment context,
its AGENTS.md instructions (`# AGENTS.md instructions for …`, `<user_instructions>`
in older versions) and notices (`<turn_aborted>`, `<user_shell_command>`, …);
Claude Code its `<system-reminder>`s; Gemini-style clients an opening context item.
None of that is what the user asked, so none of it may title a session.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memlane.engine.sessions.serialize import is_conversation
from memlane.types import Message

SCAFFOLD_OPENINGS = (
    "<environment_context>",
    "# AGENTS.md instructions for",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "<turn_aborted>",
    "<user_shell_command>",
    "<subagent_notification>",
    "<skill>",
)
"""How an item a client wrote into the user's turn opens."""
GEMINI_CONTEXT = "We are setting up the context for our chat."
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


def users_words(text: str) -> str:
    """The user's own words in a user item's text ("" when the client wrote all of it)."""
    if "<system-reminder>" in text:
        text = _REMINDER.sub("", text)
    text = text.strip()
    if text.startswith(SCAFFOLD_OPENINGS) or GEMINI_CONTEXT in text[:200]:
        return ""
    return text


def first_asked(messages: Iterable[Message]) -> str:
    """The first thing the user asked among `messages` ("" when none yet)."""
    for message in messages:
        if message.role == "user" and is_conversation(message):
            words = users_words(message.text)
            if words:
                return words
    return ""

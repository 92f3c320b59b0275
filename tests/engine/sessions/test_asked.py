"""A session is titled with what the user asked, never with the client's scaffolding."""

from __future__ import annotations

import pytest

from memlane.engine.sessions.asked import first_asked, users_words
from memlane.types import Message

CODEX_AGENTS = (
    "# AGENTS.md instructions for /home/ann/api\n\n<INSTRUCTIONS>\n# Rules\nUse tabs.\n"
    "</INSTRUCTIONS>\n<environment_context>\n  <cwd>/home/ann/api</cwd>\n</environment_context>"
)


@pytest.mark.parametrize(
    "text",
    [
        "<environment_context>\n  <cwd>/home/ann/api</cwd>\n</environment_context>",
        CODEX_AGENTS,
        "<user_instructions>\nUse tabs.\n</user_instructions>",
        "<turn_aborted>\nThe user interrupted.\n</turn_aborted>",
        "<system-reminder>\nToday's date is 2026-11-28.\n</system-reminder>",
        "This is the Qwen Code. We are setting up the context for our chat.\nToday's date is …",
        "   ",
    ],
)
def test_scaffolding_is_not_the_users_words(text: str) -> None:
    assert users_words(text) == ""


def test_reminders_around_the_users_words_are_dropped() -> None:
    text = "<system-reminder>\nA note.\n</system-reminder>\nWhere do we deploy?"
    assert users_words(text) == "Where do we deploy?"


def test_the_first_thing_asked_skips_the_clients_items() -> None:
    messages = [
        Message("developer", "You are Codex."),
        Message("user", CODEX_AGENTS),
        Message("user", "Where do we deploy?"),
        Message("assistant", "To blue-kestrel-7."),
        Message("user", "Thanks"),
    ]
    assert first_asked(messages) == "Where do we deploy?"
    assert first_asked(messages[:2]) == ""
    recalled = Message("user", "[memlane recall]", origin="recall")
    assert first_asked([recalled, messages[2]]) == "Where do we deploy?"

"""The folder an agentic client works in, read from what it already sends.

Each body below is shaped like the client's own (the Codex and Claude Code texts are
copied from what the real CLIs in `.cache/` sent; the others from each project's public
prompt source, as docs/concepts/projects.md lists); the real CLIs are driven end to end
by `test_codex_cli.py` and `test_claude_code_cli.py`.
"""

from __future__ import annotations

from typing import Any

import pytest

from memlane.proxy.wire.anthropic import MessagesAdapter
from memlane.proxy.wire.chat import ChatAdapter
from memlane.proxy.wire.responses import ResponsesAdapter
from memlane.proxy.workdir import working_directory

FOLDER = "/home/ann/work/api"
REMINDER = "<system-reminder>"
AGENTS = f"# AGENTS.md instructions for {FOLDER}\n\n<INSTRUCTIONS>\nUse tabs.\n</INSTRUCTIONS>"

CODEX_CONTEXT = (
    "<environment_context>\n"
    f"  <cwd>{FOLDER}</cwd>\n"
    "  <shell>bash</shell>\n"
    "  <current_date>2026-11-28</current_date>\n"
    "  <timezone>Etc/UTC</timezone>\n"
    f"  <filesystem><workspace_roots><root>{FOLDER}</root></workspace_roots>"
    '<permission_profile type="managed"></permission_profile></filesystem>\n'
    "</environment_context>"
)
CLAUDE_ENVIRONMENT = (
    "<system-reminder>\n# Environment\n"
    "You have been invoked in the following environment: \n"
    f" - Primary working directory: {FOLDER}\n"
    " - Is a git repository: true\n - Platform: linux\n - Shell: bash\n"
    "</system-reminder>"
)


def codex_body(context: str = CODEX_CONTEXT) -> dict[str, Any]:
    def item(role: str, text: str) -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    return {
        "model": "gpt-6.1",
        "input": [
            item("developer", "You are Codex, an agent based on GPT-6. Working directory: see"),
            item("developer", "<skills_instructions>\n## Skills\n</skills_instructions>"),
            item("user", context),
            item("user", "Where do we deploy?"),
        ],
    }


def claude_body(reminder: str = CLAUDE_ENVIRONMENT) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-6",
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.330;"},
            {
                "type": "text",
                "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK.",
            },
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": reminder},
                    {
                        "type": "text",
                        "text": f"{REMINDER}\nToday's date is 2026-11-28.\n</system-reminder>",
                    },
                    {"type": "text", "text": "Where do we deploy?"},
                ],
            }
        ],
    }


def chat_body(system: str, user: str = "Where do we deploy?") -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }


def found(adapter: Any, body: dict[str, Any]) -> str | None:
    parsed = adapter.parse(body)
    return working_directory(parsed.messages, parsed.instructions)


def test_codex_names_its_folder_in_its_environment_context() -> None:
    assert found(ResponsesAdapter(), codex_body()) == FOLDER


def test_codex_in_a_folder_with_agents_md_sends_its_context_after_the_instructions() -> None:
    body = codex_body()
    body["input"][2]["content"].insert(0, {"type": "input_text", "text": AGENTS})
    assert found(ResponsesAdapter(), body) == FOLDER


def test_claude_code_names_its_folder_in_its_environment_reminder() -> None:
    assert found(MessagesAdapter(), claude_body()) == FOLDER


OPENCODE = (
    "You are opencode, an interactive CLI tool.\n"
    "Here is some useful information about the environment you are running in:\n<env>\n"
    f"  Working directory: {FOLDER}\n  Is directory a git repo: yes\n  Platform: linux\n"
    "  Today's date: Sat Nov 28 2026\n</env>\n<files>\n  \n</files>"
)
CONTINUE_CLI = (
    "You are an agent in the Continue CLI.\n"
    "Here is useful information about the environment you are running in:\n<env>\n"
    f"Working directory: {FOLDER}\nIs directory a git repo: true\nPlatform: linux\n</env>"
)
CLINE = (
    "You are Cline, a highly skilled software engineer.\n\n====\n\nSYSTEM INFORMATION\n\n"
    "Operating System: Linux\nIDE: vscode\nDefault Shell: /bin/bash\nHome Directory: /home/ann\n"
    f"Current Working Directory: {FOLDER}\n\n====\n\nOBJECTIVE"
)
ROO = (
    "You are Roo.\n====\n\nSYSTEM INFORMATION\n\nOperating System: Linux\nDefault Shell: bash\n"
    f"Home Directory: /home/ann\nCurrent Workspace Directory: {FOLDER}\n\nThe Current Workspace "
    "Directory is the active VS Code project directory."
)


@pytest.mark.parametrize(
    "system", [OPENCODE, CONTINUE_CLI, CLINE, ROO], ids=["opencode", "continue-cli", "cline", "roo"]
)
def test_system_prompts_that_state_their_folder(system: str) -> None:
    assert found(ChatAdapter(), chat_body(system)) == FOLDER
    anthropic = {"model": "m", "system": system, "messages": [{"role": "user", "content": "hi"}]}
    assert found(MessagesAdapter(), anthropic) == FOLDER


def test_a_gemini_style_context_item() -> None:
    """Qwen Code (a Gemini CLI descendant speaking Chat Completions) opens with a user item."""
    context = (
        "This is the Qwen Code. We are setting up the context for our chat.\n"
        "Today's date is Saturday, November 28, 2026.\nMy operating system is: linux\n"
        f"I'm currently working in the directory: {FOLDER}\n"
        "Here is the folder structure of the current working directories:\n\n/home/ann/work/api/"
    )
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": context}, {"role": "user", "content": "hi"}],
    }
    assert found(ChatAdapter(), body) == FOLDER


@pytest.mark.parametrize(
    "user",
    [
        f"Working directory: {FOLDER}",
        f"<env>\nWorking directory: {FOLDER}\n</env>",
        f"Current Working Directory: {FOLDER}",
        f"Primary working directory: {FOLDER}",
        f"I'm currently working in the directory: {FOLDER}",
    ],
)
def test_the_users_own_words_name_no_folder(user: str) -> None:
    assert found(ChatAdapter(), chat_body("You are a helpful assistant.", user)) is None


def test_a_bare_working_directory_line_counts_only_inside_an_env_block() -> None:
    system = f"Working directory: {FOLDER}\n<env>\nPlatform: linux\n</env>"
    assert found(ChatAdapter(), chat_body(system)) is None


def test_no_folder_without_a_stated_one() -> None:
    assert found(ChatAdapter(), chat_body("You are a helpful assistant.")) is None
    assert (
        found(ResponsesAdapter(), codex_body("<environment_context>\n</environment_context>"))
        is None
    )

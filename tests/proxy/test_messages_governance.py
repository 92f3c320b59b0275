"""Governance on Anthropic Messages: a long Claude Code session brought back into the window.

The history has Claude Code's shape: a billing header and cached system blocks, a first
user turn of reminder blocks and the prompt, then many assistant turns (thinking with a
signature, text, a Bash `tool_use`) each answered by a user turn of a large `tool_result`
(some with a reminder text after it), and four `cache_control` breakpoints in all.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.anthropic_upstream import (
    AnthropicProxy,
    ScriptedAnthropic,
    anthropic_sdk,
    signature,
)

MODEL = "claude-sonnet-4-6"
WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()


def output(turn: int, lines: int) -> str:
    return "\n".join(
        f"{turn}:{n} " + " ".join(WORDS[(turn + n + k) % len(WORDS)] for k in range(12))
        for n in range(lines)
    )


def claude_code_history(
    turns: int, lines: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system = [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.330.25d;"},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Use the tools.", "cache_control": {"type": "ephemeral"}},
    ]
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "<system-reminder>\nToday's date is 2026-11-24.\n</system-reminder>",
                },
                {"type": "text", "text": "Audit every file in the repository for dead code."},
            ],
        }
    ]
    for turn in range(turns):
        thought = f"Turn {turn}: look at file {turn} next."
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": thought, "signature": signature(thought)},
                    {"type": "text", "text": f"Reading file {turn}."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{turn:03d}",
                        "name": "Bash",
                        "input": {"command": f"cat src/file{turn}.py"},
                    },
                ],
            }
        )
        result: list[dict[str, Any]] = [
            {
                "type": "tool_result",
                "tool_use_id": f"toolu_{turn:03d}",
                "content": output(turn, lines),
            }
        ]
        if turn % 4 == 3:
            result.append(
                {"type": "text", "text": "<system-reminder>\nKeep going.\n</system-reminder>"}
            )
        messages.append({"role": "user", "content": result})
    messages[-3]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return system, messages


def breakpoints(body: dict[str, Any]) -> int:
    count = sum(1 for b in body["system"] if "cache_control" in b)
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, list):
            count += sum(1 for b in content if "cache_control" in b)
    return count


def test_a_200k_token_claude_code_session_is_governed_into_the_window(
    anthropic_proxy: AnthropicProxy, anthropic_upstream: ScriptedAnthropic
) -> None:
    proxy = anthropic_proxy()
    system, messages = claude_code_history(turns=280, lines=40)
    tools = [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}]
    sdk = anthropic_sdk(proxy, **{"X-Claude-Code-Session-Id": "long-audit"})
    sent_tokens = proxy.runtime.tokenizer.count(json.dumps(messages))
    assert sent_tokens > 200_000
    assert breakpoints({"system": system, "messages": messages}) == 4

    response = sdk.messages.with_raw_response.create(
        model=MODEL, max_tokens=8_000, system=system, tools=tools, messages=messages
    )

    context = dict(p.split("=") for p in response.headers["x-memlane-context"].split("; "))
    assert int(context["tokens"]) <= int(context["limit"]) < 200_000
    assert context["compacted"] == "1"
    body = anthropic_upstream.last.json
    assert body["system"] == system
    assert body["tools"] == tools
    forwarded = body["messages"]
    assert len(forwarded) < len(messages)
    assert breakpoints(body) <= 4

    client_turns = [json.dumps(m, sort_keys=True) for m in messages]
    for index, message in enumerate(forwarded):
        content = message["content"]
        kinds = [b["type"] for b in content] if isinstance(content, list) else ["text"]
        if message["role"] == "assistant":
            # whole turns, thinking and signature included, exactly as the client sent them
            assert json.dumps(message, sort_keys=True) in client_turns
            uses = [b["id"] for b in content if b["type"] == "tool_use"]
            answer = forwarded[index + 1]
            assert answer["role"] == "user"
            results = [b["tool_use_id"] for b in answer["content"] if b["type"] == "tool_result"]
            assert results == uses  # every tool_use answered right after, by its result
        else:
            # tool results first, then text: memlane's text never comes before a result
            first_text = next((i for i, k in enumerate(kinds) if k != "tool_result"), len(kinds))
            assert "tool_result" not in kinds[first_text:]
            for block in content if isinstance(content, list) else []:
                if block["type"] == "tool_result":
                    previous = forwarded[index - 1]
                    assert previous["role"] == "assistant"
                    assert block["tool_use_id"] in [b.get("id") for b in previous["content"]]
    assert forwarded[0]["content"][:2] == messages[0]["content"]  # the head stays
    # the newest turn, breakpoint and all, with memlane's recall of what was dropped after it
    newest = messages[-1]["content"]
    assert forwarded[-1]["content"][: len(newest)] == newest
    added = forwarded[-1]["content"][len(newest) :]
    assert [b["type"] for b in added] == ["text"]
    assert "<memlane_recall>" in added[0]["text"]
    summary = [
        b for m in forwarded if m["role"] == "user" for b in m["content"] if b["type"] == "text"
    ]
    assert any("[memlane: summary of" in b["text"] for b in summary)
    told = next(b["text"] for b in summary if "[memlane: summary of" in b["text"])
    replaced = int(told.split("[memlane: summary of ", 1)[1].split(" ", 1)[0])
    kept = sum(1 for m in forwarded if json.dumps(m, sort_keys=True) in client_turns)
    assert replaced <= len(messages) - kept  # messages, not their content blocks

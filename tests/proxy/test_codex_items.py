"""Codex CLI's newer Responses items, without Codex: what `test_codex_cli.py` found it sends.

With its default model, Codex 0.169 sends its tool definitions as the first input
item, `{"type": "additional_tools", "role": "developer", "tools": [...]}`, instead
of a top-level `tools` list. It is an instruction: forwarded untouched, stored as
a developer message, and kept in governance's head with the developer prompt.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from memlane.engine.governance.structure import leading_instructions
from memlane.proxy.wire.responses import ResponsesAdapter, parse_item, to_wire
from tests.proxy.conftest import stored
from tests.proxy.test_governance import MODEL, SMALL, summaries, words
from tests.support.upstream import ProxyFactory, ScriptedUpstream

ADDITIONAL_TOOLS: dict[str, Any] = {
    "type": "additional_tools",
    "id": "at_01a200ac",
    "role": "developer",
    "tools": [
        {
            "type": "namespace",
            "name": "functions",
            "description": "",
            "tools": [
                {"type": "custom", "name": "exec", "description": "Run JavaScript code"},
                {
                    "type": "function",
                    "name": "wait",
                    "strict": False,
                    "parameters": {"type": "object", "properties": {}},
                },
            ],
        }
    ],
}


def developer(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": text}],
    }


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def first_run(steps: int) -> list[dict[str, Any]]:
    """A first agentic run of many calls with long outputs and no text answer yet."""
    items: list[dict[str, Any]] = []
    for step in range(steps):
        call = f"call_{step}"
        arguments = json.dumps({"cmd": f"step {step}"})
        items.append(
            {
                "type": "function_call",
                "call_id": call,
                "name": "exec_command",
                "arguments": arguments,
            }
        )
        items.append({"type": "function_call_output", "call_id": call, "output": words(250, step)})
    return items


def test_additional_tools_is_a_developer_instruction_forwarded_as_sent() -> None:
    message = parse_item(ADDITIONAL_TOOLS, "input[0]")
    assert (message.role, message.kind, message.origin) == ("developer", "message", "client")
    assert message.tool_calls == ()
    assert '"name": "exec"' in message.text  # what the model reads is counted as tokens
    assert to_wire(message) == [ADDITIONAL_TOOLS]
    parsed = ResponsesAdapter().parse(
        {"input": [ADDITIONAL_TOOLS, developer("Be Codex."), user("hi")]}
    )
    assert leading_instructions(parsed.messages) == 2


def test_a_compacted_codex_request_keeps_its_tools_and_prompt(
    proxy_factory: ProxyFactory, upstream: ScriptedUpstream
) -> None:
    proxy = proxy_factory(**SMALL)
    upstream.respond_with(summaries)
    head = [ADDITIONAL_TOOLS, developer("You are Codex, a coding agent."), user("Fix the bug.")]
    items = [*head, *first_run(30)]
    body = {"model": MODEL, "input": items, "store": False, "stream": False}
    response = httpx.post(
        f"{proxy.url}/responses",
        json=body,
        headers={"x-memlane-session": "codex-tools"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    forwarded = upstream.model_requests[-1]
    assert forwarded.path == "/v1/responses"
    sent = forwarded.json["input"]
    assert len(json.dumps(sent)) < len(json.dumps(items)) / 2  # the middle was compacted
    assert sent[:3] == head
    rows = stored(proxy, "codex-tools")
    assert [r[:3] for r in rows[:2]] == [("developer", "message", "client")] * 2

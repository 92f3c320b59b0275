"""The Responses API through the proxy: SDK clients, chained requests, and Codex CLI's shape."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.proxy.conftest import async_sdk, sdk, stored
from tests.support.upstream import Reply, RunningProxy, ScriptedUpstream, ToolCallSpec


def test_string_input_non_streaming(mproxy: RunningProxy, upstream: ScriptedUpstream) -> None:
    upstream.script(Reply(text="hello back", usage=(9, 3)))
    answer = sdk(mproxy, "resp-1").responses.create(model="m", input="hello")
    assert answer.output_text == "hello back"
    assert [r[3] for r in stored(mproxy, "resp-1") if r[2] == "client"] == ["hello", "hello back"]
    assert mproxy.store.find_session("resp-1").completion_tokens == 3


def test_streamed_events_are_relayed_and_output_items_assembled(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(
        Reply(
            text="I will search.",
            reasoning="need to search",
            tool_calls=[ToolCallSpec("search", '{"q": "memlane"}', "call_s")],
        )
    )
    with sdk(mproxy, "resp-s").responses.stream(model="m", input="find it") as stream:
        kinds = [event.type for event in stream]
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    rows = stored(mproxy, "resp-s")
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("user", "message", "find it"),
        ("assistant", "reasoning", "need to search"),
        ("assistant", "message", "I will search."),
        ("assistant", "tool_call", ""),
    ]


async def test_async_streaming(mproxy: RunningProxy, upstream: ScriptedUpstream) -> None:
    client = async_sdk(mproxy, "resp-async")
    stream = await client.responses.create(model="m", input="ping", stream=True)
    deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
    await client.close()
    assert "".join(deltas) == "echo: ping"
    assert stored(mproxy, "resp-async")[-1][3] == "echo: ping"


def test_a_previous_response_id_memlane_stored_is_resolved_and_persisted(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    body = {"model": "m", "input": "one"}
    first = httpx.post(f"{mproxy.url}/responses", json=body, headers=_session("chain")).json()
    chained = {"model": "m", "input": "two", "previous_response_id": first["id"]}
    response = httpx.post(f"{mproxy.url}/responses", json=chained, headers=_session("chain"))
    assert response.status_code == 200
    sent = upstream.last.json
    assert "previous_response_id" not in sent  # memlane holds the chain: sent whole
    assert sent["input"][0] == {"role": "user", "content": "one"}
    assert sent["input"][1]["id"] == first["output"][0]["id"]
    assert sent["input"][-1] == {"role": "user", "content": "two"}
    assert [r[3] for r in stored(mproxy, "chain")] == ["one", "echo: one", "two", "echo: two"]


def _session(key: str) -> dict[str, str]:
    return {"x-memlane-session": key}


# --- Codex CLI, unmodified: its request and resend shapes ------------------------------

CODEX_HEADERS = {
    "user-agent": "codex_cli_rs/0.169.0 (Debian 12; x86_64) xterm-256color",
    "originator": "codex_cli_rs",
    "openai-beta": "responses=experimental",
    "session_id": "0199f3a2-codex-conversation",
    "authorization": "Bearer sk-codex",
    "x-memlane-todo": "1. reproduce the bug\\n2. fix it\\n3. run the tests",
}
INSTRUCTIONS = "You are Codex, a coding agent. Follow AGENTS.md."
TOOLS = [
    {
        "type": "function",
        "name": "shell",
        "description": "Runs a shell command",
        "strict": False,
        "parameters": {"type": "object", "properties": {"command": {"type": "array"}}},
    }
]


def codex_body(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "gpt-5-codex",
        "instructions": INSTRUCTIONS,
        "input": items,
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199f3a2-codex-conversation",
    }


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def codex_turn(proxy: RunningProxy, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send one Codex request, read the stream like Codex does, return the output items."""
    done: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{proxy.url}/responses", json=codex_body(items), headers=CODEX_HEADERS
    ) as response:
        assert response.status_code == 200
        event = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "response.output_item.done":
                done.append(json.loads(line.removeprefix("data: "))["item"])
    return done


def test_codex_conversation_works_unmodified(
    mproxy: RunningProxy, upstream: ScriptedUpstream
) -> None:
    upstream.script(
        Reply(
            reasoning="look at the failing test first",
            tool_calls=[ToolCallSpec("shell", '{"command": ["pytest", "-x"]}', "call_1")],
        ),
        Reply(text="Fixed: the loop was off by one."),
        Reply(text="You're welcome."),
    )
    items = [user_item("<environment_context>cwd=/repo</environment_context>"), user_item("fix it")]
    output = codex_turn(mproxy, items)
    assert [i["type"] for i in output] == ["reasoning", "function_call"]
    items += [*output, {"type": "function_call_output", "call_id": "call_1", "output": "1 failed"}]
    assert codex_turn(mproxy, items)[0]["content"][0]["text"].startswith("Fixed")
    second = upstream.model_requests[-1].json
    items += [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Fixed: the loop was off by one."}],
        },
        user_item("thanks"),
    ]
    codex_turn(mproxy, items)
    third = upstream.model_requests[-1].json

    # forwarded: Codex's fields untouched, its items exactly as sent, memlane's headers gone
    assert {k: v for k, v in third.items() if k != "input"} == {
        k: v for k, v in codex_body([]).items() if k != "input"
    }
    client_items = [i for i in third["input"] if i.get("role") != "developer"]
    assert client_items == items
    reasoning = next(i for i in third["input"] if i["type"] == "reasoning")
    assert reasoning["encrypted_content"].startswith("enc:")
    assert "x-memlane-todo" not in upstream.last.headers
    assert upstream.last.headers["originator"] == "codex_cli_rs"
    assert upstream.last.headers["authorization"] == "Bearer sk-codex"

    # the scaffold: Codex is agentic; its TODO header (escaped newlines) became the state block
    blocks = [i for i in third["input"] if i.get("role") == "developer"]
    assert len(blocks) == 1
    todo = "<todo>\n1. reproduce the bug\n2. fix it\n3. run the tests\n</todo>"
    assert todo in blocks[0]["content"]
    assert third["input"][: len(second["input"])] == second["input"]  # append-only

    # stored once each, in order, under Codex's prompt_cache_key
    rows = stored(mproxy, "0199f3a2-codex-conversation")
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("user", "message", "client"),
        ("user", "message", "client"),
        ("developer", "message", "state"),
        ("assistant", "reasoning", "client"),
        ("assistant", "tool_call", "client"),
        ("tool", "tool_result", "client"),
        ("assistant", "message", "client"),
        ("user", "message", "client"),
        ("assistant", "message", "client"),
    ]
    assert all(r[4] == "ok" for r in rows)

"""Conversations built the way the wire adapters build them, and a governor to run them through.

Both wire formats go through memlane's real adapters (`proxy.wire`), so the
Messages under test are exactly what the proxy hands governance, and the
output can be rendered back to the wire and checked for validity.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any, Literal

from memlane.config import Settings
from memlane.engine.governance.budget import Budget, context_window
from memlane.engine.governance.cache import Governor
from memlane.engine.governance.ledger import Ledger, MemoryLedger
from memlane.engine.governance.summarise import Summariser
from memlane.proxy.wire.chat import ChatAdapter
from memlane.proxy.wire.responses import ResponsesAdapter
from memlane.text.llm import LLM
from memlane.text.tokens import get_tokenizer
from memlane.types import Message

WireName = Literal["chat", "responses"]
WIRES: tuple[WireName, ...] = ("chat", "responses")
MODEL = "test-model"

WORDS = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
)


def noise(chars: int, seed: int) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS) + str(rng.randint(0, 99))
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


class Builder:
    """Appends raw wire items for one conversation; `.messages` parses them with the adapter."""

    def __init__(self, wire: WireName) -> None:
        self.wire = wire
        self.items: list[dict[str, Any]] = []
        self._calls = 0

    def system(self, text: str) -> Builder:
        if self.wire == "chat":
            self.items.append({"role": "system", "content": text})
        else:
            self.items.append({"type": "message", "role": "developer", "content": text})
        return self

    def user(self, text: str) -> Builder:
        if self.wire == "chat":
            self.items.append({"role": "user", "content": text})
        else:
            self.items.append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": text}],
                }
            )
        return self

    def assistant(self, text: str) -> Builder:
        if self.wire == "chat":
            self.items.append({"role": "assistant", "content": text})
        else:
            self.items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                }
            )
        return self

    def reasoning(self, text: str) -> Builder:
        if self.wire == "chat":
            return self  # chat carries reasoning on the assistant message (see `call`)
        self.items.append(
            {
                "type": "reasoning",
                "id": f"rs_{len(self.items)}",
                "summary": [{"type": "summary_text", "text": text}],
                "encrypted_content": "gAAAA" + "x" * 40,
            }
        )
        return self

    def call(self, *calls: tuple[str, dict[str, Any], str]) -> list[str]:
        """Parallel tool calls (name, arguments, output); returns their call ids."""
        ids = []
        for _ in calls:
            self._calls += 1
            ids.append(f"call_{self._calls}")
        if self.wire == "chat":
            self.items.append(
                {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "thinking it over",
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": n, "arguments": json.dumps(a, sort_keys=True)},
                        }
                        for i, (n, a, _) in zip(ids, calls, strict=True)
                    ],
                }
            )
            for i, (_, _, output) in zip(ids, calls, strict=True):
                self.items.append({"role": "tool", "tool_call_id": i, "content": output})
        else:
            for i, (n, a, _) in zip(ids, calls, strict=True):
                self.items.append(
                    {
                        "type": "function_call",
                        "call_id": i,
                        "name": n,
                        "arguments": json.dumps(a, sort_keys=True),
                    }
                )
            for i, (_, _, output) in zip(ids, calls, strict=True):
                self.items.append({"type": "function_call_output", "call_id": i, "output": output})
        return ids

    @property
    def messages(self) -> list[Message]:
        return parse(self.wire, self.items)


def parse(wire: WireName, items: Sequence[dict[str, Any]]) -> list[Message]:
    if wire == "chat":
        return ChatAdapter().parse({"model": MODEL, "messages": list(items)}).messages
    return ResponsesAdapter().parse({"model": MODEL, "input": list(items)}).messages


def render(wire: WireName, messages: Sequence[Message]) -> list[dict[str, Any]]:
    if wire == "chat":
        adapter = ChatAdapter()
        parsed = adapter.parse({"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
        body = adapter.render(parsed, messages)
        return list(body["messages"])
    responses = ResponsesAdapter()
    parsed_r = responses.parse({"model": MODEL, "input": "x"})
    return list(responses.render(parsed_r, messages)["input"])


def assert_valid(messages: Sequence[Message]) -> None:
    """Every tool result follows its call; every call is answered unless it is the last step."""
    opened: set[str] = set()
    answered: set[str] = set()
    for item in messages:
        if item.kind == "tool_result":
            assert item.call_id in opened, f"orphan tool result {item.call_id}"
            answered.add(item.call_id or "")
        else:
            opened.update(c.id for c in item.tool_calls)
    trailing = {c.id for c in messages[-1].tool_calls} if messages else set()
    assert opened - answered <= trailing, f"unanswered calls {opened - answered - trailing}"


def settings_for(tmp_home: Any = None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "governance_context_windows": {MODEL: 8_192},
        "governance_safety_margin": 512,
        "governance_tool_output_limit": 300,
        "governance_protect_tokens": 1_000,
        "governance_summary_max_tokens": 300,
        "governance_recall_chars": 1_200,
    }
    if tmp_home is not None:
        values["home"] = tmp_home
    values.update(overrides)
    return Settings(**values)


def governor(
    settings: Settings,
    *,
    ledger: Ledger | None = None,
    llm: LLM | None = None,
    model: str = MODEL,
) -> Governor:
    budget = Budget.of(settings, context_window(settings, None, model))
    summariser = (
        Summariser(
            llm=llm,
            model=None,
            max_tokens=settings.governance_summary_max_tokens,
            input_chars=8_000,
            verify=settings.governance_summary_verify,
        )
        if llm is not None
        else None
    )
    return Governor(
        settings=settings,
        tokenizer=get_tokenizer("cl100k_base"),
        budget=budget,
        ledger=ledger if ledger is not None else MemoryLedger(),
        summariser=summariser,
        model=model,
    )


def agentic(wire: WireName, steps: int, *, output_chars: int = 1_500, seed: int = 0) -> Builder:
    """A system prompt, a first run answered in text, then `steps` tool steps and answers."""
    b = Builder(wire).system("You are a coding agent.")
    b.user("Set up the project. Keep configuration in config/settings.toml.")
    b.reasoning("plan the setup")
    b.call(("read_file", {"path": "README.md"}, noise(400, seed)))
    b.assistant("Project set up; configuration lives in config/settings.toml.")
    for step in range(steps):
        if step % 4 == 0:
            b.user(f"Next task number {step}: improve module m{step}.")
        b.reasoning(f"considering step {step}")
        b.call((f"tool{step % 3}", {"step": step}, noise(output_chars, seed + step)))
        if step % 4 == 3:
            b.assistant(f"Done with step {step}.")
    return b

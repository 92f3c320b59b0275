"""memlane's own LLM calls to an Anthropic-compatible Messages API (`llm_provider` anthropic).

The same `LLM` contract as the OpenAI-compatible client (one prompt in, one text
out, every failure an `LLMError`), so fact extraction, summaries and `session_ask`
work for a user who only has an Anthropic key (Claude Code). The chat-shaped
messages memlane's prompts are written in become a Messages request: `system`
entries go to the top-level `system`, the rest keep their order. The key goes as
`x-api-key` (memlane's own), or as the client request sent it when borrowed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memlane.text.llm import HTTPLLM, Completion, LLMError, Provider, answered

ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` memlane's own calls send (the stable Messages API)."""
DEFAULT_MAX_TOKENS = 4096
"""Messages requires `max_tokens`; memlane's own prompts ask for short answers."""
PROMPT_USAGE = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
"""The usage counters of a Messages answer that are prompt: cache reads and writes cost too."""


class AnthropicLLM(HTTPLLM):
    """`POST {base_url}/v1/messages` (`base_url` without `/v1`, as
    `anthropic_upstream_url`)."""

    provider: Provider = "anthropic"
    path = "/v1/messages"

    def _key_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    def _call_headers(self) -> dict[str, str]:
        return {**super()._call_headers(), "anthropic-version": ANTHROPIC_VERSION}

    def _shaped(self, body: dict[str, Any], json_mode: bool) -> dict[str, Any]:
        """`json_mode` has no switch in Messages: memlane's prompts ask for JSON in words, and
        their parsers check what comes back."""
        system, turns = split_system(body["messages"])
        shaped = {
            **body,
            "messages": turns,
            "max_tokens": body.get("max_tokens") or DEFAULT_MAX_TOKENS,
        }
        if system:
            shaped["system"] = system
        return shaped

    def _read(self, payload: Any, requested_model: str) -> Completion:
        return parse_message(payload, requested_model)


def split_system(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(the system text, the user / assistant turns) of chat-shaped messages."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        if role in ("system", "developer"):
            system.append(text)
        else:
            turns.append({"role": "assistant" if role == "assistant" else "user", "content": text})
    return "\n\n".join(t for t in system if t), turns


def parse_message(payload: Any, requested_model: str) -> Completion:
    """The text blocks of a Messages answer, joined; usage with cache reads and writes in
    the prompt (what the call cost)."""
    content = payload.get("content") if isinstance(payload, dict) else None
    if not isinstance(content, list):
        raise LLMError("LLM answered without a message (no content blocks)")
    text = "".join(
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )
    return answered(payload, text, requested_model, prompt=PROMPT_USAGE, output="output_tokens")

"""The summariser: a state snapshot of what a compaction drops, made with no tools.

Each compaction sends only the newly dropped items together with the previous
snapshot, and asks for an updated snapshot, so the cost of a compaction does
not grow with the session. An optional second pass checks the snapshot against
the dropped items and fills omissions. Any failure (the LLM is down, answers
nothing usable, or answers something not smaller than what it replaces) falls
back to the previous snapshot plus a static marker saying how many messages
were removed; the dropped items stay recallable from the event log.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memlane.engine.fence import prompt_data
from memlane.engine.governance.ledger import describe
from memlane.text.llm import LLM, LLMError
from memlane.types import Message

SUMMARY_SYSTEM = "You are a conversation summariser. Return only the summary."

SUMMARY_PROMPT = """\
An agent's conversation is being shortened to fit its context window. Below are \
the previous state snapshot (empty at the first compaction) and the messages \
that are now being removed. Write the updated state snapshot that replaces both.

Keep, concisely:
- the user's goal, instructions and preferences;
- key decisions and their reasons, and outcomes;
- file paths, identifiers, commands and tool names referenced;
- names of people and the figures given (ports, limits, sizes, counts, versions);
- errors met and how they were fixed or worked around;
- pending tasks and the next steps.
Drop pleasantries, repeated content and raw tool output. Do not invent anything.

<previous_snapshot>
{previous}
</previous_snapshot>

<removed_messages>
{removed}
</removed_messages>

Answer with the snapshot only, inside <state_snapshot></state_snapshot>."""

VERIFY_PROMPT = """\
Check this state snapshot against the removed messages it must stand for. Add \
anything important it omits (decisions, file paths, names and figures, errors \
and fixes, user preferences, pending tasks) and correct anything wrong. Keep it concise.

<state_snapshot>
{snapshot}
</state_snapshot>

<removed_messages>
{removed}
</removed_messages>

Answer with the complete corrected snapshot only, inside <state_snapshot></state_snapshot>."""

MARKER = (
    "[Earlier conversation trimmed: {count} messages removed to stay within the context budget]"
)

ITEM_CHARS = 1_500
"""Characters of one removed item shown to the summariser (tool outputs are long)."""

_SNAPSHOT = re.compile(r"<state_snapshot>(.*?)(?:</state_snapshot>|$)", re.S | re.I)


class SummaryError(Exception):
    """The summariser's answer cannot be used."""


def parse_snapshot(answer: str) -> str:
    """The snapshot inside the answer's tags, or the whole answer when untagged; never empty."""
    match = _SNAPSHOT.search(answer)
    text = (match.group(1) if match else answer).strip()
    if not text:
        raise SummaryError("the summariser returned an empty snapshot")
    return text


def render_removed(items: Sequence[Message], budget_chars: int) -> str:
    """The removed items as text, each item capped so the whole fits `budget_chars`."""
    per_item = max(200, min(ITEM_CHARS, budget_chars // max(1, len(items))))
    lines = []
    for item in items:
        text = describe(item)
        if len(text) > per_item:
            text = text[:per_item] + f" […{len(text) - per_item} chars]"
        lines.append(text)
    return "\n".join(lines)


def marker(previous: str, count: int) -> str:
    line = MARKER.format(count=count)
    return f"{previous}\n{line}" if previous else line


@dataclass(frozen=True, slots=True)
class Summariser:
    llm: LLM
    model: str | None
    max_tokens: int
    input_chars: int
    """Most characters of removed items sent in one call (the summary model's window)."""
    verify: bool = False

    async def snapshot(self, previous: str, removed: Sequence[Message]) -> str:
        """The updated snapshot. Raises `LLMError` / `SummaryError` for the caller's fallback."""
        text = prompt_data(render_removed(removed, self.input_chars))
        prompt = SUMMARY_PROMPT.format(previous=prompt_data(previous) or "(none)", removed=text)
        snapshot = await self._ask(prompt)
        if self.verify:
            check = VERIFY_PROMPT.format(snapshot=prompt_data(snapshot), removed=text)
            with contextlib.suppress(LLMError, SummaryError):  # the first pass stands
                snapshot = await self._ask(check)
        return snapshot

    async def _ask(self, prompt: str) -> str:
        completion = await self.llm.complete(
            [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": prompt}],
            model=self.model,
            max_tokens=self.max_tokens,
        )
        return parse_snapshot(completion.text)

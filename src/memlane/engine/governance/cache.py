"""Cache-stable compaction: the orchestration of the passes, one request at a time.

Between compactions the forwarded history is the stored plan applied to the
request, so a request that only appends is forwarded as the previous request
plus its new items, byte for byte. When a request grows past the threshold, a
compaction makes a new plan that brings it down to the target, well below the
threshold, so the next many requests append again:

1. mask (pass 1): large old tool outputs become previews (offloaded);
2. window (pass 2), if still above the target: keep the head and a tail, drop
   a new stretch of the middle, fold it into the snapshot (summariser, or the
   static marker), strip reasoning from the kept head;
3. the new plan is kept only if it makes the request smaller (inflation guard).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from memlane.config import Settings
from memlane.engine import threads
from memlane.engine.governance import mask, render, window
from memlane.engine.governance.budget import Budget
from memlane.engine.governance.ledger import EVENT_INFLATED, EVENT_SUMMARY_FAILED, Ledger
from memlane.engine.governance.plan import Plan
from memlane.engine.governance.structure import (
    last_user_turn,
    leading_instructions,
    safe_cuts,
)
from memlane.engine.governance.summarise import MARKER, Summariser, SummaryError
from memlane.text.llm import LLMError
from memlane.text.tokens import REPLY_PRIMING, Tokenizer
from memlane.types import Message

SUMMARY_OVERHEAD = 40
"""Tokens of the summary message's title and framing."""

_MARKER_LINE = re.compile(re.escape(MARKER).replace(r"\{count\}", r"(\d+)") + r"\s*$")


@dataclass
class Stats:
    """What one governed request cost, for logs and the benchmark."""

    tokens_in: int = 0
    tokens_out: int = 0
    compacted: bool = False
    summariser_calls: int = 0
    summarised: bool = False
    """The snapshot in force was written by the summariser at this request."""
    summary_failure: str = ""
    """Why the summariser's last snapshot was not taken (its error, or that it was not
    smaller than what it replaces): what a person who asked for a compaction is told."""
    llm_seconds: float = 0.0
    masked: int = 0
    """Tool results newly shown as their preview."""
    masked_tokens: int = 0
    """Tokens those previews saved."""
    dropped: int = 0
    """Items newly replaced by the snapshot."""
    dropped_tokens: int = 0
    dropped_span: tuple[int, int] | None = None
    """First and last client index newly dropped."""
    dropped_kinds: dict[str, int] = field(default_factory=dict)
    """What was dropped: counts by `user`, `assistant`, `tool_call`, `tool_result`, …"""
    snapshot: str = ""
    """How the dropped span is stood for: `summary` (the summariser's) or `marker`."""
    tail_tokens: int = 0
    """Tokens of the verbatim tail a window pass kept (0: no window pass)."""
    tail_budget: int = 0
    """What the tail could take at that pass: the target less head, snapshot and recall."""
    notes: list[str] = field(default_factory=list)


@dataclass
class Governor:
    """Everything one governed request needs; built per request by the face."""

    settings: Settings
    tokenizer: Tokenizer
    budget: Budget
    ledger: Ledger
    summariser: Summariser | None
    model: str = ""
    fixed_tokens: int = 0
    """Tokens the request costs outside its messages (Responses `instructions`)."""

    def count(self, message: Message) -> int:
        return self.tokenizer.count_message(message)

    def total(self, messages: Sequence[Message]) -> int:
        return REPLY_PRIMING + self.fixed_tokens + sum(self.count(m) for m in messages)

    def fits(self, messages: Sequence[Message]) -> bool:
        """Whether `messages` are under the compaction threshold (the limit, if none) by
        their size alone (`Tokenizer.bound`): no text is encoded."""
        room = self.budget.threshold or self.budget.limit
        bound = REPLY_PRIMING + self.fixed_tokens
        for message in messages:
            bound += self.tokenizer.bound(message)
            if bound > room:
                return False
        return True

    def render(self, plan: Plan, messages: Sequence[Message]) -> list[Message]:
        return render.apply(plan, messages, self.settings, self.count)

    async def compact(
        self,
        plan: Plan,
        messages: Sequence[Message],
        stats: Stats,
        *,
        force: bool = False,
        headless: bool = False,
    ) -> Plan:
        """A new plan that brings `messages` down to the target (or as close as it can).
        `headless`: the head goes too (`flow.govern`, when keeping it leaves no room)."""
        conversation = [m for m in messages if m.origin == "client"]
        if not conversation:
            return plan
        others = sum(self.count(m) for m in messages if m.origin != "client")
        counts = [self.count(m) for m in conversation]
        masked = dict(plan.masked)
        gone = set(plan.dropped_indices())
        for index in mask.choose(conversation, counts, self.settings, self.budget, masked, gone):
            masked[index] = await threads.to_thread(
                self.ledger.offload, index, conversation[index], counts[index]
            )
            stats.masked += 1
            stats.masked_tokens += counts[index] - self._preview_count(
                conversation[index], counts[index], masked[index]
            )
        plan = replace(plan, masked=masked)
        effective = [
            self._preview_count(m, counts[i], masked[i]) if i in masked else counts[i]
            for i, m in enumerate(conversation)
        ]
        current = self.total(self.render(plan, messages))
        if current <= self.budget.target and not force and not headless:
            return plan.covering(conversation) if stats.masked else plan
        return await self._window(
            plan, conversation, effective, others, stats, force=force, headless=headless
        )

    async def _window(
        self,
        plan: Plan,
        conversation: list[Message],
        counts: list[int],
        others: int,
        stats: Stats,
        *,
        force: bool = False,
        headless: bool = False,
    ) -> Plan:
        cuts = safe_cuts(conversation)
        reserve = (
            others
            + REPLY_PRIMING
            + self.fixed_tokens
            + self.budget.summary
            + SUMMARY_OVERHEAD
            + self.budget.recall
        )
        if headless:  # only the instructions stay in front of the summary
            head = leading_instructions(conversation)
        elif plan.trims:
            head = plan.head
        else:
            head = window.choose_head(conversation, counts, cuts, self.budget.target // 4)
        room = self.budget.target - reserve - sum(counts[:head])
        # After the head and the snapshot, what is left of the target goes to the newest
        # messages (never less than the tail share, never more than the room).
        tail_budget = 0 if force else max(0, room)
        shrunk = self._preview_counts(conversation, counts, plan, max(head, plan.dropped))
        chosen = window.choose(
            conversation, counts, cuts, plan, head=head, tail_budget=tail_budget, shrunk=shrunk
        )
        masked = dict(plan.masked)
        for index in chosen.masked:
            if index not in masked:
                masked[index] = await threads.to_thread(
                    self.ledger.offload, index, conversation[index], counts[index]
                )
                stats.masked += 1
                stats.masked_tokens += counts[index] - shrunk[index]
        stats.tail_budget = tail_budget
        stats.tail_tokens = sum(
            shrunk[i] if i in chosen.masked else counts[i]
            for i in range(chosen.dropped, len(conversation))
        )
        before = set(plan.dropped_indices()) if plan.trims else set()
        after = replace(
            plan, head=head, dropped=chosen.dropped, pinned=chosen.pinned, masked=masked
        )
        newly = [i for i in after.dropped_indices() if i not in before]
        if not newly:  # nothing more to drop: only the previews the tail needed
            return replace(plan, masked=masked).covering(conversation)
        removed = [conversation[i] for i in newly]
        removed_tokens = sum(counts[i] for i in newly)
        snapshot = await self._snapshot(plan.snapshot, removed, removed_tokens, stats)
        user = last_user_turn(conversation)
        dropped_set = set(after.dropped_indices())
        await threads.to_thread(
            self.ledger.record_dropped,
            [(i, conversation[i]) for i in newly if i not in plan.masked],
        )
        stats.dropped += len(newly)
        stats.dropped_tokens += removed_tokens
        stats.dropped_span = (newly[0], newly[-1])
        for i in newly:
            kind = conversation[i].kind
            label = conversation[i].role if kind == "message" else kind
            stats.dropped_kinds[label] = stats.dropped_kinds.get(label, 0) + 1
        return replace(
            after,
            snapshot=snapshot,
            # wire messages, not items: an Anthropic message is one item per content block
            summarised=(plan.summarised if plan.trims else 0)
            + sum(1 for i in newly if not conversation[i].continues),
            masked={i: ref for i, ref in after.masked.items() if i not in dropped_set},
            strip_reasoning=user is not None and user >= head,
            compactions=plan.compactions + 1,
        ).covering(conversation)

    def _preview_count(self, message: Message, tokens: int, reference: str) -> int:
        return self.count(mask.masked(message, self.settings, tokens, reference))

    def _preview_counts(
        self, conversation: list[Message], counts: list[int], plan: Plan, start: int
    ) -> list[int]:
        """What each item from `start` on would cost as a preview: tool results only, the
        rest as they are (items before `start` cannot be in the tail)."""
        out = list(counts)
        for i in range(start, len(conversation)):
            message = conversation[i]
            if message.kind == "tool_result" and i not in plan.masked:
                preview = mask.masked(message, self.settings, counts[i], PREVIEW_REFERENCE)
                out[i] = min(counts[i], self.count(preview))
        return out

    async def _snapshot(
        self, previous: str, removed: list[Message], removed_tokens: int, stats: Stats
    ) -> str:
        fallback = add_marker(previous, len(removed))
        stats.snapshot = "marker"
        if self.summariser is None or not self.settings.governance_summarise:
            return fallback
        started = time.perf_counter()
        stats.summariser_calls += 1
        try:
            snapshot = await self.summariser.snapshot(previous, removed)
        except (LLMError, SummaryError) as exc:
            stats.summary_failure = str(exc)[:300]
            await threads.to_thread(
                self.ledger.record_event,
                EVENT_SUMMARY_FAILED,
                {"removed": len(removed), "error": str(exc)[:300]},
            )
            return fallback
        finally:
            stats.llm_seconds += time.perf_counter() - started
        replaced = self.tokenizer.count(previous) + removed_tokens
        if self.tokenizer.count(snapshot) >= replaced:
            # Inflation guard: a summary not smaller than what it replaces is rolled back;
            # the span is folded into the marker and never summarised again.
            stats.summary_failure = (
                f"its summary was not smaller than the {replaced} tokens it replaces"
            )
            await threads.to_thread(
                self.ledger.record_event,
                EVENT_INFLATED,
                {"removed": len(removed), "replaced_tokens": replaced},
            )
            return fallback
        stats.summarised = True
        stats.snapshot = "summary"
        return snapshot


PREVIEW_REFERENCE = "$MEMLANE_HOME/sessions/<session>/tool-outputs/<output>.txt"
"""A reference as long as a real one, to price a preview before its output is offloaded."""


def add_marker(previous: str, count: int) -> str:
    """Append (or extend) the static marker line of messages removed without a summary."""
    match = _MARKER_LINE.search(previous)
    if match:
        count += int(match.group(1))
        previous = previous[: match.start()].rstrip()
    line = MARKER.format(count=count)
    return f"{previous}\n{line}" if previous else line

"""`memlane sessions context REF`: what the session's next request would forward, by part.

The same figures the proxy reports per response in `X-Memlane-Context`, for a
client that does not show response headers (Codex CLI, most agent frameworks):
the next request's tokens by part (head, snapshot, tail, scaffold, recalled
memories, re-injected snippets) against the model's limit, the plan in force,
and the newest compactions with what each dropped.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memlane.cli.context import console, escape, fail, opened_runtime, print_json
from memlane.cli.options import JsonOpt

if TYPE_CHECKING:
    from memlane.engine.governance.breakdown import Breakdown

LABELS = {
    "head": "head (instructions, first run)",
    "snapshot": "snapshot of dropped messages",
    "tail": "tail (newest messages)",
    "scaffold": "scaffold (state blocks)",
    "memories": "recalled memories",
    "snippets": "re-injected snippets",
}


def context(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="Session id, id prefix, key or name.")],
    events: Annotated[
        int, typer.Option("--events", min=0, help="How many recent compactions to list.")
    ] = 5,
    as_json: JsonOpt = False,
) -> None:
    """What the session's next request would forward, by part, in tokens of its model."""
    from memlane.engine.governance.breakdown import breakdown
    from memlane.engine.sessions.lookup import SessionLookupError, find_session
    from memlane.engine.tenancy import OPERATOR

    with opened_runtime(ctx) as rt:
        try:
            session = find_session(rt.store, ref, tenant=OPERATOR)
        except SessionLookupError as exc:
            fail(str(exc))
        result = asyncio.run(breakdown(rt, session, events=events))
    if as_json:
        print_json(result.to_json())
        return
    _print(result)


def _print(result: Breakdown) -> None:
    from memlane.engine.governance.report import describe_event

    share = result.total / result.limit if result.limit else 0.0
    console.print(
        f"[bold]{result.session_id}[/]  model {result.model or '(none yet)'}: window "
        f"{result.window:,} ({_source(result.window_source)}), limit {result.limit:,}",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"next request: {result.total:,} tokens ({share:.0%} of the limit); a compaction starts "
        f"above {result.threshold:,} and brings it to {result.target:,}",
        highlight=False,
        soft_wrap=True,
    )
    width = max(len(label) for label in LABELS.values())
    for part in result.parts:
        console.print(
            f"  {LABELS[part.name]:<{width}}  {part.tokens:>9,} tokens  {part.items:>5} items",
            highlight=False,
        )
    console.print(f"  {'total':<{width}}  {result.total:>9,} tokens", highlight=False)
    if result.compacts_next:
        console.print("the next request will compact (it is over the threshold already)")
    who = "memlane supplies it (server-side history)" if result.history == "server" else "resent"
    console.print(
        f"history: {who}; plan: {result.compactions} compactions, the snapshot stands for "
        f"{result.summarised} messages, {result.masked} tool outputs shown as previews",
        highlight=False,
        soft_wrap=True,
    )
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    if result.events:
        console.print("recent compactions:")
        for event in result.events:
            console.print(f"  {_when(event)}  {escape(describe_event(event))}", highlight=False)


def _source(source: str) -> str:
    return {
        "config": "configured",
        "learned": "learned from an upstream overflow error",
        "upstream": "stated by the upstream's model list",
        "table": "built-in table",
        "default": "assumed: unknown model, governance_default_window",
    }.get(source, source)


def _when(event: dict[str, Any]) -> str:
    return str(event.get("created_at", ""))[:16].replace("T", " ")

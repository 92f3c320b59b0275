"""`memlane eval retrieval FILE.jsonl`: Recall@k and NDCG@10 of memory retrieval.

The conversations are ingested into a throw-away store (a temporary folder;
your data home is never touched) with your embedder settings, and each scored
question goes through the read path's `search`. `--method bm25|dense` measures
the plain first-stage lists the same way, as baselines.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from memlane.cli.context import console, err_console, fail, print_json, state
from memlane.engine.retrieval.evaluation import (
    CATEGORIES,
    NDCG_K,
    Conversation,
    EvalFileError,
    EvalResult,
    evaluate,
    ingest,
    load_conversations,
)
from memlane.engine.retrieval.search import Method
from memlane.engine.runtime import Runtime
from memlane.store.sqlite import SQLiteStore

app = typer.Typer(
    help="Measure memlane: retrieval quality on a conversation file.", no_args_is_help=True
)


@app.command("retrieval")
def retrieval(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="JSONL conversations with questions and gold turns.")
    ],
    k: Annotated[
        list[int] | None, typer.Option("--k", min=1, max=100, help="Recall@k (repeatable).")
    ] = None,
    method: Annotated[
        Literal["memlane", "bm25", "dense"], typer.Option("--method", help="What to rank with.")
    ] = "memlane",
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Ingest each conversation's turns, ask each scored question, print the metrics."""
    ks = tuple(sorted(set(k or [5, 10])))
    try:
        conversations = load_conversations(file)
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}")
    except EvalFileError as exc:
        fail(str(exc))
    settings = state(ctx).settings
    questions = sum(q.scored for c in conversations for q in c.questions)
    with tempfile.TemporaryDirectory(prefix="memlane-eval-") as folder:
        home = Path(folder)
        scratch = settings.model_copy(update={"home": home, "store_url": None, "memory_git": False})
        store = SQLiteStore(home / "memlane.db")
        rt = Runtime(scratch, store)
        try:
            result = asyncio.run(_measure(rt, conversations, ks, method, questions))
        finally:
            store.close()
    if as_json:
        print_json(result.as_json())
    else:
        console.print(_table(result))


async def _measure(
    rt: Runtime,
    conversations: list[Conversation],
    ks: tuple[int, ...],
    method: Method,
    questions: int,
) -> EvalResult:
    turns = sum(len(c.turns) for c in conversations)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        embedding = bar.add_task("embedding turns", total=turns)
        count = await ingest(rt, conversations, lambda done: bar.update(embedding, completed=done))
        asking = bar.add_task("asking questions", total=questions)
        result = await evaluate(
            rt,
            conversations,
            ks=ks,
            method=method,
            progress=lambda done: bar.update(asking, completed=done),
        )
    result.turns = count
    return result


def _table(result: EvalResult) -> Table:
    names = [f"recall@{k}" for k in result.ks] + [f"ndcg@{NDCG_K}"]
    table = Table(title=f"retrieval: {result.method} ({result.turns} turns)")
    table.add_column("category")
    table.add_column("questions", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    rows = [(CATEGORIES.get(c, str(c)), s) for c, s in sorted(result.by_category.items())]
    rows.append(("overall", result.overall))
    for label, scores in rows:
        mean = scores.mean()
        table.add_row(label, str(scores.count), *(f"{mean.get(n, 0.0):.3f}" for n in names))
    return table

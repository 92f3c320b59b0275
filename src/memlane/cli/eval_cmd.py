"""`memlane eval retrieval [FILE.jsonl]`: Recall@k, NDCG@10 and query time, side by side.

The conversations are ingested once into a throw-away store (a temporary folder;
your data home is never touched), and each scored question goes through the read
path's `search` under each configuration:

- `default`: the read path with your settings (a new user's: keyword search over
  context-expanded turns, then recency; no model);
- `hybrid`: the same with dense retrieval on (`memory_dense = "on"`: your embedder,
  score fusion, MMR);
- `bm25` and `dense`: the plain first-stage lists, as baselines;
- `plain`: BM25 over each turn alone (no date, no neighbours), in a store of its
  own: the baseline the context-expanded documents are measured against.

With no file, the sample conversations shipped with memlane are used (`SAMPLE_FILE`):
they show the command working, not how good retrieval is.

Figures are printed per category, per conversation, with each configuration's
query time (p50 / p95 ms of the `search` call).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated, Literal, get_args

import typer
from rich.progress import TaskID
from rich.table import Table

from memlane.cli.context import console, err_console, fail, print_json, progress_bar, state
from memlane.cli.options import JsonOpt
from memlane.engine.retrieval.evaluation import (
    CATEGORIES,
    NDCG_K,
    SAMPLE_FILE,
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


Config = Literal["default", "hybrid", "bm25", "dense", "plain"]
METHODS: dict[str, Method] = {
    "default": "memlane",
    "hybrid": "memlane",
    "bm25": "bm25",
    "dense": "dense",
    "plain": "bm25",
}


@app.command("retrieval")
def retrieval(
    ctx: typer.Context,
    file: Annotated[
        Path | None,
        typer.Argument(
            help="JSONL conversations with questions and gold turns "
            "(default: the small sample shipped with memlane).",
            show_default=False,
        ),
    ] = None,
    k: Annotated[
        list[int] | None, typer.Option("--k", min=1, max=100, help="Recall@k (repeatable).")
    ] = None,
    configs: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            help="default, hybrid, bm25, dense or plain (repeatable; default: all five).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingest each conversation's turns, ask each scored question, print the metrics."""
    ks = tuple(sorted(set(k or [5, 10])))
    if file is None:
        file = SAMPLE_FILE
        if not as_json:
            err_console.print(
                f"no file given: the sample conversations shipped with memlane ({file})"
            )
    try:
        conversations = load_conversations(file)
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}")
    except EvalFileError as exc:
        fail(str(exc))
    settings = state(ctx).settings
    questions = sum(q.scored for c in conversations for q in c.questions)
    known = get_args(Config)
    unknown = [c for c in configs or [] if c not in known]
    if unknown:
        fail(f"unknown configuration {unknown[0]!r}: use {', '.join(known)}")
    chosen = list(dict.fromkeys(configs or known))
    with tempfile.TemporaryDirectory(prefix="memlane-eval-") as folder:
        home = Path(folder)
        scratch = settings.model_copy(update={"home": home, "store_url": None, "memory_git": False})
        store = SQLiteStore(home / "memlane.db")
        baseline = SQLiteStore(home / "plain.db")
        rt = Runtime(scratch, store)
        try:
            results = asyncio.run(
                _measure(rt, Runtime(scratch, baseline), conversations, ks, chosen, questions)
            )
        finally:
            store.close()
            baseline.close()
    if as_json:
        print_json({"configs": [{"config": name, **r.as_json()} for name, r in results]})
        return
    for name, result in results:
        console.print(_table(name, result))
    if len(results) > 1:
        console.print(_by_category(results))
        console.print(_summary(results))


def _variant(rt: Runtime, config: str) -> Runtime:
    """The runtime a configuration searches with: same store and embedder, its settings."""
    if config != "hybrid":
        return rt
    settings = rt.settings.model_copy(update={"memory_dense": "on"})
    return Runtime(settings, rt.store, _embedder=rt._embedder, _llm=rt._llm)


async def _measure(
    rt: Runtime,
    plain: Runtime,
    conversations: list[Conversation],
    ks: tuple[int, ...],
    configs: list[str],
    questions: int,
) -> list[tuple[str, EvalResult]]:
    turns = sum(len(c.turns) for c in conversations)
    dense = any(c in ("hybrid", "dense") for c in configs) or rt.settings.dense_retrieval
    results = []
    with progress_bar() as bar:
        label = "indexing and embedding turns" if dense else "indexing turns"
        indexing = bar.add_task(label, total=turns)
        count = await ingest(
            rt, conversations, lambda done: bar.update(indexing, completed=done), embed=dense
        )
        bar.update(indexing, completed=turns)
        if "plain" in configs:
            await ingest(plain, conversations, alone=True)
        for config in configs:
            asking = bar.add_task(f"asking questions ({config})", total=questions)

            def advance(done: int, task: TaskID = asking) -> None:
                bar.update(task, completed=done)

            alone = config == "plain"
            result = await evaluate(
                plain if alone else _variant(rt, config),
                conversations,
                ks=ks,
                method=METHODS[config],
                alone=alone,
                progress=advance,
            )
            result.turns = count
            results.append((config, result))
    return results


def _table(name: str, result: EvalResult) -> Table:
    names = [f"recall@{k}" for k in result.ks] + [f"ndcg@{NDCG_K}"]
    latency = f"query p50 {result.latency(0.5):.2f} ms, p95 {result.latency(0.95):.2f} ms"
    table = Table(title=f"retrieval: {name} ({result.turns} turns; {latency})")
    table.add_column("category / conversation")
    table.add_column("questions", justify="right")
    for column in names:
        table.add_column(column, justify="right")
    rows = [(CATEGORIES.get(c, str(c)), s) for c, s in sorted(result.by_category.items())]
    rows += [(f"  {c}", s) for c, s in sorted(result.by_conversation.items())]
    rows.append(("overall", result.overall))
    for label, scores in rows:
        mean = scores.mean()
        table.add_row(label, str(scores.count), *(f"{mean.get(n, 0.0):.3f}" for n in names))
    return table


def _summary(results: list[tuple[str, EvalResult]]) -> Table:
    """One line per configuration: the overall figures and the query time."""
    first = results[0][1]
    names = [f"recall@{k}" for k in first.ks] + [f"ndcg@{NDCG_K}"]
    table = Table(title="configurations side by side")
    table.add_column("config")
    for column in names:
        table.add_column(column, justify="right")
    table.add_column("query p50 / p95 ms", justify="right")
    for name, result in results:
        mean = result.overall.mean()
        timing = f"{result.latency(0.5):.2f} / {result.latency(0.95):.2f}"
        table.add_row(name, *(f"{mean.get(n, 0.0):.3f}" for n in names), timing)
    return table


def _by_category(results: list[tuple[str, EvalResult]]) -> Table:
    """One line per configuration: each category's recall at the largest k."""
    first = results[0][1]
    top = f"recall@{first.ks[-1]}"
    categories = sorted(first.by_category)
    table = Table(title=f"{top} per category, side by side")
    table.add_column("config")
    for category in categories:
        table.add_column(CATEGORIES.get(category, str(category)), justify="right")
    for name, result in results:
        cells = [f"{result.by_category[c].mean().get(top, 0.0):.3f}" for c in categories]
        table.add_row(name, *cells)
    return table

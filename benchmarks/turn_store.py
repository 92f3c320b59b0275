"""Storing one turn: the writer thread's work per request, without HTTP or an upstream.

Run: .venv/bin/python benchmarks/turn_store.py [--sessions 40] [--turns 30] [--measure 5]
        [--variant defaults|memory-off] [--tool-bytes N] [--profile N]

Each of `--sessions` sessions is brought to `--turns` turns first (not measured), the way
`benchmarks/load.py`'s clients grow theirs: a Chat Completions history (a system prompt,
then a user question and the assistant's answer per turn) that the client resends whole.
With `--tool-bytes N` each turn is an agent's: the question, the model's call of a tool,
the tool's result (N bytes of memlane's own source, as a file read returns it), then
the answer.
Then `--measure` more turns of each session are stored and timed, as the proxy stores a
turn: the request parsed from its wire form (a history resent reuses what it parsed into
the turn before, `types.resent`), the client's messages synced
(`store_incoming`), the stored history's edit point found (`Store.edit_point`, the read
the scaffold makes), then the answer with its usage and the turn's record
(`store_answer`); the writes of every session's turn are committed in one batch per
step, each in its savepoint, as the store's writer does (`store.group_commit`).
Printed: CPU microseconds per turn for each step and in all (`time.thread_time`: this
thread alone, not the search index catching up in its own); `--profile N` prints the
top N functions of a cProfile of the measured turns (`--sort`: by their own time).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load import QUESTION  # noqa: E402
from benchmarks.proxy_overhead import ANSWER  # noqa: E402

from memlane.config import Settings  # noqa: E402
from memlane.engine.runtime import Runtime  # noqa: E402
from memlane.engine.turn import Answer, Turn  # noqa: E402
from memlane.engine.turn_store import store_answer, store_incoming  # noqa: E402
from memlane.proxy.wire.chat import ChatAdapter  # noqa: E402
from memlane.store.sqlite import SQLiteStore  # noqa: E402
from memlane.types import Message, Session  # noqa: E402
from memlane.types.resent import RESENT, Resend  # noqa: E402

SYSTEM = "You are a careful coding agent."
REUSE = Resend(RESENT)
"""The proxy's parse (its body's size bounds what is kept: these are small)."""


SOURCE = "\n".join(p.read_text() for p in sorted((ROOT / "src" / "memlane").rglob("*.py")))
"""What a tool that reads files returns: real code, not repeated filler."""


def history(key: str, turns: int, tool_bytes: int = 0) -> list[dict[str, Any]]:
    """The wire messages of a request for turn `turns` (0-based) of session `key`."""
    items: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in range(turns + 1):
        items.append({"role": "user", "content": f"{key} turn {turn}: {QUESTION}"})
        if tool_bytes:
            items.extend(tool_round(key, turn, tool_bytes))
        if turn < turns:
            items.append({"role": "assistant", "content": ANSWER})
    return items


def tool_round(key: str, turn: int, size: int) -> list[dict[str, Any]]:
    """The model's call of a file-reading tool and the tool's result, `size` bytes of code."""
    call = {
        "id": f"call-{turn}",
        "type": "function",
        "function": {"name": "read_file", "arguments": f'{{"path": "src/{key}/{turn}.py"}}'},
    }
    start = zlib.crc32(f"{key}/{turn}".encode()) % max(1, len(SOURCE) - size)
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": SOURCE[start : start + size]},
    ]


def parsed_turn(key: str, turn: int, session: Session | None, tool_bytes: int = 0) -> Turn:
    """The turn as the proxy has it once it parsed the request and found its session."""
    body = {"model": "bench", "messages": history(key, turn, tool_bytes), "stream": True}
    messages = ChatAdapter().parse(body, REUSE).messages
    t = Turn(key=key, namespace="default", model="bench", wire="chat", messages=messages)
    t.client = "bench/1.0"
    t.session = session
    return t


def one_round(
    rt: Runtime,
    sessions: dict[str, Session | None],
    turn: int,
    seconds: dict[str, float],
    tool_bytes: int = 0,
) -> None:
    """Turn `turn` of every session, the writer's way: each step's writes of all of them in
    one batch (one transaction), each write in its own savepoint."""
    store = rt.store
    started = time.thread_time()
    turns = [parsed_turn(key, turn, session, tool_bytes) for key, session in sessions.items()]
    lap = _lap(seconds, "parse", started)
    with store.batch():
        for t in turns:
            with store.transaction():
                store_incoming(rt, t)
    lap = _lap(seconds, "store_incoming", lap)
    for t in turns:
        assert t.session is not None
        store.edit_point(t.session.id, [m for m in t.messages if m.origin == "client"])
    lap = _lap(seconds, "edit_point", lap)
    with store.batch():
        for t in turns:
            with store.transaction():
                store_answer(rt, t, Answer([Message("assistant", ANSWER, wire="chat")], 999, 40))
    _lap(seconds, "store_answer", lap)
    sessions.update((t.key, t.session) for t in turns)


def _lap(seconds: dict[str, float], name: str, since: float) -> float:
    now = time.thread_time()
    seconds[name] = seconds.get(name, 0.0) + now - since
    return now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--measure", type=int, default=5)
    parser.add_argument("--variant", choices=["defaults", "memory-off"], default="memory-off")
    parser.add_argument("--tool-bytes", type=int, default=0, metavar="N")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--sort", default="tottime", help="the profile's order (cumulative...)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            home=Path(tmp),
            embedding_backend="hashing",
            memory_enabled=args.variant == "defaults",
        )
        store = SQLiteStore(settings.database_path)
        rt = Runtime(settings, store)
        try:
            sessions: dict[str, Session | None] = {f"bench-{n}": None for n in range(args.sessions)}
            for turn in range(args.turns):
                one_round(rt, sessions, turn, {}, args.tool_bytes)
            seconds: dict[str, float] = {}
            profile = cProfile.Profile(time.thread_time) if args.profile else None
            for turn in range(args.turns, args.turns + args.measure):
                if profile is not None:
                    profile.enable()
                one_round(rt, sessions, turn, seconds, args.tool_bytes)
                if profile is not None:
                    profile.disable()
        finally:
            store.close()
    count = args.sessions * args.measure
    print(
        f"{count} turns measured (turns {args.turns}..{args.turns + args.measure - 1}), "
        f"variant {args.variant}, tool results of {args.tool_bytes} bytes"
    )
    total = 0.0
    for name, spent in seconds.items():
        total += spent
        print(f"  {name:<16} {spent / count * 1e6:8.0f} µs CPU per turn")
    print(f"  {'total':<16} {total / count * 1e6:8.0f} µs CPU per turn")
    if profile is not None:
        pstats.Stats(profile).sort_stats(args.sort).print_stats(args.profile)


if __name__ == "__main__":
    main()

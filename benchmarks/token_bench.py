"""Token counting over a long agent history, as governance does on every request.

Run: .venv/bin/python benchmarks/token_bench.py [--turns 300] [--requests 30]

The history has `turns` turns (user prompt, assistant tool call, tool output of
2–50 KB, assistant answer); each simulated request counts every message of the
history so far plus a new turn. The first request counts everything cold; later
ones find the long tool outputs in the tokenizer's memo. Prints p50/p95/max per
request (the budget is p95 ≤ 30 ms).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from memlane.text.tokens import BPETokenizer, count_messages, load_encoding
from memlane.types import Message, ToolCall

CODE_WORDS = "def class return import self value error path config result for in if else"
LINE_WORDS = CODE_WORDS.split()


def tool_output(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    total = 0
    while total < size:
        line = f"{rng.randint(1, 9999):>5}: " + " ".join(
            rng.choices(LINE_WORDS, k=rng.randint(3, 14))
        )
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def history(turns: int, seed: int = 11) -> list[Message]:
    rng = random.Random(seed)
    out: list[Message] = [Message(role="system", text="You are a coding agent. " * 40)]
    for i in range(turns):
        call = ToolCall(id=f"call_{i}", name="read_file", arguments=f'{{"path": "src/m{i}.py"}}')
        out += [
            Message(role="user", text=f"Step {i}: please look at module {i} and fix the bug."),
            Message(role="assistant", kind="tool_call", tool_calls=(call,)),
            Message(
                role="tool",
                kind="tool_result",
                call_id=call.id,
                text=tool_output(rng, rng.randint(2_000, 50_000)),
            ),
            Message(role="assistant", text=f"I changed module {i}; the tests pass now."),
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()

    started = time.perf_counter()
    tokenizer = BPETokenizer(load_encoding("cl100k_base"))
    print(f"cl100k_base load: {time.perf_counter() - started:.2f} s")
    messages = history(args.turns + args.requests)
    base = 1 + 4 * args.turns
    size = sum(len(m.text) for m in messages[:base])
    print(f"history: {base} messages, {size / 1e6:.1f} MB of text")

    started = time.perf_counter()
    total = count_messages(tokenizer, messages[:base])
    cold = time.perf_counter() - started
    print(f"cold count of the whole history: {cold * 1000:.0f} ms ({total:,} tokens)")

    timings: list[float] = []
    for request in range(args.requests):
        upto = base + 4 * (request + 1)
        started = time.perf_counter()
        count_messages(tokenizer, messages[:upto])
        timings.append(time.perf_counter() - started)
    timings.sort()
    p50 = statistics.median(timings) * 1000
    p95 = timings[min(len(timings) - 1, int(0.95 * len(timings)))] * 1000
    print(
        f"per request (history + 1 new turn, memo warm), {args.requests} requests: "
        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {timings[-1] * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()

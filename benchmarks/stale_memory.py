"""Memories that know when the code moved on: flags, renames and the cost at recall.

Run: .venv/bin/python benchmarks/stale_memory.py [--files 100] [--recalls 2000] [--seed 7]

A temporary git repository holds `--files` source files (30-60 lines each, in a few
folders); 200 facts cite them, two per file ("`fn_7` in pkg/b/mod_007.py returns a
dict", "pkg/b/mod_007.py is imported by the CLI"), each recorded as the write path
records it (`engine.memory.cites.note_all`, eight at a time: the cited file's git blob
id and HEAD). Then
three later commits: 30 files edited, 10 renamed (`git mv`; five of them edited a
little too, which git's rename detection still pairs), 10 deleted.

Every fact is checked as recall checks it (`engine.memory.stale.ProjectChecks`), once
cold (which asks git, in what a proxy runs as background work, for the renames of the
commit range), then warm. Printed:

- stale flagged: facts whose cited file was edited, renamed or deleted that are not
  `current` (aim: >= 95%);
- false flags: facts on untouched files that are not `current` (aim: 0);
- renames followed: facts on renamed files whose check names the new path (aim: >= 90%);
- the latency recall adds: checking the cited files of 5 random facts (a recall's
  top 5), p50 / p95 / max over `--recalls` recalls with a warm cache (aim: p95 <= 1 ms),
  and the cold first pass per fact.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memlane.engine.memory.cites import note_all
from memlane.engine.memory.stale import ProjectChecks, Staleness
from memlane.types import Fact

FACTS_PER_FILE = 2
BATCH = 8
"""Facts the write path records together (one batch of a session's turns)."""
EDITED, RENAMED, DELETED = 30, 10, 10


@dataclass(frozen=True, slots=True)
class Layout:
    """The repository's files and what the later commits do to them."""

    paths: list[str]
    edited: set[str]
    renamed: dict[str, str]
    deleted: set[str]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def source(index: int, rng: random.Random) -> str:
    lines = [f'"""Module {index}: synthetic code for the benchmark."""', ""]
    for n in range(rng.randint(10, 20)):
        lines += [f"def fn_{index}_{n}(x: int) -> int:", f"    return x * {rng.randint(2, 99)}", ""]
    return "\n".join(lines) + "\n"


def build(repo: Path, files: int, rng: random.Random) -> Layout:
    paths = [f"pkg/{'abcde'[i % 5]}/mod_{i:03d}.py" for i in range(files)]
    for index, path in enumerate(paths):
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source(index, rng))
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    chosen = rng.sample(paths, EDITED + RENAMED + DELETED)
    edited = set(chosen[:EDITED])
    moved = chosen[EDITED : EDITED + RENAMED]
    renamed = {p: p.replace("mod_", "moved_") for p in moved}
    deleted = set(chosen[EDITED + RENAMED :])
    return Layout(paths, edited, renamed, deleted)


def facts_about(repo: Path, layout: Layout) -> list[Fact]:
    when = datetime.now(UTC)
    facts = []
    for index, path in enumerate(layout.paths):
        texts = [
            f"`fn_{index}_0` in {path} returns an int",
            f"{path} is imported by the CLI",
        ]
        for n, text in enumerate(texts[:FACTS_PER_FILE]):
            facts.append(Fact(f"f{index}-{n}", f"ns:{repo}", "s", "memory", text, when, when))
    batches = [facts[i : i + BATCH] for i in range(0, len(facts), BATCH)]
    return [fact for batch in batches for fact in note_all(batch, repo)]


def move_on(repo: Path, layout: Layout) -> None:
    for path in sorted(layout.edited):
        with (repo / path).open("a") as out:
            out.write("\ndef added() -> None:\n    pass\n")
    git(repo, "commit", "-qam", "edit 30 files")
    for number, (old, new) in enumerate(sorted(layout.renamed.items())):
        git(repo, "mv", old, new)
        if number % 2:  # renamed and edited a little: still a rename to git
            with (repo / new).open("a") as out:
                out.write("# touched\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "rename 10 files")
    git(repo, "rm", "-q", *sorted(layout.deleted))
    git(repo, "commit", "-qm", "delete 10 files")


def percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "0/0"


def report(facts: list[Fact], checked: dict[str, Staleness], layout: Layout) -> None:
    def cited(fact: Fact) -> str:
        assert fact.cites is not None
        return fact.cites.files[0].path

    touched = layout.edited | set(layout.renamed) | layout.deleted
    moved_on = [f for f in facts if cited(f) in touched]
    untouched = [f for f in facts if cited(f) not in touched]
    flagged = sum(checked[f.id].stale for f in moved_on)
    false = sum(checked[f.id].status != "current" for f in untouched)
    renamed = [f for f in facts if cited(f) in layout.renamed]
    followed = sum(checked[f.id].files[0].moved_to == layout.renamed[cited(f)] for f in renamed)
    print(f"stale flagged:     {percent(flagged, len(moved_on))}   (aim >= 95%)")
    print(f"false flags:       {false} of {len(untouched)} facts on untouched files   (aim 0)")
    print(f"renames followed:  {percent(followed, len(renamed))}   (aim >= 90%)")
    states: dict[str, int] = {}
    for fact in facts:
        states[checked[fact.id].status] = states.get(checked[fact.id].status, 0) + 1
    print(f"statuses:          {dict(sorted(states.items()))}")


def latency(facts: list[Fact], checks: ProjectChecks, recalls: int, rng: random.Random) -> None:
    times: list[float] = []
    for _ in range(recalls):
        top = rng.sample(facts, 5)
        start = time.perf_counter_ns()
        checks.check_all(top, budget=20)
        times.append((time.perf_counter_ns() - start) / 1e6)
    times.sort()
    p95 = times[int(0.95 * (len(times) - 1))]
    print(
        f"recall adds (top 5, warm): p50 {statistics.median(times):.3f} ms, "
        f"p95 {p95:.3f} ms, max {times[-1]:.3f} ms over {recalls} recalls   (aim p95 <= 1 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--recalls", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="memlane-stale-") as folder:
        repo = Path(folder) / "project"
        repo.mkdir()
        layout = build(repo, args.files, rng)
        start = time.perf_counter()
        facts = facts_about(repo, layout)
        noted = (time.perf_counter() - start) * 1000 / len(facts)
        files = len(layout.paths)
        print(f"{len(facts)} facts citing {files} files; recorded in {noted:.2f} ms each")
        move_on(repo, layout)
        checks = ProjectChecks()
        start = time.perf_counter()
        cold = checks.check_all(facts, budget=len(facts))
        cold_ms = (time.perf_counter() - start) * 1000 / len(facts)
        start = time.perf_counter()
        checks.fill_renames()
        asked = (time.perf_counter() - start) * 1000
        print(f"cold check: {cold_ms:.3f} ms a fact; git's renames (background): {asked:.1f} ms")
        print(f"before git's renames: {sum(s.status == 'moved' for s in cold.values())} moved")
        checked = checks.check_all(facts, budget=len(facts))
        report(facts, checked, layout)
        latency(facts, checks, args.recalls, rng)


if __name__ == "__main__":
    main()

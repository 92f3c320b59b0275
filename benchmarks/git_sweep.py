"""What the memory repository's ten-minute sweep costs after path commits, and whether
filling the index's file times at each commit would pay.

Run: .venv/bin/python benchmarks/git_sweep.py [--commits 20] [--files 200] [--held 2000]

A queued memory commit sends its files through `git fast-import` and sets the index to
their blobs with `update-index --index-info` (`files/git_import.py`), which records no
file times; the next sweep (`git add -A`, at most every `SWEEP_SECONDS`) then reads
those files once to see they are unchanged. This script fills a repository with
`--held` committed files, makes `--commits` path commits of `--files` new files each,
then one sweep, and prints the CPU milliseconds (this process and its git processes,
user + system) per commit and of the sweep, for three ways of updating the index:

- `index-info`: as memlane does;
- `refresh`: the same, then `git update-index -q --refresh` (the index's file times
  filled at each commit, so the sweep reads nothing again);
- `add`: `update-index --add --remove --stdin` on the paths instead (git hashes the
  files itself and writes no object the import already wrote, with file times).

Measured on the 2-core machine (load 2-6, seven runs each, alternated; 20 commits of 200
files into 2,000 held), CPU ms:

| index update | a commit | the sweep |
| --- | --- | --- |
| index-info | 33-44 | 57-85 |
| refresh | 50-61 | 28-53 |
| add | 37-50 | 26-52 |

The sweep reads again what `index-info` left without file times: 25-50 ms once per
sweep. `refresh` costs 9-25 ms more a commit (it stats the whole index): far more. `add`
is within this noise a commit; timed alone, in a loop over a saved index (median of 40),
`update-index --add --stdin` took 4.23 ms of git's CPU for 200 files against 2.86 ms for
`--index-info` (it reads and hashes the files; it wrote no object the pack held), so
+1.4 ms a commit: it pays only below about 25 commits a sweep, and then saves at most
50 ms in ten minutes. memlane keeps `--index-info`.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
from pathlib import Path

from memlane.files.git import GitRepo

VARIANTS = ("index-info", "refresh", "add")


def cpu_ms() -> float:
    """This process and the git processes it waited for: user + system milliseconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime) * 1000


class VariantRepo(GitRepo):
    """The memory repository, its index updated after a path commit as `variant` says."""

    def __init__(self, root: Path, variant: str) -> None:
        super().__init__(root)
        self.variant = variant

    async def _git_bytes(self, *args: str, stdin: bytes) -> bytes:
        if args[:3] != ("update-index", "-z", "--index-info") or self.variant == "index-info":
            return await super()._git_bytes(*args, stdin=stdin)
        if self.variant == "refresh":
            out = await super()._git_bytes(*args, stdin=stdin)
            await self._run("update-index", "-q", "--refresh")
            return out
        paths = [entry.split(b"\t", 1)[1] for entry in stdin.split(b"\0") if entry]
        listed = b"\0".join(paths) + b"\0"
        return await super()._git_bytes(
            "update-index", "--add", "--remove", "-z", "--stdin", stdin=listed
        )


async def measure(variant: str, commits: int, files: int, held: int) -> str:
    with tempfile.TemporaryDirectory(prefix="memlane-git-sweep-") as folder:
        return await measure_in(Path(folder), variant, commits, files, held)


async def measure_in(root: Path, variant: str, commits: int, files: int, held: int) -> str:
    repo = VariantRepo(root, variant)
    for n in range(held):
        folder = root / "held" / f"d{n % 50}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"h{n}.md").write_text(f"held entry {n}\n" * 8)
    await repo.commit("held")
    await repo.commit("held, the index's file times settled")
    spent = 0.0
    for c in range(commits):
        paths = []
        for f in range(files):
            path = f"turns/c{c}/t{f}.md"
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(f"turn {c}.{f}\n" * 8)
            paths.append(path)
        before = cpu_ms()
        await repo.commit(f"commit {c}", paths)
        spent += cpu_ms() - before
    await asyncio.sleep(1.1)  # past the index's own second: no entry is racily clean
    before = cpu_ms()
    await repo.commit("sweep")
    sweep = cpu_ms() - before
    status = await repo._git("status", "--porcelain")
    clean = "clean" if not status else "NOT clean"
    return f"| {variant} | {spent / commits:.1f} | {spent:.0f} | {sweep:.1f} | {clean} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--held", type=int, default=2000)
    args = parser.parse_args()
    print(f"{args.commits} commits of {args.files} files into {args.held} held, then a sweep")
    print("| index update | CPU ms a commit | CPU ms, all commits | sweep CPU ms | status |")
    print("| --- | --- | --- | --- | --- |")
    for variant in VARIANTS:
        print(asyncio.run(measure(variant, args.commits, args.files, args.held)), flush=True)


if __name__ == "__main__":
    main()

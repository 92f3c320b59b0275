"""Gates on the code's shape: no module over `MAX_LINES`, no import circle inside memlane.

An import inside a function counts (it still ties the two modules together), and so does
one under `if TYPE_CHECKING:`: a module that names another's type depends on it as
surely, and a reader following one finds the other pointing back. Where an inner module
needs an outer one's object, it names what it uses as a `Protocol` of its own (the
memory book's `BookRuntime`). Importing `a.b.c` is counted as importing `a.b.c`, not
its parent packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "memlane"
MAX_LINES = 500


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


class _Imports(ast.NodeVisitor):
    """The memlane modules one module imports, for its types too."""

    def __init__(self, name: str, is_package: bool, known: dict[str, Path]) -> None:
        self.name, self.is_package, self.known = name, is_package, known
        self.found: set[str] = set()

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.name.split(".")
            parts = parts if self.is_package else parts[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, *([base] if base else [])])
        for alias in node.names:
            full = f"{base}.{alias.name}"
            self._add(full if full in self.known else base)

    def _add(self, name: str) -> None:
        while name and name not in self.known:
            name = name.rpartition(".")[0]
        if name and name != self.name:
            self.found.add(name)


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        visitor = _Imports(name, path.name == "__init__.py", known)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        graph[name] = visitor.found
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_inside_memlane() -> None:
    assert circles(import_graph()) == []


def test_an_import_for_types_alone_ties_modules_too() -> None:
    graph = import_graph()
    # `engine.runtime` imports the book's type under `if TYPE_CHECKING:` (and the book
    # itself inside a method): both count; the book names what it needs as a Protocol
    assert "memlane.engine.memory.book" in graph["memlane.engine.runtime"]
    assert "memlane.engine.runtime" not in graph["memlane.engine.memory.book.core"]


def test_no_module_over_the_line_limit() -> None:
    long = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}

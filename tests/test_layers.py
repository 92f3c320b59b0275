"""The design's layering rule, checked on the source: inner layers never import outer ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "memlane"
LAYERS = ["types", "config", "store", "files", "text", "engine", "views"]


def _layer_of(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "memlane":
        return None
    return parts[1]


def _rank(layer: str) -> int:
    return LAYERS.index(layer) if layer in LAYERS else len(LAYERS)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_inner_layers_do_not_import_outer_ones(layer: str) -> None:
    offenders = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for module in _imports(path):
            target = _layer_of(module)
            if target is None or target == layer:
                continue
            if _rank(target) > _rank(layer):
                offenders.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert offenders == []


FACES = ["proxy", "cli", "mcp", "ui"]
"""The outer layer: each face stands on the engine. The CLI starts the others (`memlane serve`,
`memlane mcp`); the proxy's app mounts the MCP server at /mcp and the inspector at /ui, which
shares the app's state; the MCP face uses no other face."""
FACE_USES: dict[str, set[str]] = {
    "cli": {"proxy", "mcp"},
    "proxy": {"mcp", "ui"},
    "ui": {"proxy"},
    "mcp": set(),
}


@pytest.mark.parametrize("face", FACES)
def test_a_face_uses_only_the_engine_and_the_faces_it_starts(face: str) -> None:
    offenders = []
    for path in sorted((PACKAGE / face).rglob("*.py")):
        for module in _imports(path):  # lazy imports inside functions too
            target = _layer_of(module)
            if target in FACES and target != face and target not in FACE_USES[face]:
                offenders.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert offenders == []

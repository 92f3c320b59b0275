"""`memlane mcp`, `memlane chat` and the proxy give a folder of a project one namespace."""

from __future__ import annotations

from pathlib import Path

from memlane.cli.chat import _folder_namespace
from memlane.mcp.stdio import default_namespace
from memlane.proxy.identity import resolve
from memlane.types import Message


def proxy_namespace(folder: Path) -> str:
    context = f"<environment_context>\n  <cwd>{folder}</cwd>\n</environment_context>"
    return resolve({}, {}, [Message("user", context), Message("user", "hi")]).namespace


def test_every_face_files_a_repository_under_its_roots_path(tmp_path: Path) -> None:
    repo = tmp_path / "api"
    (repo / ".git").mkdir(parents=True)
    inside = repo / "src" / "routes"
    inside.mkdir(parents=True)
    namespace, where = default_namespace(inside)
    assert namespace == _folder_namespace(inside) == proxy_namespace(inside)
    assert namespace == str(repo.resolve())
    assert where == f"the repository at {repo.resolve()}"


def test_a_folder_in_no_repository_is_its_own_namespace_everywhere(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    namespace, where = default_namespace(folder)
    assert namespace == _folder_namespace(folder) == proxy_namespace(folder)
    assert namespace == str(folder.resolve())
    assert where == f"the folder {folder}"

from __future__ import annotations

from pathlib import Path

import pytest

from memlane.files.paths import MAX_SAFE_KEY, safe_key, session_dir


@pytest.mark.parametrize(
    "key",
    ["../../etc", "..", ".", "a/b", "a\\b", "/abs/path", "x" * 10_000, "\x00nul", "😀 emoji", ""],
)
def test_hostile_keys_stay_inside_the_root(tmp_path: Path, key: str) -> None:
    root = tmp_path / "sessions"
    path = session_dir(root, key)
    assert path.parent == root
    assert path.resolve().parent == root.resolve()
    assert "/" not in path.name
    assert "\\" not in path.name
    assert path.name not in {".", ".."}
    assert len(path.name) <= MAX_SAFE_KEY + 13


def test_keys_that_clean_up_alike_get_different_folders() -> None:
    assert safe_key("a/b") != safe_key("a_b")
    assert safe_key("A") != safe_key("a")


def test_readable_part_is_kept() -> None:
    assert safe_key("codex-session-42").startswith("codex-session-42-")

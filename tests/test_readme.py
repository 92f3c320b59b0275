"""The README's reference tables are generated from the code; they can never drift from it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _renderer() -> object:
    spec = importlib.util.spec_from_file_location(
        "update_readme", ROOT / "scripts/update_readme.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_tables_are_up_to_date() -> None:
    text = README.read_text(encoding="utf-8")
    rendered = _renderer().render(text)  # type: ignore[attr-defined]
    assert rendered == text, (
        "README tables are stale: run .venv/bin/python scripts/update_readme.py"
    )


def test_every_setting_and_command_is_documented() -> None:
    from memlane.config import Settings

    text = README.read_text(encoding="utf-8")
    for name in Settings.model_fields:
        assert f"`MEMLANE_{name.upper()}`" in text
    assert "`memlane serve`" in text
    assert "`memlane sessions list`" in text


def test_the_readme_opens_with_the_two_set_up_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert [c for c in commands if c] == ["scripts/serve", "scripts/test"]
    assert (ROOT / ".ci/run").read_text().strip().endswith("exec scripts/test")


def _code_map() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("### Map of the code")
    end = text.find("\n## ", start)
    return text[start : end if end != -1 else len(text)]


def test_every_module_the_code_map_names_exists() -> None:
    """The map a newcomer follows points at real files: a rename must update it."""
    package, support = ROOT / "src" / "memlane", ROOT / "tests" / "support"
    known = {p.name for p in package.rglob("*.py")} | {p.name for p in support.glob("*.py")}
    folders = {p.name for p in package.rglob("*") if p.is_dir()}
    missing = []
    for token in re.findall(r"`([\w/.]+?)(?::\w+)?`", _code_map()):
        if token.endswith(".py"):
            found = (
                (package / token).exists() or (ROOT / token).exists()
                if "/" in token
                else token in known
            )
        elif token.endswith("/"):
            found = (package / token).is_dir() or (ROOT / token).is_dir()
            found = found or token.rstrip("/") in folders
        else:
            continue
        if not found:
            missing.append(token)
    assert missing == []

"""The reference tables are generated from the code; they can never drift from it.

They live in the documentation site (`docs/reference/`), between markers that
`scripts/update_readme.py` rewrites; the README keeps only what a newcomer needs
and links into the site.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250


def _renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "update_readme", ROOT / "scripts/update_readme.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_tables_are_up_to_date() -> None:
    renderer = _renderer()
    stale = []
    for page in renderer.pages():
        text = page.read_text(encoding="utf-8")
        if renderer.render(text) != text:
            stale.append(str(page.relative_to(ROOT)))
    assert stale == [], "stale tables: run .venv/bin/python scripts/update_readme.py"


def test_every_generated_table_is_on_its_reference_page() -> None:
    pages = {
        "config-table": "reference/configuration.md",
        "cli-table": "reference/cli.md",
        "proxy-headers": "reference/http-api.md",
        "client-headers": "reference/http-api.md",
        "mcp-tools": "reference/mcp-tools.md",
    }
    assert set(pages) == set(_renderer().tables())
    for name, page in pages.items():
        text = (DOCS / page).read_text(encoding="utf-8")
        assert f"<!-- {name} -->" in text, page
        assert f"<!-- /{name} -->" in text, page


def test_every_setting_and_command_is_documented() -> None:
    from memlane.config import Settings

    settings = (DOCS / "reference/configuration.md").read_text(encoding="utf-8")
    for name in Settings.model_fields:
        assert f"`MEMLANE_{name.upper()}`" in settings
    commands = (DOCS / "reference/cli.md").read_text(encoding="utf-8")
    assert "`memlane serve`" in commands
    assert "`memlane sessions list`" in commands


def test_the_readme_opens_with_the_two_set_up_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert [c for c in commands if c] == ["scripts/serve", "scripts/test"]
    assert (ROOT / ".ci/run").read_text().strip().endswith("exec scripts/test")


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move detail into docs/"


def test_every_relative_link_of_the_readme_exists() -> None:
    """The site's own links are checked by its strict build; the README's are here."""
    text = README.read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (ROOT / path).exists():
            broken.append(target)
    assert broken == []


def _code_map() -> str:
    text = (DOCS / "development.md").read_text(encoding="utf-8")
    start = text.index("## Map of the code")
    end = text.find("\n## ", start + 1)
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


def test_every_command_row_says_a_whole_sentence() -> None:
    """A row is the command's first paragraph, not its docstring's first line, which cut
    sentences where the source wrapped them ("… errors in the last hour,")."""
    from memlane.docs import cli_table

    rows = cli_table().splitlines()[2:]
    cut = [row for row in rows if not row.removesuffix(" |").endswith((".", ")", "`"))]
    assert rows
    assert cut == []

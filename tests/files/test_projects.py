"""A folder's project: its git root's absolute path, the same for every face."""

from __future__ import annotations

from pathlib import Path

from memlane.files.projects import display_name, forget, project_of


def test_a_subfolder_of_a_repository_is_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "api"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "routes").mkdir(parents=True)
    inside = project_of(repo / "src" / "routes")
    assert inside is not None
    assert inside.namespace == str(repo.resolve())
    assert inside.name == "api"
    assert project_of(f"{repo}/") == inside


def test_two_repositories_with_one_name_stay_apart(tmp_path: Path) -> None:
    first, second = tmp_path / "work" / "api", tmp_path / "play" / "api"
    for repo in (first, second):
        (repo / ".git").mkdir(parents=True)
    a, b = project_of(first), project_of(second)
    assert a is not None
    assert b is not None
    assert a.namespace != b.namespace
    assert a.name == b.name == "api"


def test_a_folder_in_no_repository_is_its_own_project(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    found = project_of(notes)
    assert found is not None
    assert (found.namespace, found.name) == (str(notes.resolve()), "notes")


def test_a_folder_not_on_this_machine_is_named_as_sent(tmp_path: Path) -> None:
    elsewhere = tmp_path / "nowhere" / "shop"
    found = project_of(f"{elsewhere}/")
    assert found is not None
    assert (found.namespace, found.name) == (str(elsewhere), "shop")
    windows = project_of("C:\\Users\\ann\\shop")
    assert windows is not None
    assert (windows.namespace, windows.name) == ("C:\\Users\\ann\\shop", "shop")


def test_no_project_for_an_empty_or_relative_path() -> None:
    assert project_of("") is None
    assert project_of("   ") is None
    assert project_of("src/app") is None


def test_the_answer_is_memoised_per_folder(tmp_path: Path) -> None:
    """The request path pays the stat calls once per folder: a repository created later is
    seen after `forget` (a restart)."""
    folder = tmp_path / "late"
    folder.mkdir()
    sub = folder / "pkg"
    sub.mkdir()
    before = project_of(sub)
    (folder / ".git").mkdir()
    assert project_of(sub) == before
    forget()
    after = project_of(sub)
    assert after is not None
    assert after.namespace == str(folder.resolve())


def test_display_names() -> None:
    assert display_name("/home/ann/api") == "api"
    assert display_name("/") == "/"
    assert display_name("default") == "default"
    assert display_name("website") == "website"

"""files/door.py: what the plugin writes stays inside the project, whatever symbolic links the
project holds, folders included; a place named outside it is the user's choice."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.files import door
from retrieval_gate.files.atomic import write_text_atomic


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A project folder installed as the rootdir, and a folder ``outside`` beside it."""
    root = tmp_path / "project"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    door.configure(root)
    try:
        yield root
    finally:
        door.configure(None)


def test_a_folder_linked_out_of_the_project_is_refused(project: Path) -> None:
    (project / ".retrieval-gate").mkdir()
    (project / ".retrieval-gate/history").symlink_to(project.parent / "outside")
    target = project / ".retrieval-gate/history/lineage.jsonl"
    reason = door.escape(target)
    assert reason == (
        f"{project}/.retrieval-gate/history is a symbolic link to {project.parent}/outside, "
        f"outside the project ({project}): a link in the project must not steer a write "
        f"elsewhere; remove it, or name {project.parent}/outside itself in the settings if that "
        "is where it belongs"
    )
    with pytest.raises(RetrievalGateError, match=r"lineage\.jsonl: the history not written: "):
        door.check(target, what="the history")
    with pytest.raises(OSError, match="symbolic link to"):
        write_text_atomic(target, "x")  # every atomic write goes through the door
    assert list((project.parent / "outside").iterdir()) == []


def test_a_link_that_stays_in_the_project_is_fine(project: Path) -> None:
    (project / "build").mkdir()
    (project / ".retrieval-gate").symlink_to(project / "build")
    assert door.escape(project / ".retrieval-gate/history/lineage.jsonl") is None
    write_text_atomic(project / ".retrieval-gate/report.md", "x")
    assert (project / "build/report.md").read_text() == "x"


def test_a_place_named_outside_the_project_is_the_users_choice(project: Path) -> None:
    elsewhere = project.parent / "outside" / "cache"
    assert door.escape(elsewhere) is None
    (project.parent / "link").symlink_to(project.parent / "outside")
    assert door.escape(project.parent / "link" / "x") is None  # outside as written: not judged


def test_a_file_linked_out_and_a_dotdot_after_a_link_are_refused(project: Path) -> None:
    (project / "report.md").symlink_to(project.parent / "outside" / "report.md")
    assert "report.md is a symbolic link to" in (door.escape(project / "report.md") or "")
    (project / "sub").mkdir()
    (project / "sub/deep").symlink_to(project.parent / "outside")
    # Written, "sub/deep/../x" is sub/x; resolved, the link is followed first: outside/../x.
    tricky = Path(f"{project}/sub/deep/../x")
    assert "outside the project" in (door.escape(tricky) or "")


def test_a_relative_path_is_judged_from_the_working_folder(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "out").symlink_to(project.parent / "outside")
    monkeypatch.chdir(project)
    assert "out is a symbolic link" in (door.escape(Path("out/r.md")) or "")
    assert door.escape(Path("r.md")) is None


def test_outside_a_session_nothing_is_refused(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/")
    assert door.root() is None
    assert door.escape(tmp_path / "link" / "x") is None


def test_a_rootdir_reached_through_a_link_is_the_same_project(
    project: Path, tmp_path: Path
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(project)
    door.configure(alias)
    assert door.escape(project / "report.md") is None  # its real path
    assert door.escape(alias / "report.md") is None
    (project / "out").symlink_to(project.parent / "outside")
    assert door.escape(alias / "out" / "r.md") is not None
    assert os.path.realpath(alias) == str(project)

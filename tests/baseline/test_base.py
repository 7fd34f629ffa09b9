"""The target branch's baseline read from git (baseline/base.py, provenance.show_file): what a
pull request's gate compares its baseline with, and the one line for each way it cannot be
read. Every git repository here is real and small; nothing runs pytest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_gate.baseline.base import BaseHead, base_ref, read_base
from retrieval_gate.baseline.head import save_baseline
from retrieval_gate.baseline.provenance import GitFileError, show_file
from tests.integration.history_project import git

from .test_baseline import query, record


def _repo(root: Path) -> str:
    """A repository whose ``main`` holds a baseline of one run (P@1 1.0); its commit."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    save_baseline(root / "retrieval-baseline.json", [record([query("q1")])], None)
    git(root, "add", "retrieval-baseline.json")
    git(root, "commit", "-q", "-m", "the baseline")
    return git(root, "rev-parse", "HEAD")


def _read(root: Path, ref: str, given: str = "--rg-base x", **kw: int | None) -> BaseHead:
    return read_base(
        root, root / "retrieval-baseline.json", ref, given, max_bytes=kw.get("max_bytes", 10**6)
    )


def test_the_target_branchs_baseline_is_read_at_its_commit(tmp_path: Path) -> None:
    commit = _repo(tmp_path)
    # The working tree's file moved on since: the ref's bytes are read, not the file's.
    save_baseline(tmp_path / "retrieval-baseline.json", [record([query("q1"), query("q2")])], None)
    found = _read(tmp_path, "main", "--rg-base main")
    assert (found.ref, found.given, found.commit, found.problem) == (
        "main",
        "--rg-base main",
        commit,
        None,
    )
    assert found.baseline is not None and found.baseline.get("s", "sys") is not None
    assert [q.id for q in found.baseline.runs["s::sys"].queries] == ["q1"]
    assert found.short == f"main ({commit[:7]})"


def test_the_ref_is_the_option_else_origin_of_github_base_ref() -> None:
    assert base_ref("release/1.0", {"GITHUB_BASE_REF": "main"}) == (
        "release/1.0",
        "--rg-base release/1.0",
    )
    assert base_ref(None, {"GITHUB_BASE_REF": "main"}) == ("origin/main", "GITHUB_BASE_REF=main")
    assert base_ref(None, {"GITHUB_BASE_REF": "  "}) is None
    assert base_ref(None, {}) is None


#: Each way the target branch's baseline cannot be read, and the one line that says so
#: (``{c}``: the commit's short form). The gate goes on without it.
UNREADABLE = [
    pytest.param(
        "origin/main",
        None,
        "cannot read the baseline of origin/main (--rg-base x): git has no origin/main here: "
        "fetch it (git fetch origin main) or name a ref git has; what this baseline accepts "
        "against it is not named",
        id="unknown-remote-branch",
    ),
    pytest.param(
        "v9",
        None,
        "cannot read the baseline of v9 (--rg-base x): git has no v9 here: fetch it (git fetch "
        "origin v9) or name a ref git has; what this baseline accepts against it is not named",
        id="unknown-tag",
    ),
    pytest.param(
        "--output=/tmp/x",
        None,
        "cannot read the baseline of --output=/tmp/x (--rg-base x): '--output=/tmp/x' is not a "
        "ref git could name; what this baseline accepts against it is not named",
        id="an-option-for-a-ref",
    ),
    pytest.param(
        "main:secret.txt",
        None,
        "cannot read the baseline of main:secret.txt (--rg-base x): 'main:secret.txt' is not a ref "
        "git could name; what this baseline accepts against it is not named",
        id="a-path-inside-the-ref",
    ),
    pytest.param(
        "main",
        lambda root: (
            git(root, "rm", "-q", "retrieval-baseline.json"),
            git(root, "commit", "-qm", "rm"),
        ),
        "main ({c}) has no retrieval-baseline.json: no baseline to compare with",
        id="no-baseline-at-the-ref",
    ),
    pytest.param(
        "main",
        lambda root: (
            (root / "retrieval-baseline.json").write_text('{"version": 1, "runs": {'),
            git(root, "commit", "-qam", "broken"),
        ),
        "cannot read the baseline of main (--rg-base x): main:retrieval-baseline.json: corrupt "
        "baseline (invalid JSON at line 1, column 25: Expecting property name enclosed in double "
        "quotes); the baseline of main is main's to mend; what this baseline accepts against it "
        "is not named",
        id="corrupt-at-the-ref",
    ),
    pytest.param(
        "main",
        lambda root: (
            (root / "retrieval-baseline.json").write_text('{"version": 1, "runs": {}, "runs": {}}'),
            git(root, "commit", "-qam", "twice"),
        ),
        "cannot read the baseline of main (--rg-base x): main:retrieval-baseline.json: corrupt "
        "baseline (*",
        id="a-key-given-twice-at-the-ref",
    ),
    pytest.param(
        "main",
        lambda root: (
            (root / "retrieval-baseline.json").write_text("[" * 5000 + "]" * 5000),
            git(root, "commit", "-qam", "deep"),
        ),
        "cannot read the baseline of main (--rg-base x): main:retrieval-baseline.json: corrupt "
        "baseline (nested more than 100 levels deep; flatten it); *",
        id="nested-past-the-parser-at-the-ref",
    ),
    pytest.param(
        "main",
        lambda root: (
            (root / "retrieval-baseline.json").unlink(),
            (root / "retrieval-baseline.json").symlink_to("/etc/passwd"),
            git(root, "commit", "-qam", "a link"),
        ),
        "cannot read the baseline of main (--rg-base x): main:retrieval-baseline.json: corrupt "
        "baseline (invalid JSON *",
        id="a-link-at-the-ref-is-its-text-not-its-target",
    ),
]


@pytest.mark.parametrize(("ref", "change", "line"), UNREADABLE)
def test_a_target_branch_git_cannot_give_is_one_line(
    tmp_path: Path, ref: str, change: object, line: str
) -> None:
    import fnmatch

    _repo(tmp_path)
    if callable(change):
        change(tmp_path)
    found = _read(tmp_path, ref)
    commit = git(tmp_path, "rev-parse", "HEAD")
    assert found.baseline is None and found.problem is not None
    assert "\n" not in found.problem
    assert fnmatch.fnmatchcase(found.problem, line.replace("{c}", commit[:7])), found.problem


def test_a_shallow_clone_is_told_what_to_fetch(tmp_path: Path) -> None:
    _repo(tmp_path / "origin")
    git(tmp_path / "origin", "commit", "-q", "--allow-empty", "-m", "a second commit")
    git(tmp_path, "clone", "-q", "--depth=1", (tmp_path / "origin").as_uri(), "clone")
    found = _read(tmp_path / "clone", "origin/release", "GITHUB_BASE_REF=release")
    assert found.problem == (
        "cannot read the baseline of origin/release (GITHUB_BASE_REF=release): this clone is "
        "shallow and does not have it: fetch it (git fetch --depth=1 origin release) or set "
        "fetch-depth: 0 in actions/checkout; what this baseline accepts against it is not named"
    )


def test_outside_git_and_outside_the_repository_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    found = read_base(
        tmp_path / "plain", tmp_path / "plain/b.json", "main", "--rg-base main", max_bytes=None
    )
    assert found.problem == (
        f"cannot read the baseline of main (--rg-base main): {tmp_path / 'plain'} is not in a git "
        "repository; what this baseline accepts against it is not named"
    )
    _repo(tmp_path / "repo")
    outside = read_base(
        tmp_path / "repo", tmp_path / "elsewhere.json", "main", "--rg-base main", max_bytes=None
    )
    assert outside.problem == (
        f"cannot read the baseline of main (--rg-base main): the baseline "
        f"{tmp_path / 'elsewhere.json'} is outside the repository; what this baseline accepts "
        "against it is not named"
    )


def test_a_baseline_over_the_size_limit_at_the_ref_is_not_read(tmp_path: Path) -> None:
    commit = _repo(tmp_path)
    size = len(git(tmp_path, "show", "HEAD:retrieval-baseline.json").encode()) + 1  # + newline
    found = _read(tmp_path, "main", max_bytes=100)
    assert found.problem == (
        f"cannot read the baseline of main (--rg-base x): retrieval-baseline.json at main "
        f"({commit[:7]}) is {size:,} bytes, over the limit of 100 (max_file_mb); what this "
        "baseline accepts against it is not named"
    )


def test_show_file_gives_bytes_and_refuses_what_is_no_file(tmp_path: Path) -> None:
    commit = _repo(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub/x.json").write_text("{}")
    git(tmp_path, "add", "sub")
    git(tmp_path, "commit", "-qm", "a folder")
    found, data = show_file(tmp_path, "HEAD~1", "retrieval-baseline.json", max_bytes=None)
    assert found == commit and json.loads(data)["version"] == 1
    with pytest.raises(GitFileError, match=r"sub at HEAD \(\w+\) is not a file") as info:
        show_file(tmp_path, "HEAD", "sub", max_bytes=None)
    assert info.value.kind == "type"
    with pytest.raises(GitFileError) as info:
        show_file(tmp_path, "HEAD", "-p", max_bytes=None)
    assert info.value.kind == "missing"


def test_a_git_that_never_answers_is_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every call to git together is bounded: a hung git (a blobless clone fetching over a dead
    # network, a wrapper waiting on a lock) ends the reading with one line, not the session.
    _repo(tmp_path)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\nexec sleep 30\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    with pytest.raises(GitFileError) as info:
        show_file(tmp_path, "main", "retrieval-baseline.json", max_bytes=None, timeout=0.3)
    assert info.value.kind == "git"
    assert info.value.message == "git is not installed, or did not answer within 0.3 s"

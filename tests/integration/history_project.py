"""A project whose quality is set per step: the history tests' simulated merges.

The retriever ranks, for each of the suite's 50 queries ``q<i>``, its one relevant document
``d<i>`` first, except for the first ``step`` queries (read from ``step.txt`` at each call),
which get a wrong document first. P@1 is (50 - step) / 50, so each step drops P@1 by 1/50 = 0.02.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

QUERIES = 50
STEP_DROP = 1 / QUERIES
#: The regression tolerance that makes each step's drop 0.6 of it: 0.02 / 0.6.
TOLERANCE = STEP_DROP / 0.6

SETTINGS = f"""
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate]
systems = ["stepped"]
tolerance = {{"P@1" = {TOLERANCE!r}}}

[tool.retrieval_gate.system.stepped]
retriever = "stepped_app:retrieve"
"""

RETRIEVER = f"""
import pathlib

QUERIES = {QUERIES}


def retrieve(query, k):
    step = int(pathlib.Path(__file__).with_name("step.txt").read_text())
    i = int(query.split()[-1])
    right, wrong = f"d{{i}}", f"d{{(i + 1) % QUERIES}}"
    order = [wrong, right] if i < step else [right, wrong]
    return [(doc, float(2 - rank)) for rank, doc in enumerate(order)][:k]
"""


def suite_text(name: str = "merges") -> str:
    lines = [f"name: {name}", "k: [1]", "gates:", "  P@1: 0.0", "queries:"]
    for i in range(QUERIES):
        lines += [f"  - id: q{i}", f"    query: question {i}", f"    relevant: [d{i}]"]
    return "\n".join(lines) + "\n"


def stepped_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(stepped_app=RETRIEVER)
    (pytester.path / "merges.retrieval.yaml").write_text(suite_text(), encoding="utf-8")
    (pytester.path / "step.txt").write_text("0", encoding="utf-8")
    pytester.syspathinsert()
    return pytester


def commit(step: int) -> str:
    """The commit of step ``step``: ``abc0000``, ``abc0001``, ... as its short form."""
    return f"{0xABC0000 + step:07x}" + "0" * 33


def run_step(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, step: int, quality: int, *args: str
) -> pytest.RunResult:
    """One simulated merge: the retriever at ``quality`` (queries made wrong), the commit
    ``step`` (as CI names it), saving the baseline."""
    (pytester.path / "step.txt").write_text(str(quality), encoding="utf-8")
    monkeypatch.setenv("GITHUB_SHA", commit(step))
    return pytester.runpytest("--retrieval-gate", "--rg-save-baseline", "-rA", *args)


def git(root: Path, *args: str) -> str:
    """Run git in ``root`` as a test's author (no signing, ``main`` the first branch), and
    return what it printed, stripped; a test whose machine has no git is skipped."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    config = ("user.name=t", "user.email=t@t", "tag.gpgSign=false", "init.defaultBranch=main")
    done = subprocess.run(
        ["git", *(x for c in config for x in ("-c", c)), *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def git_repository(pytester: pytest.Pytester) -> Callable[..., str]:
    """The stepped project as a git repository of its own, its inputs committed; returns
    ``git(*args)``, git's output stripped (skips the test where git is not installed). The
    plugin's outputs stay untracked: they do not make a run's tree dirty."""

    def run(*args: str) -> str:
        return git(pytester.path, *args)

    run("init", "-q", "-b", "main")
    run("add", "pyproject.toml", "stepped_app.py", "merges.retrieval.yaml", "step.txt")
    run("commit", "-q", "-m", "the project")
    return run


def merge(
    pytester: pytest.Pytester, git: Callable[..., str], quality: int, *args: str
) -> tuple[str, pytest.RunResult]:
    """One merge on main in the repository: the retriever at ``quality`` committed, then the run
    on main that saves the baseline and records it (the documented workflow). Returns the
    merge's commit and the run."""
    (pytester.path / "step.txt").write_text(str(quality), encoding="utf-8")
    git("commit", "-q", "-a", "--allow-empty", "-m", f"quality {quality}")
    result = pytester.runpytest("--retrieval-gate", "--rg-save-baseline", "-rA", *args)
    return git("rev-parse", "HEAD"), result

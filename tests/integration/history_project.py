"""A project whose quality is set per step: the history tests' simulated merges.

The retriever ranks, for each of the suite's 50 queries ``q<i>``, its one relevant document
``d<i>`` first, except for the first ``step`` queries (read from ``step.txt`` at each call),
which get a wrong document first. P@1 is (50 - step) / 50, so each step drops P@1 by 1/50 = 0.02.
"""

from __future__ import annotations

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
    """Run git in ``root`` as a test's author, and return what it printed (stripped); a test
    whose machine has no git is skipped."""
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    done = subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def git_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """The stepped project as the first commit of a git repository's ``main`` branch."""
    stepped_project(pytester)
    git(pytester.path, "init", "-q")
    git(
        pytester.path,
        "add",
        "pyproject.toml",
        "stepped_app.py",
        "merges.retrieval.yaml",
        "step.txt",
    )
    git(pytester.path, "commit", "-q", "-m", "the project")
    return pytester

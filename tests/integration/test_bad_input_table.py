"""Every case of the bad-input table (bad_inputs.py) through pytest --retrieval-gate, and the
documentation generated from it is current."""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
from pathlib import Path

import pytest

from .bad_inputs import CASES, PASSWORD, BadInput, render
from .conftest import lit

DOC = Path(__file__).parents[2] / "docs" / "bad-input.md"

_CODES = {
    "collection error": pytest.ExitCode.INTERRUPTED,
    "usage error": pytest.ExitCode.USAGE_ERROR,
    "failed items": pytest.ExitCode.TESTS_FAILED,
    "session failed": pytest.ExitCode.TESTS_FAILED,
    "warning": pytest.ExitCode.OK,
    "passes": pytest.ExitCode.OK,
    "nothing ran": pytest.ExitCode.NO_TESTS_COLLECTED,
}


def _make(root: Path, case: BadInput, tiny_model: Path | None = None) -> None:
    for name, content in case.files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    for name, size in case.sparse.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            handle.truncate(size)
    for name in case.fifos:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
    for name, target in case.links.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)
    if tiny_model is not None:
        shutil.copytree(tiny_model, root / "tiny" / "model")
    if case.setup is not None:
        case.setup(root)


def _contents(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` but the plugin's cache (links not followed, pipes not
    opened; a file of a megabyte or more by its size), by relative path."""
    out: dict[str, bytes] = {}
    for folder, folders, names in os.walk(root):
        # The cache is the plugin's own: repairing it (a damaged shard deleted) is its job.
        # pytester makes the project HOME: ~/.cache holds the libraries' own (onnxruntime's).
        home_cache = ".cache" if Path(folder) == root else None
        folders[:] = [f for f in folders if f not in (".retrieval-gate-cache", home_cache)]
        for name in names:
            path = Path(folder, name)
            status = path.lstat()
            if not stat.S_ISREG(status.st_mode):
                continue
            key = path.relative_to(root).as_posix()
            small = status.st_size < (1 << 20)
            out[key] = path.read_bytes() if small else str(status.st_size).encode()
    return out


@pytest.fixture
def tiny(case: BadInput, request: pytest.FixtureRequest) -> Path | None:
    """The session's tiny BERT for a case that copies it (None for the others), loaded in this
    process first for an in-process run: set up before pytester, which would drop its modules."""
    if not case.tiny_model:
        return None
    model: Path = request.getfixturevalue("tiny_model")
    if not case.subprocess:
        warm = "onnx_in_process" if "onnxruntime" in case.needs else "tiny_in_process"
        request.getfixturevalue(warm)
    return model


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_the_documented_line(
    tiny: Path | None, project: pytest.Pytester, case: BadInput
) -> None:
    """A row runs in this process in a tenth of a second; a row about what importing a module
    does (``subprocess``) runs in a fresh interpreter, which imports the plugin again (half a
    second). The ONNX row runs here too: `tiny` exported and ran the tiny model once first, so
    that torch.onnx, onnx and the runtimes are imported outside the row's run."""
    for package in case.needs:
        # Looked for, not imported: a native module imported inside this test is dropped with
        # pytester's modules after it, and importing it again panics.
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed")
    _make(project.path, case, tiny)
    before = _contents(project.path)
    run = project.runpytest_subprocess if case.subprocess else project.runpytest
    result = run("--retrieval-gate", *case.args)
    assert result.ret == _CODES[case.outcome]
    seen = result.stderr if case.outcome == "usage error" else result.stdout
    seen.fnmatch_lines(["*" + lit(case.line).replace("[*]", "*")])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert PASSWORD not in result.stdout.str() + result.stderr.str()
    after = _contents(project.path)
    changed = sorted(name for name, data in before.items() if after.get(name) != data)
    assert not changed, f"written over or removed: {changed}"


def test_the_documented_table_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/bad-input.md is stale: python -m tests.integration.bad_inputs > docs/bad-input.md"
    )

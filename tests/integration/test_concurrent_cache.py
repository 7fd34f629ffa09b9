"""Concurrent writers and killed runs leave a cache whose entries are each complete and valid, or
absent, and the next run's rankings and metrics equal a clean run's.

Real processes, as users start them: two ``pytest --retrieval-gate`` sessions in two processes
filling one cold cache folder of the same project at once (parallel CI jobs sharing a cache),
and a session killed with SIGKILL while it embeds (on a cold cache) or builds its chroma
collection (on a cache holding only the clean run's embeddings, which it reads instead of
loading the model). The project (tests/integration/cache_project.py) fills every kind of entry
a run reads back: embedding and query-vector shards, a chroma collection and its build id,
search results and stability figures. The sessions that race nothing and that nothing kills
(the clean run the others must equal, the next run after them), and the second of the two
racing sessions, run in this process.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cache_project import (
    finish,
    outcome,
    run_here,
    sound_entries,
    start,
    write_project,
)

pytest.importorskip("chromadb")
pytest.importorskip("sentence_transformers")

#: Any CacheWarning fails the session: nothing a crash or a second writer leaves is damage.
NO_CACHE_WARNING = ("-W", "error::retrieval_gate.errors.CacheWarning")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    root = tmp_path_factory.mktemp("project")
    write_project(root, tiny_model)
    return root


@pytest.fixture(scope="module")
def _clean_once() -> dict[str, Any]:
    return {}


@pytest.fixture
def clean(
    project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    _clean_once: dict[str, Any],
) -> dict[str, object]:
    """The rankings and metrics of one session alone on an empty cache of its own: run once for
    the module, in this process (the first test to ask runs it)."""
    if not _clean_once:
        here = tmp_path_factory.mktemp("clean")
        run_here(pytester, monkeypatch, project, here / "cache", here / "clean.md")
        _clean_once.update(outcome=outcome(here / "clean.md"), cache=here / "cache")
    result: dict[str, object] = _clean_once["outcome"]
    return result


@pytest.fixture
def clean_cache(clean: dict[str, object], _clean_once: dict[str, Any]) -> Path:
    """The cache folder `clean`'s session filled (tests copy from it, never write to it)."""
    cache: Path = _clean_once["cache"]
    return cache


def test_two_sessions_filling_one_cold_cache_agree_with_a_clean_run(
    project: Path,
    tmp_path: Path,
    clean: dict[str, object],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """About 12 s of CPU: the two racing sessions run in two processes, which is the race. The
    first is a process of its own, importing sentence-transformers (about 6 s) as a user's CI
    job does; the second is this process's (in-process pytester, the model already loaded: a
    second import would prove nothing more), started once the first has begun to embed (its
    embedding folder is made), so that both embed the corpus, build the collection and write
    their results into the one cold cache at the same time, as two jobs started together do
    (both load the model and embed the documents, one the queries, in either way of starting
    them)."""
    cache = tmp_path / "shared-cache"
    first = start(project, cache, tmp_path / "a.md", *NO_CACHE_WARNING)
    _wait_for(first, lambda: any((cache / "embeddings").glob("*/identity.txt")))
    run_here(pytester, monkeypatch, project, cache, tmp_path / "b.md", *NO_CACHE_WARNING)
    finish(first)
    assert outcome(tmp_path / "a.md") == clean
    assert outcome(tmp_path / "b.md") == clean
    held = sound_entries(cache)
    assert any(name.startswith("embeddings/") and "/shard-" in name for name in held)
    assert any(name.startswith("index-results/") for name in held)
    assert any(name.startswith("index-stability/") for name in held)
    # What the two left answers a third session as a clean cache would, without a warning.
    run_here(pytester, monkeypatch, project, cache, tmp_path / "c.md", *NO_CACHE_WARNING)
    assert outcome(tmp_path / "c.md") == clean


def _wait_for(
    process: subprocess.Popen[str], ready: Callable[[], bool], *, timeout: float = 120
) -> None:
    """Returns once ``ready()``, while ``process`` still runs; fails the test if it ends first."""
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail("the session ended before the moment the test waited for")
        time.sleep(0.005)


def _kill_when(
    process: subprocess.Popen[str], ready: Callable[[], bool], *, timeout: float = 120
) -> None:
    _wait_for(process, ready, timeout=timeout)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)


@pytest.mark.parametrize("moment", ["embedding", "chroma-build"])
def test_a_session_killed_mid_write_leaves_entries_whole_or_absent(
    project: Path,
    tmp_path: Path,
    clean: dict[str, object],
    clean_cache: Path,
    moment: str,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """About 3.5 s of CPU each: the killed session is a real process (SIGKILL). Killed while it
    embeds, on a cold cache (after importing sentence-transformers); killed while it builds its
    collection, on a cache holding the clean run's embeddings (document and query vectors)
    and nothing else: it reads its vectors from there and loads no model (about 5 s of CPU
    less), and what it writes when killed is the collection, as a cold session's is (its
    embeddings were written before the build began)."""
    cache = tmp_path / "cache"
    chroma = cache / "chroma"
    if moment == "chroma-build":
        shutil.copytree(clean_cache / "embeddings", cache / "embeddings")

    def embedding() -> bool:
        # The embedding cache's folder is made when the corpus is looked up, before the model
        # encodes it: killed while it encodes (a shard's write takes far less than a poll, so
        # a kill inside one is left to tests/embed/test_cache.py, whose leftover temporary
        # file is ignored: test_temporary_files_are_ignored).
        return any((cache / "embeddings").glob("*/identity.txt"))

    def chroma_build() -> bool:
        # The store exists and the build id is not written yet: inserting one vector at a time.
        return (chroma / "chroma.sqlite3").exists() and not any(
            chroma.glob(".retrieval-gate-build-*")
        )

    killed = start(project, cache, tmp_path / "killed.md")
    _kill_when(killed, embedding if moment == "embedding" else chroma_build)
    assert killed.returncode == -signal.SIGKILL
    sound_entries(cache)
    if moment == "chroma-build":
        # Killed before the build was complete: no build id, so nothing vouches for the graph.
        assert not any(chroma.glob(".retrieval-gate-build-*"))
    run_here(pytester, monkeypatch, project, cache, tmp_path / "after.md", *NO_CACHE_WARNING)
    assert outcome(tmp_path / "after.md") == clean
    sound_entries(cache)

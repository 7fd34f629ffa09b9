"""runs/cache.py: corpora and records, each once per session; a failed run kept and raised again
for every reader, the user's mistakes as themselves and the plugin's own as internal errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_gate.config import parse_settings
from retrieval_gate.errors import CorpusError, RunError
from retrieval_gate.runs.cache import InternalRunError, RunCache
from retrieval_gate.suites.suite import parse_suite
from retrieval_gate.systems import RunOptions

from ..conftest import raising_in

APP = """
from pathlib import Path

CALLS = Path(__file__).with_name("calls.txt")


def search(query, k):
    CALLS.write_text(CALLS.read_text() + query + "\\n" if CALLS.exists() else query + "\\n")
    if query == "boom":
        raise ValueError("the user's retriever broke")
    if query == "bug":
        return [("d1", float("nan"))]
    return [("d1", 1.0), ("d2", 0.5)][:k]
"""


def _cache(tmp_path: Path) -> RunCache:
    # A module name of its own per test: an imported module stays in sys.modules.
    module = "count_app_" + "".join(c if c.isalnum() else "_" for c in tmp_path.name)
    (tmp_path / f"{module}.py").write_text(APP)
    settings = parse_settings(
        {"system": {"s": {"retriever": f"{module}:search"}}}, tmp_path / "pyproject.toml"
    )
    return RunCache(settings, RunOptions(cache_dir=tmp_path / "cache"), relpath=lambda p: p.name)


def _suite(tmp_path: Path, text: str = "q") -> object:
    return parse_suite(
        {"k": [1], "queries": [{"id": "q1", "query": text, "relevant": ["d1"]}]},
        tmp_path / f"{text}.retrieval.yaml",
    )


def test_a_suite_x_system_runs_once_however_many_read_it(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    suite = _suite(tmp_path)
    system = cache.settings.system("s")
    assert cache.outcome(suite, system) is None  # type: ignore[arg-type]
    first = cache.record(suite, system)  # type: ignore[arg-type]
    again = cache.record(suite, system)  # type: ignore[arg-type]
    assert first is again
    assert cache.outcome(suite, system) is first  # type: ignore[arg-type]
    # One untimed warm-up query and the query itself: the run happened once.
    assert (tmp_path / "calls.txt").read_text() == "q\nq\n"
    assert first.metrics["P@1"] == 1.0
    assert first.suite_path == "q.retrieval.yaml"


def test_the_users_failure_is_kept_and_raised_again(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    suite = _suite(tmp_path, "boom")
    system = cache.settings.system("s")
    with pytest.raises(RunError) as first:
        cache.record(suite, system)  # type: ignore[arg-type]
    with pytest.raises(RunError) as again:
        cache.record(suite, system)  # type: ignore[arg-type]
    assert again.value is first.value
    assert "the user's retriever broke" in str(first.value)
    assert (tmp_path / "calls.txt").read_text() == "boom\n"  # not run a second time


def test_the_plugins_own_bug_is_an_internal_error_with_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = _cache(tmp_path)
    monkeypatch.setattr(
        "retrieval_gate.runs.evaluate.record_run",
        raising_in("retrieval_gate.runs.evaluate", KeyError("a bug of the plugin")),
    )
    with pytest.raises(InternalRunError) as info:
        cache.record(_suite(tmp_path), cache.settings.system("s"))  # type: ignore[arg-type]
    assert str(info.value).startswith("internal error in pytest-retrieval-gate while running q x s")
    assert isinstance(info.value.__cause__, KeyError)


def test_a_corpus_is_read_once_and_a_bad_one_fails_the_same_way_each_time(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha")
    assert cache.corpus(folder) is cache.corpus(folder)
    missing = tmp_path / "absent"
    with pytest.raises(CorpusError) as first:
        cache.corpus(missing)
    with pytest.raises(CorpusError) as again:
        cache.corpus(missing)
    assert again.value is first.value


def test_cached_builds_once_per_key(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    built: list[str] = []

    def build(value: str) -> str:
        built.append(value)
        return value

    assert cache.cached(("k", 1), lambda: build("v")) == "v"
    assert cache.cached(("k", 1), lambda: build("w")) == "v"
    assert built == ["v"]

"""baseline/ledger.py: the ledger a baseline path or URL and a history folder name, and what a
session reads from it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from retrieval_gate.baseline.head import Baseline, BaselineError
from retrieval_gate.baseline.ledger import (
    FileLedger,
    Ledger,
    load_for_session,
    open_ledger,
    register_store,
    url_scheme,
)
from retrieval_gate.baseline.log import JsonLinesLog
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.records import RunRecord


def test_a_path_or_a_file_url_is_the_file_ledger(tmp_path: Path) -> None:
    assert open_ledger(tmp_path / "b.json", None) == FileLedger(tmp_path / "b.json")
    assert open_ledger(f"file://{tmp_path}/b.json", tmp_path / "h") == FileLedger(
        tmp_path / "b.json", JsonLinesLog(tmp_path / "h")
    )
    assert isinstance(open_ledger(tmp_path / "b.json", None), Ledger)
    assert url_scheme("retrieval-baseline.json") is None
    assert url_scheme("C:/x") is None  # a drive letter is no scheme: no '://'
    assert url_scheme("s3+https://bucket/key") == "s3+https"


class MemoryStore:
    """A store a package might register: baselines kept in a dict, by URL."""

    saved: dict[str, list[RunRecord]] = {}  # noqa: RUF012 - shared on purpose, per test

    def __init__(self, url: str) -> None:
        self.url = url

    @property
    def location(self) -> str:
        return self.url

    def exists(self) -> bool:
        return self.url in self.saved

    def load(self) -> Baseline | None:
        runs = self.saved.get(self.url)
        if runs is None:
            return None
        return Baseline(path=Path(self.url), runs={f"{r.suite}::{r.system}": r for r in runs})

    def save(self, records: Iterable[RunRecord], previous: Baseline | None) -> None:
        self.saved[self.url] = list(records)


def test_another_scheme_is_the_store_registered_for_it(tmp_path: Path) -> None:
    """A store of 0.x's kind (a baseline's load and save) keeps the head; the log stays the
    project's folder."""
    register_store("mem", MemoryStore)
    ledger = open_ledger("mem://team/main", tmp_path / "h")
    assert ledger.location == "mem://team/main"
    assert ledger.log_location == str(tmp_path / "h")
    assert load_for_session(ledger, named=False, saving=False) == (None, None)
    ledger.save_head([], None)
    assert MemoryStore.saved["mem://team/main"] == []


def test_an_unknown_scheme_lists_the_known_ones() -> None:
    with pytest.raises(
        BaselineError, match=r"unknown baseline store 'ftp' in 'ftp://x/b'; known: file"
    ):
        open_ledger("ftp://x/b", None)


def test_a_named_baseline_must_exist_unless_the_session_saves_one(tmp_path: Path) -> None:
    store = FileLedger(tmp_path / "b.json")
    with pytest.raises(RetrievalGateError, match=r"--rg-baseline .*b\.json: no such file"):
        load_for_session(store, named=True, saving=False)
    assert load_for_session(store, named=True, saving=True) == (None, None)


def test_saving_over_an_unreadable_baseline_says_what_it_replaced(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text("{not json")
    store = FileLedger(tmp_path / "b.json")
    with pytest.raises(BaselineError, match="corrupt baseline"):
        load_for_session(store, named=False, saving=False)
    baseline, problem = load_for_session(store, named=False, saving=True)
    assert baseline is None
    assert problem is not None and problem.startswith(f"{tmp_path / 'b.json'}: corrupt baseline")

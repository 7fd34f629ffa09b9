"""Hostile input to the engines through ``pytest --retrieval-gate``: an embedder plug-in that
returns bad vectors or never returns, all-zero vectors, and team tables that cannot be measured
as they are, each on the exact index, PostgreSQL + pgvector (pgserver) and LanceDB (a folder).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="psycopg is needed (pip install '.[pgvector]')")
pytest.importorskip("lancedb", reason="lancedb is needed (pip install '.[lancedb]')")
# Imported here, once: pytester's in-process runs drop modules first imported during a run,
# and these native ones cannot be imported twice in one process.
import lancedb
import psycopg
import pyarrow as pa

import retrieval_gate.index.lancedb
import retrieval_gate.index.pgvector  # noqa: F401

from .conftest import lit
from .test_engines import DOCS, EMBEDDER, SUITE, settings

# An embedder plug-in whose document vectors go wrong as RG_BAD says; its queries are fine.
BAD = """
import os
import threading

import numpy as np

from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder


class Bad:
    identity = "test-bad-vectors/1"
    dim = 16

    def encode_documents(self, texts, *, progress=False):
        how = os.environ["RG_BAD"]
        rows = np.ones((len(texts), 16), dtype=np.float32)
        if how == "nan":
            rows[0, 3] = np.nan
        elif how == "short":
            rows = rows[1:]
        elif how == "long":
            rows = np.vstack([rows, rows[:1]])
        elif how == "wide":
            rows = np.ones((len(texts), 32), dtype=np.float32)
        elif how == "hang":
            threading.Event().wait()
        return rows

    def encode_queries(self, texts):
        return np.ones((len(texts), 16), dtype=np.float32)


register_embedder(EmbedderBackend("bad", "test", {}, lambda s, c, e: Bad(), "test"))


def pytest_unconfigure(config):
    EMBEDDERS.pop("bad", None)
"""

# Zero vectors for every document; the queries get word vectors.
ZERO = """
import numpy as np


class Zero(Hashing):
    identity = "test-zero-vectors/1"

    def encode_documents(self, texts, *, progress=False):
        return np.zeros((len(texts), 32), dtype=np.float32)


register_embedder(EmbedderBackend("zero", "test", {}, lambda s, c, e: Zero(), "test"))


def pytest_unconfigure(config):  # both plug-ins gone: later tests list the real embedders
    for name in ("words", "zero"):
        EMBEDDERS.pop(name, None)
"""

SYSTEMS = {
    "exact": 'index = "exact"',
    "pg": 'index = "pgvector"\ndsn_env = "RG_TEST_DSN"',
    "lance": 'index = "lancedb"',
}


# The project's own warning filter shows the warnings (this repository's makes them errors).
SHOW = 'addopts = "-p no:cacheprovider"\nfilterwarnings = ["default::UserWarning"]'


def shown(text: str) -> str:
    return text.replace('addopts = "-p no:cacheprovider"', SHOW, 1)


def project(pytester: pytest.Pytester, conftest: str, body: str) -> None:
    pytester.makeconftest(conftest)
    systems = {name: body + index for name, index in SYSTEMS.items()}
    pytester.makefile(".toml", pyproject=shown(settings(systems, corpus="corpus")))
    (pytester.path / "corpus").mkdir(exist_ok=True)
    for name, text in DOCS.items():
        (pytester.path / "corpus" / name).write_text(text + "\n")
    (pytester.path / "fruit.retrieval.yaml").write_text(SUITE.replace("Hit@3: 1.0", "Hit@3: 0.0"))


@pytest.fixture
def dsn(postgres: tuple[str, Path | None], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RG_TEST_DSN", postgres[0])
    return postgres[0]


@pytest.mark.parametrize(
    ("how", "line"),
    [
        (
            "nan",
            "returned NaN or infinite values in 1 of 4 document vectors (the first for document "
            "'blue.md')",
        ),
        ("short", "returned 3 document vectors for 4 texts"),
        ("long", "returned 5 document vectors for 4 texts"),
        (
            "wide",
            "returned 32-dimensional document vectors; it said its vectors are 16-dimensional",
        ),
        (
            "hang",
            "did not return 4 document vectors within 0.5 s (the system's 'timeout', 0.5 s per "
            "batch of 64 texts); check the embedder, or raise 'timeout'",
        ),
    ],
)
def test_bad_vectors_from_an_embedder_are_one_line_naming_it_and_the_system_on_every_index(
    pytester: pytest.Pytester,
    dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    line: str,
) -> None:
    # Before: a traceback from inside each index (NaN, too few rows), or, for an encoder that
    # never returns, a session that hung with the system's timeout set.
    monkeypatch.setenv("RG_BAD", how)
    project(pytester, BAD, 'embedder = "bad"\nmodel = "bad"\ntimeout = 0.5\n')
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'c'}")
    result.assert_outcomes(failed=3)
    for system in SYSTEMS:
        result.stdout.fnmatch_lines(
            [f"*pyproject.toml [[]system.{system}[]]: embedder 'bad' {lit(line)}"]
        )
    assert "Traceback" not in result.stdout.str()


def test_all_zero_vectors_are_said_on_every_index_with_what_each_does(
    pytester: pytest.Pytester, dsn: str
) -> None:
    project(pytester, EMBEDDER + ZERO, 'embedder = "zero"\nmodel = "zero"\n')
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'c'}")
    result.assert_outcomes(passed=3)
    said = "embedder 'zero' returned 4 all-zero document vectors of 4: "
    effects = {
        "exact": "exact search scores a zero vector 0 against every other one, so it ranks by "
        "the tie order alone",
        "pg": "pgvector's exact scan scores a zero vector 0, as exact search does (an hnsw or "
        "ivfflat index ranks it last)",
        "lance": "LanceDB leaves a zero document vector out of every result, and finds nothing "
        "for a zero query vector (its cosine distance is undefined), where exact search scores "
        "them 0",
    }
    for system, effect in effects.items():
        result.stdout.fnmatch_lines(
            [f"*VectorWarning: *[[]system.{system}[]]: {lit(said + effect)}"]
        )
    runs = {
        run["system"]: run
        for run in json.loads((pytester.path / "retrieval-gate-report.json").read_text())["runs"]
    }
    # Every document scores 0, so the tie order alone ranks: red, pie, green, blue (id
    # descending). P@1: red apple finds red.md first, blue sky and green wine do not: 1/3.
    for system in ("exact", "pg"):
        assert runs[system]["metrics"]["P@1"] == pytest.approx(1 / 3), system
        assert said + effects[system] in "\n".join(runs[system]["stats"]["notes"])
    assert runs["lance"]["metrics"]["P@1"] == 0.0
    assert said + effects["lance"] in "\n".join(runs["lance"]["stats"]["notes"])


def _team_pg(dsn: str, rows: list[tuple[str | None, str | None]]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cur.execute("DROP TABLE IF EXISTS team_fruit_odd")
        cur.execute("CREATE TABLE team_fruit_odd (doc_id text, emb vector(32))")
        for doc_id, vector in rows:
            cur.execute("INSERT INTO team_fruit_odd VALUES (%s, %s::vector)", (doc_id, vector))


TEAM = {
    "pg": 'index = "pgvector"\ndsn_env = "RG_TEST_DSN"\ntable = "team_fruit_odd"\n'
    'id_column = "doc_id"\nvector_column = "emb"\n',
    "lance": 'index = "lancedb"\nuri = "team"\ntable = "docs"\nid_column = "doc_id"\n'
    'vector_column = "emb"\n',
}


def team_project(
    pytester: pytest.Pytester, rows: list[tuple[str | None, list[float] | None]]
) -> None:
    pytester.makeconftest(EMBEDDER)
    words = 'embedder = "words"\nmodel = "words"\n'
    pytester.makefile(
        ".toml",
        pyproject=shown(
            settings({name: words + body for name, body in TEAM.items()}, corpus="corpus")
        ),
    )
    (pytester.path / "corpus").mkdir(exist_ok=True)
    for name, text in DOCS.items():
        (pytester.path / "corpus" / name).write_text(text + "\n")
    (pytester.path / "fruit.retrieval.yaml").write_text(SUITE.replace("Hit@3: 1.0", "Hit@3: 0.0"))
    vectors = pa.array([v for _, v in rows], type=pa.list_(pa.float32(), 32))
    ids = pa.array([doc_id for doc_id, _ in rows], type=pa.string())
    lancedb.connect(pytester.path / "team").create_table(
        # Without it, LanceDB refuses a null among vectors this wide; a team's table may hold
        # them all the same (written with it, or by another client).
        "docs",
        pa.table({"doc_id": ids, "emb": vectors}),
        on_bad_vectors="null",
    )


def test_team_tables_with_null_vectors_are_searched_and_the_rows_counted(
    pytester: pytest.Pytester, dsn: str
) -> None:
    # Before: a TypeError from inside index/pgvector.py; LanceDB skipped the row silently.
    one = [1.0] + [0.0] * 31
    rows: list[tuple[str | None, list[float] | None]] = [
        ("red.md", one),
        ("green.md", None),
        ("blue.md", one),
        ("pie.md", one),
    ]
    _team_pg(dsn, [(d, None if v is None else str(v)) for d, v in rows])
    team_project(pytester, rows)
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'c'}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*VectorWarning: PostgreSQL at *: table team_fruit_odd: 1 of 4 rows has a NULL "
            "'emb' and is never found by a search",
            "*VectorWarning: LanceDB table 'docs' at *team: 1 of 4 rows has a NULL 'emb' and "
            "is never found by a search",
        ],
        consecutive=False,
    )
    assert "Traceback" not in result.stdout.str()


def test_empty_team_tables_are_one_line_not_every_metric_zero(
    pytester: pytest.Pytester, dsn: str
) -> None:
    _team_pg(dsn, [])
    team_project(pytester, [])
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'c'}")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*[[]system.pg[]]: PostgreSQL at *: table team_fruit_odd is empty: there is no "
            "document to search",
            "*[[]system.lance[]]: LanceDB table 'docs' at *team is empty: there is no document "
            "to search",
        ],
        consecutive=False,
    )
    assert "FAILED: 0" not in result.stdout.str()


@pytest.mark.parametrize(
    ("rows", "pg_line", "lance_line"),
    [
        (
            # red.md twice: its second row's vector is green.md's.
            [("red.md", "one"), ("red.md", "two"), ("green.md", "two"), ("blue.md", "one")],
            "table team_fruit_odd: 1 of 4 rows repeats an id of another row in column 'doc_id' "
            "(e.g. 'red.md'); the gate ranks one vector per document: keep one row per id "
            "(chunked tables are not supported)",
            "1 of 4 rows repeats an id of another row in column 'doc_id' (e.g. 'red.md'); the "
            "gate ranks one vector per document: keep one row per id (chunked tables are not "
            "supported)",
        ),
        (
            [(None, "one"), ("green.md", "two"), ("blue.md", "one"), ("pie.md", "one")],
            "table team_fruit_odd: 1 of 4 rows has a NULL 'doc_id', so a search would find "
            "rows that are no document; give them ids, or name a view of the rows that have "
            "one in 'table'",
            "1 of 4 rows has a NULL 'doc_id', so a search would find rows that are no "
            "document; give them ids, or name a view of the rows that have one in 'table'",
        ),
    ],
    ids=["duplicate id", "null id"],
)
def test_team_tables_with_duplicate_or_null_ids_are_one_line(
    pytester: pytest.Pytester,
    dsn: str,
    rows: list[tuple[str | None, str]],
    pg_line: str,
    lance_line: str,
) -> None:
    # Before: a duplicate id ranked by whichever of its rows scored lowest (a chunked team
    # table lost its best chunks), and a NULL id was ranked as a document named 'None'.
    vectors = {"one": [1.0] + [0.0] * 31, "two": [0.0, 1.0] + [0.0] * 30}
    _team_pg(dsn, [(d, str(vectors[v])) for d, v in rows])
    team_project(pytester, [(d, vectors[v]) for d, v in rows])
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'c'}")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            f"*[[]system.pg[]]: PostgreSQL at *: {lit(pg_line)}",
            f"*[[]system.lance[]]: LanceDB table 'docs' at *team: {lit(lance_line)}",
        ],
        consecutive=False,
    )
    assert "Traceback" not in result.stdout.str()
    # Read only: the team's rows are all still there.
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM team_fruit_odd")
        assert cur.fetchone() == (len(rows),)
    assert lancedb.connect(pytester.path / "team").open_table("docs").count_rows() == len(rows)

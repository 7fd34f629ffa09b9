"""The pgvector index against a real PostgreSQL 16 with pgvector (pgserver, started once per
session, or the server ``RETRIEVAL_GATE_TEST_DSN`` names)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.errors import ConfigError, RunError
from retrieval_gate.index import INDEXES, index_recall, make_index
from retrieval_gate.index.exact import ExactIndex

from .test_index import EXPECTED_FULL, IDS, QUERIES, VECTORS, _check, _random

psycopg = pytest.importorskip("psycopg", reason="psycopg is needed (pip install '.[pgvector]')")
from retrieval_gate.index.pgvector import read_build, table_name  # noqa: E402


@pytest.fixture
def dsn(postgres: tuple[str, Path | None]) -> str:
    return postgres[0]


def sql(dsn: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(statement, params or None)
        return cur.fetchall() if cur.description else []


def defaults() -> dict[str, Any]:
    return {name: option.default for name, option in INDEXES["pgvector"].options.items()}


def comment(dsn: str, table: str) -> dict[str, Any] | None:
    (row,) = sql(dsn, "SELECT obj_description(to_regclass(%s), 'pg_class')", table)
    return None if row[0] is None else dict(json.loads(row[0]))


@pytest.fixture
def key(request: pytest.FixtureRequest) -> Iterator[str]:
    """A key of this test's own (tables are named from it); its tables dropped afterwards."""
    name = f"test-{request.node.name}"
    yield name
    dsn = request.getfixturevalue("dsn")
    for (table,) in sql(
        dsn, "SELECT relname FROM pg_class WHERE relname LIKE 'rg\\_%%' AND relkind = 'r'"
    ):
        if str(table).startswith("rg_"):
            sql(dsn, f'DROP TABLE IF EXISTS "{table}"')


# -- the gate's own table ------------------------------------------------------------------


def test_exact_search_orders_by_cosine_with_the_trec_eval_tie_order(
    dsn: str, key: str, tmp_path: Path
) -> None:
    index = make_index("pgvector", cache_dir=tmp_path, key=key, dsn=dsn)
    index.add(IDS, VECTORS)
    assert len(index) == 5
    # pgvector computes the cosine distance of float4 vectors; the scores are 1 - distance.
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-6)
    # c and d tie for third on q1: the scan orders ties by id descending, so d makes the cut.
    _check(index.search(QUERIES, k=3), [row[:3] for row in EXPECTED_FULL], 1e-6)
    assert index.search(QUERIES[:0], k=3) == []
    index.close()  # type: ignore[attr-defined]


def test_the_table_is_named_from_the_key_and_a_warm_add_writes_nothing(
    dsn: str, key: str, tmp_path: Path
) -> None:
    options: dict[str, Any] = {"dsn": dsn}
    name = table_name(key, {**defaults(), **options})
    assert name.startswith("rg_") and len(name) == 35
    index = make_index("pgvector", cache_dir=tmp_path, key=key, **options)
    index.add(IDS, VECTORS)
    first = comment(dsn, name)
    assert first is not None
    assert (first["rows"], first["dim"], first["retrieval-gate"]) == (5, 3, 1)
    index.close()  # type: ignore[attr-defined]
    assert read_build(tmp_path, key, {**defaults(), **options}) == first["build"]

    again = make_index("pgvector", cache_dir=tmp_path, key=key, **options)
    again.add(list(reversed(IDS)), VECTORS[::-1].copy())
    # The same ids and width: nothing written, the build (and so cached results) kept.
    assert comment(dsn, name) == first
    _check(again.search(QUERIES, k=5), EXPECTED_FULL, 1e-6)
    again.close()  # type: ignore[attr-defined]
    assert table_name("another", {**defaults(), **options}) != name


def test_a_table_the_gate_did_not_write_is_refused_and_kept(
    dsn: str, key: str, tmp_path: Path
) -> None:
    name = table_name(key, {**defaults(), "dsn": dsn})
    sql(dsn, f'CREATE TABLE "{name}" (id text, note text)')
    sql(dsn, f"INSERT INTO \"{name}\" VALUES ('x', 'the team''s row')")
    index = make_index("pgvector", cache_dir=tmp_path, key=key, dsn=dsn, entry="system.pg")
    with pytest.raises(ConfigError) as info:
        index.add(IDS, VECTORS)
    # The error says which system, though it comes from a method called after make_index.
    assert str(info.value) == (
        f"[system.pg]: PostgreSQL at {_where(dsn)}: table {name} exists and was not written by "
        "the gate; "
        "it is left alone (drop it, or read it with 'table')"
    )
    assert sql(dsn, f'SELECT id, note FROM "{name}"') == [("x", "the team's row")]
    index.close()  # type: ignore[attr-defined]


def test_hnsw_and_ivfflat_indexes_are_built_and_measured_against_exact(
    dsn: str, key: str, tmp_path: Path
) -> None:
    vectors = _random(600, 16, seed=3)
    ids = [f"doc{i:03d}" for i in range(600)]
    queries = _random(30, 16, seed=4)
    exact = ExactIndex()
    exact.add(ids, vectors)
    truth = [[d for d, _ in row] for row in exact.search(queries, 10)]
    # Every list probed: IVFFlat is then exhaustive, so it finds the exact top 10.
    ivf = make_index(
        "pgvector",
        cache_dir=tmp_path,
        key=key,
        dsn=dsn,
        ann_index="ivfflat",
        ivfflat_lists=4,
        ivfflat_probes=4,
    )
    ivf.add(ids, vectors)
    found = [[d for d, _ in row] for row in ivf.search(queries, 10)]
    assert index_recall(found, truth, 10) == 1.0
    hnsw = make_index(
        "pgvector",
        cache_dir=tmp_path,
        key=key,
        dsn=dsn,
        ann_index="hnsw",
        hnsw_ef_search=200,
        build_memory="64MB",
    )
    hnsw.add(ids, vectors)
    found = [[d for d, _ in row] for row in hnsw.search(queries, 10)]
    assert index_recall(found, truth, 10) >= 0.9
    indexes = {
        str(row[0]).rsplit("_", 1)[-1]
        for row in sql(dsn, "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'rg\\_%%'")
        if not str(row[0]).endswith("_pkey")
    }
    assert {"hnsw", "ivfflat"} <= indexes
    assert INDEXES["pgvector"].approximate_for({"ann_index": "hnsw"}) is True
    assert INDEXES["pgvector"].approximate_for({"ann_index": "none"}) is False
    assert INDEXES["pgvector"].rebuildable_for({"ann_index": "hnsw", "table": "docs"}) is False
    for index in (ivf, hnsw):
        index.close()  # type: ignore[attr-defined]


def test_a_scratch_build_leaves_nothing_on_the_server(dsn: str, key: str, tmp_path: Path) -> None:
    before = sql(dsn, "SELECT count(*) FROM pg_class WHERE relname LIKE 'rg\\_%%'")
    index = make_index(
        "pgvector", cache_dir=tmp_path, key=key, dsn=dsn, ann_index="hnsw", scratch=True
    )
    index.add(IDS, VECTORS)
    _check(index.search(QUERIES[:1], k=2), [EXPECTED_FULL[0][:2]], 1e-6)
    index.close()  # type: ignore[attr-defined]
    assert sql(dsn, "SELECT count(*) FROM pg_class WHERE relname LIKE 'rg\\_%%'") == before


# -- a team's table ------------------------------------------------------------------------


@pytest.fixture
def team_table(dsn: str) -> Iterator[str]:
    # A team's database has the extension already (its table has a vector column); in a fresh
    # server nothing has created it yet when this test runs first.
    sql(dsn, "CREATE EXTENSION IF NOT EXISTS vector")
    sql(dsn, "DROP TABLE IF EXISTS team_docs")
    sql(dsn, "CREATE TABLE team_docs (doc_id text PRIMARY KEY, emb vector(3), title text)")
    for doc_id, row in zip(IDS, VECTORS.tolist(), strict=True):
        sql(dsn, "INSERT INTO team_docs VALUES (%s, %s::vector, 'x')", doc_id, str(row))
    yield "team_docs"
    sql(dsn, "DROP TABLE IF EXISTS team_docs")


def test_a_teams_table_is_searched_and_never_written(
    dsn: str, team_table: str, tmp_path: Path
) -> None:
    options: dict[str, Any] = {
        "dsn": dsn,
        "table": team_table,
        "id_column": "doc_id",
        "vector_column": "emb",
    }
    assert INDEXES["pgvector"].stores_documents(options)
    index = make_index("pgvector", cache_dir=tmp_path, key="k", **options)
    index.add([*IDS, "new"], np.vstack([VECTORS, VECTORS[:1]]))
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-6)
    assert sql(dsn, "SELECT count(*) FROM team_docs") == [(5,)]
    assert comment(dsn, team_table) is None
    assert read_build(tmp_path, "k", options) is None  # may change under us: never cached
    index.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"table": "no_such_table"}, "table no_such_table does not exist"),
        (
            {"table": "team_docs", "id_column": "name"},
            "table team_docs has no column 'name' (its columns: doc_id, emb, title)",
        ),
        (
            {"table": "team_docs", "id_column": "doc_id", "vector_column": "title"},
            "column 'title' of table team_docs is text, not a pgvector vector",
        ),
        (
            {"table": "team_docs", "id_column": "doc_id", "vector_column": "emb", "dim": 4},
            "table team_docs holds 3-dimensional vectors in 'emb'; the model gives "
            "4-dimensional ones",
        ),
    ],
    ids=["missing table", "missing column", "not a vector", "wrong dimension"],
)
def test_a_teams_table_that_does_not_fit_is_one_line(
    dsn: str, team_table: str, tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    dim = options.pop("dim", 3)
    index = make_index("pgvector", cache_dir=tmp_path, key="k", dsn=dsn, **options)
    with pytest.raises(ConfigError) as info:
        index.search(np.ones((1, dim), dtype=np.float32), k=3)
    assert str(info.value) == f"PostgreSQL at {_where(dsn)}: {message}"
    index.close()  # type: ignore[attr-defined]


# -- servers that cannot be used ----------------------------------------------------------


def _where(dsn: str) -> str:
    from retrieval_gate.index.pgvector import describe

    return describe(dsn).removeprefix("PostgreSQL at ")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    port = _free_port()
    dsn = f"postgresql://gate@127.0.0.1:{port}/db"
    with pytest.raises(ConfigError) as info:
        make_index("pgvector", cache_dir=tmp_path, key="k", dsn=dsn, entry="system.pg")
    text = str(info.value)
    assert text.startswith(
        f"[system.pg]: PostgreSQL at gate@127.0.0.1:{port}/db is not reachable: "
    )
    assert "\n" not in text


def test_a_server_that_does_not_answer_times_out(tmp_path: Path) -> None:
    # Accepts connections and never says a word: connect_timeout must end the wait.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        with pytest.raises(ConfigError) as info:
            make_index(
                "pgvector",
                cache_dir=tmp_path,
                key="k",
                entry="system.pg",
                dsn=f"postgresql://gate:secret@127.0.0.1:{port}/db",
                connect_timeout=2,
            )
    finally:
        listener.close()
        for conn in accepted:
            conn.close()
    text = str(info.value)
    assert text.startswith(
        f"[system.pg]: PostgreSQL at gate@127.0.0.1:{port}/db did not answer within 2 s "
        "(connect_timeout): "
    )
    assert "secret" not in text


def test_a_connection_ends_when_its_server_or_network_goes_away_mid_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The statement timeouts are the server's to keep: a server gone away keeps none, and the
    # client waited for its answer as long as the kernel's keepalive (two hours) on 65934fb.
    asked: dict[str, Any] = {}

    def connect(dsn: str, **kwargs: Any) -> Any:
        asked.update(kwargs)
        raise psycopg.OperationalError("stop here")

    monkeypatch.setattr(psycopg, "connect", connect)
    with pytest.raises(ConfigError):
        make_index(
            "pgvector",
            cache_dir=tmp_path,
            key="k",
            dsn="postgresql://gate@127.0.0.1:9/db?keepalives_idle=30",
            connect_timeout=6,
        )
    # Every one of them but the one the DSN gives itself.
    assert {key: asked.get(key) for key in asked if key.startswith(("keep", "tcp"))} == {
        "keepalives": 1,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": 18000,
    }


def test_bad_credentials_are_one_line(postgres: tuple[str, Path | None], tmp_path: Path) -> None:
    dsn, data = postgres
    if data is None:
        pytest.skip("needs the pgserver started here (its pg_hba.conf is edited)")
    sql(dsn, "DROP ROLE IF EXISTS gate_user")
    sql(dsn, "CREATE ROLE gate_user LOGIN PASSWORD 'right'")
    hba = data / "pg_hba.conf"
    original = hba.read_text()
    hba.write_text("local all gate_user scram-sha-256\n" + original)
    sql(dsn, "SELECT pg_reload_conf()")
    try:
        wrong = f"postgresql://gate_user:wrong@/postgres?host={data}"
        with pytest.raises(ConfigError) as info:
            make_index("pgvector", cache_dir=tmp_path, key="k", dsn=wrong, entry="system.pg")
    finally:
        hba.write_text(original)
        sql(dsn, "SELECT pg_reload_conf()")
    text = str(info.value)
    assert text.startswith(f"[system.pg]: PostgreSQL at gate_user@{data}:5432/postgres refused")
    assert 'password authentication failed for user "gate_user"' in text
    assert text.endswith("; check the DSN's user, password and database")
    assert "wrong" not in text.replace("password", "")


def test_no_dsn_or_an_unset_variable_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError) as info:
        make_index("pgvector", cache_dir=tmp_path, key="k", entry="system.pg")
    assert str(info.value) == (
        "[system.pg]: index 'pgvector' needs 'dsn' (a postgresql:// URI) or 'dsn_env' (the "
        "environment variable holding it)"
    )
    monkeypatch.delenv("RG_NO_SUCH_DSN", raising=False)
    with pytest.raises(ConfigError) as info:
        make_index(
            "pgvector", cache_dir=tmp_path, key="k", entry="system.pg", dsn_env="RG_NO_SUCH_DSN"
        )
    assert str(info.value) == (
        "[system.pg]: index 'pgvector': environment variable RG_NO_SUCH_DSN (dsn_env) is not set"
    )


def test_a_search_past_the_statement_timeout_is_one_line(
    dsn: str, key: str, tmp_path: Path
) -> None:
    vectors = _random(20000, 64, seed=5)
    ids = [f"d{i}" for i in range(20000)]
    index = make_index("pgvector", cache_dir=tmp_path, key=key, dsn=dsn, statement_timeout=0.001)
    index.add(ids, vectors)  # loading has its own, longer build_timeout
    with pytest.raises(RunError) as info:
        index.search(_random(256, 64, seed=6), k=10)
    text = str(info.value)
    assert "a search on table rg_" in text
    assert "was cancelled after the statement timeout" in text
    assert text.endswith("raise 'statement_timeout' or 'build_timeout'")
    index.close()  # type: ignore[attr-defined]


def _holding_the_extension_catalogue(dsn: str, seconds: float) -> threading.Thread:
    """Another session holds pg_extension locked for ``seconds``: the gate's extension lookup at
    open waits on it (a server that is slow to answer)."""
    locked = threading.Event()

    def hold() -> None:
        with psycopg.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute("LOCK TABLE pg_extension IN ACCESS EXCLUSIVE MODE")
            locked.set()
            threading.Event().wait(seconds)
            conn.rollback()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert locked.wait(10)
    return thread


def test_opening_is_bounded_by_connect_timeout_not_a_searchs_statement_timeout(
    dsn: str, key: str, tmp_path: Path
) -> None:
    # A millisecond statement_timeout tuned for searches: the lookup at open waits 0.3 s for the
    # catalogue and still succeeds, because opening is bounded by connect_timeout.
    holder = _holding_the_extension_catalogue(dsn, 0.3)
    index = make_index("pgvector", cache_dir=tmp_path, key=key, dsn=dsn, statement_timeout=0.001)
    holder.join()
    index.close()  # type: ignore[attr-defined]
    # A lookup that takes longer than connect_timeout is one line naming it.
    holder = _holding_the_extension_catalogue(dsn, 3)
    with pytest.raises(ConfigError) as info:
        make_index(
            "pgvector", cache_dir=tmp_path, key=key, dsn=dsn, connect_timeout=1, entry="system.pg"
        )
    holder.join()
    text = str(info.value)
    assert text.startswith(
        f"[system.pg]: PostgreSQL at {_where(dsn)} did not answer the pgvector extension "
        "lookup within 1 s (connect_timeout): "
    )
    assert "statement timeout" in text and "\n" not in text


# -- a killed run --------------------------------------------------------------------------

KILLED = """
import os, signal, sys
import numpy as np
import retrieval_gate.index.pgvector.index as pgvector
from retrieval_gate.index import make_index

real = pgvector._copy_payload

def dying(ids, vectors):
    for number, block in enumerate(real(ids, vectors)):
        if number == 2:  # half way through the COPY
            os.kill(os.getpid(), signal.SIGKILL)
        yield block

pgvector._copy_payload = dying
pgvector._COPY_ROWS = 100
rng = np.random.default_rng(7)
index = make_index("pgvector", cache_dir=sys.argv[2], key=sys.argv[3], dsn=sys.argv[1])
index.add([f"d{i}" for i in range(1000)], rng.normal(size=(1000, 8)).astype(np.float32))
"""


def test_a_run_killed_while_loading_leaves_no_half_table(
    dsn: str, key: str, tmp_path: Path
) -> None:
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED))
    done = subprocess.run([sys.executable, str(script), dsn, str(tmp_path), key], check=False)
    assert done.returncode == -9
    name = table_name(key, {**defaults(), "dsn": dsn})
    # The transaction died with its connection: no table, rather than one with some rows.
    assert sql(dsn, "SELECT to_regclass(%s) IS NULL", name) == [(True,)]
    vectors = np.random.default_rng(7).normal(size=(1000, 8)).astype(np.float32)
    ids = [f"d{i}" for i in range(1000)]
    index = make_index("pgvector", cache_dir=tmp_path, key=key, dsn=dsn)
    index.add(ids, vectors)
    exact = ExactIndex()
    exact.add(ids, vectors)
    queries = vectors[:5] + 0.01
    assert [[d for d, _ in r] for r in index.search(queries, 10)] == [
        [d for d, _ in r] for r in exact.search(queries, 10)
    ]
    assert len(index) == 1000
    index.close()  # type: ignore[attr-defined]


# -- a team's table that cannot be measured as it is ----------------------------------------


def _team(dsn: str, rows: Sequence[tuple[str, str | None]], *, index: str | None = None) -> None:
    sql(dsn, "CREATE EXTENSION IF NOT EXISTS vector")
    sql(dsn, "DROP TABLE IF EXISTS team_odd")
    sql(dsn, "CREATE TABLE team_odd (doc_id text PRIMARY KEY, emb vector(3))")
    for doc_id, vector in rows:
        sql(dsn, "INSERT INTO team_odd VALUES (%s, %s::vector)", doc_id, vector)
    if index is not None:
        sql(dsn, f"CREATE INDEX ON team_odd USING {index}")


def _open_team(dsn: str, tmp_path: Path, **options: Any) -> Any:
    return make_index(
        "pgvector",
        cache_dir=tmp_path,
        key="k",
        dsn=dsn,
        table="team_odd",
        id_column="doc_id",
        vector_column="emb",
        entry="system.team",
        **options,
    )


def test_rows_with_a_null_vector_are_searched_past_and_counted(dsn: str, tmp_path: Path) -> None:
    # Before: the NULL row's distance reached float() and the run ended in a TypeError.
    _team(dsn, [("a", "[1,0,0]"), ("b", None), ("c", "[0,1,0]")])
    index = _open_team(dsn, tmp_path)
    # cos(q, a) = 1, cos(q, c) = 0; b has no vector, so it is never a hit.
    _check(index.search(np.array([[1, 0, 0]], dtype=np.float32), k=3), [[("a", 1), ("c", 0)]], 1e-6)
    assert index.check_table(["a", "b", "c"]) == [
        f"PostgreSQL at {_where(dsn)}: table team_odd: 1 of 3 rows has a NULL 'emb' and is "
        "never found by a search"
    ]
    index.close()
    sql(dsn, "DROP TABLE team_odd")


@pytest.mark.parametrize(
    ("rows", "corpus", "options", "message"),
    [
        ([], ["a"], {}, "table team_odd is empty: there is no document to search"),
        (
            [("x1", "[1,0,0]"), ("x2", "[0,1,0]")],
            ["a", "b"],
            {},
            "table team_odd: none of the 2 ids in column 'doc_id' is a corpus document id "
            "(e.g. 'x1'; the corpus has e.g. 'a'); 'id_column' must hold the corpus' ids",
        ),
        (
            [("a", "[1,0,0]")],
            ["a"],
            {"ann_index": "hnsw"},
            "table team_odd has no hnsw index on 'emb' (USING hnsw with vector_cosine_ops), so a "
            "search would scan every row and its recall would not be an index's; create the "
            'index, or set ann_index = "none" for exact search',
        ),
    ],
    ids=["empty", "no id matches", "no ann index"],
)
def test_a_team_table_that_cannot_be_measured_is_one_line(
    dsn: str,
    tmp_path: Path,
    rows: list[tuple[str, str]],
    corpus: list[str],
    options: dict[str, Any],
    message: str,
) -> None:
    # Before: every metric was 0 with no reason, or an exact scan's recall was reported as the
    # (absent) HNSW index's.
    _team(dsn, rows, index="ivfflat (emb vector_cosine_ops)" if options else None)
    index = _open_team(dsn, tmp_path, **options)
    with pytest.raises(ConfigError) as info:
        index.check_table(corpus)
    assert str(info.value) == f"[system.team]: PostgreSQL at {_where(dsn)}: {message}"
    index.close()
    sql(dsn, "DROP TABLE team_odd")


@pytest.mark.parametrize(
    ("kind", "ids", "repeated"),
    [
        (
            "text",
            ["a", "b", "c", "a"],
            "1 of 4 rows repeats an id of another row in column 'doc_id' (e.g. 'a')",
        ),
        # Told apart by numeric's equality (1.0 = 1.00), never by the text a search returns:
        # counted as text, 2 and 2.0 are two ids, 1.0 and 1.0 one.
        (
            "numeric",
            ["1.0", "2", "2.0", "1.0"],
            "1 of 4 rows repeats an id of another row in column 'doc_id' (e.g. '1.0')",
        ),
    ],
    ids=["text", "numeric"],
)
def test_an_id_on_two_rows_is_refused_when_the_table_is_opened_not_when_a_search_meets_it(
    dsn: str, tmp_path: Path, kind: str, ids: list[str], repeated: str
) -> None:
    # The first id's second row points away from its first: no search's top 2 holds both
    # (q = [1, 0, 0]: the rows score 1, 0.8, 0 and -1), so a check of each search's hits let
    # the table pass, the id ranked by whichever row the engine returned.
    sql(dsn, "CREATE EXTENSION IF NOT EXISTS vector")
    sql(dsn, "DROP TABLE IF EXISTS team_odd")
    sql(dsn, f"CREATE TABLE team_odd (doc_id {kind}, emb vector(3))")
    for doc_id, vector in zip(ids, ["[1,0,0]", "[0.8,0.6,0]", "[0,1,0]", "[-1,0,0]"], strict=True):
        sql(dsn, f"INSERT INTO team_odd VALUES (%s::{kind}, %s::vector)", doc_id, vector)
    index = _open_team(dsn, tmp_path)
    found = index.search(np.array([[1, 0, 0]], dtype=np.float32), k=2)
    assert [d for d, _ in found[0]] == ids[:2]
    with pytest.raises(ConfigError) as info:
        index.check_table(ids)
    assert str(info.value) == (
        f"[system.team]: PostgreSQL at {_where(dsn)}: table team_odd: {repeated}; the gate "
        "ranks one vector per document: keep one row per id (chunked tables are not supported)"
    )
    index.close()
    sql(dsn, "DROP TABLE team_odd")


def test_a_zero_vector_scores_0_as_exact_search_scores_it(
    dsn: str, key: str, tmp_path: Path
) -> None:
    ids = ["a", "b", "c", "d"]
    vectors = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 0], [-1, 0, 0]], dtype=np.float32)
    queries = np.array([[1, 0, 0], [0, 0, 0]], dtype=np.float32)
    exact = ExactIndex()
    exact.add(ids, vectors)
    index = make_index("pgvector", cache_dir=tmp_path, key=key, dsn=dsn)
    index.add(ids, vectors)
    # q1: a 1, then b (zero) and c both 0 (id descending: c, b), then d -1. The zero query
    # scores 0 against every document: the tie order alone, d c b a.
    expected: list[list[tuple[str, float]]] = [
        [("a", 1.0), ("c", 0.0), ("b", 0.0), ("d", -1.0)],
        [("d", 0.0), ("c", 0.0), ("b", 0.0), ("a", 0.0)],
    ]
    _check(exact.search(queries, 4), expected, 1e-6)
    _check(index.search(queries, 4), expected, 1e-6)
    _check(index.search(queries, 3), [row[:3] for row in expected], 1e-6)
    index.close()  # type: ignore[attr-defined]


def test_two_sessions_creating_the_extension_at_once_both_open(dsn: str) -> None:
    # xdist workers opening a fresh database at once: each looks the extension up, finds none,
    # and creates it; the one that waits on the other's uncommitted row gets a unique violation
    # when it commits. Held here by an open transaction that has created it.
    from retrieval_gate.index.pgvector.connection import _ensure_extension

    database = f"rg_race_{threading.get_ident()}"
    sql(dsn, f"DROP DATABASE IF EXISTS {database}")
    sql(dsn, f"CREATE DATABASE {database}")
    fresh = psycopg.conninfo.make_conninfo(dsn, dbname=database)
    try:
        with psycopg.connect(fresh) as first, psycopg.connect(fresh, autocommit=True) as second:
            first.execute("CREATE EXTENSION vector")  # uncommitted: its transaction stays open
            failed: list[BaseException] = []

            def open_second() -> None:
                try:
                    _ensure_extension(second, "second", {})
                except BaseException as exc:  # reported below
                    failed.append(exc)

            thread = threading.Thread(target=open_second)
            thread.start()
            waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            for _ in range(200):  # until the second session waits on the first's row
                if sql(dsn, waiting)[0][0]:
                    break
                thread.join(0.05)
            first.commit()
            thread.join(30)
            assert not thread.is_alive()
            assert failed == []
    finally:
        sql(dsn, f"DROP DATABASE IF EXISTS {database}")

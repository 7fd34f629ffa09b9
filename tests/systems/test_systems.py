"""The system protocol: option tables per kind and backend, identities, stages, run files, the
one tie policy, and failures of libraries turned into one-line errors."""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import retrieval_gate.systems as systems
from retrieval_gate.config import Settings, parse_settings
from retrieval_gate.errors import ConfigError, RunError
from retrieval_gate.metrics import rank_scored
from retrieval_gate.records.wording import ID_WIDTH
from retrieval_gate.runs import run_suite
from retrieval_gate.runs.handle import open_system
from retrieval_gate.schema import Option
from retrieval_gate.suites.suite import parse_suite
from retrieval_gate.systems import (
    OpenContext,
    Retrieved,
    RunOptions,
    Stage,
    StageKind,
    SystemKind,
    register_kind,
    register_stage,
)
from retrieval_gate.systems.config import StageConfig
from retrieval_gate.systems.runfile import read_json_run, read_trec_run

from ..conftest import raising_in

SOURCE = Path("/project/pyproject.toml")


def settings(systems_table: Mapping[str, Any], source: Path = SOURCE) -> Settings:
    return parse_settings({"system": systems_table}, source)


def config_error(spec: Mapping[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        settings({"s": spec})
    return str(info.value)


# -- option tables ------------------------------------------------------------------------------


def test_unknown_key_lists_the_kinds_own_keys() -> None:
    assert config_error({"retriever": "m:f", "model": "x"}) == (
        "/project/pyproject.toml [system.s]: unknown key 'model'; "
        "known: corpus, depth, description, extraction, isolate, retriever, stages, timeout"
    )
    assert config_error({"run": "r.trec", "index": "exact"}) == (
        "/project/pyproject.toml [system.s]: unknown key 'index'; "
        "known: corpus, depth, description, extraction, run, stages"
    )


def test_backend_keys_are_known_only_with_their_backend() -> None:
    embedding = (
        "aggregation, backend, batch_size, build, chunk_overlap, chunk_size, chunk_unit, corpus, depth, "
        "description, device, document_prompt, embed_executor, embedder, extraction, fields, "
        "hnsw_ef_construction, "
        "hnsw_ef_search, hnsw_max_neighbors, hnsw_num_threads, index, index_recall, index_stability, model, "
        "multi_vector, normalize, query_prompt, ray_address, search_block_mb, stages, timeout, weights"
    )
    # pca_dims belongs to model2vec, host to chroma-server.
    assert config_error({"embedder": "sentence-transformers", "model": "m", "pca_dims": 64}) == (
        f"/project/pyproject.toml [system.s]: unknown key 'pca_dims'; known: {embedding}"
    )
    assert config_error({"embedder": "model2vec", "model": "m", "host": "h"}) == (
        "/project/pyproject.toml [system.s]: unknown key 'host'; known: aggregation, "
        "batch_size, build, chunk_overlap, chunk_size, chunk_unit, corpus, depth, description, "
        "device, distill_from, document_prompt, embed_executor, embedder, extraction, fields, "
        "hnsw_ef_construction, "
        "hnsw_ef_search, hnsw_max_neighbors, hnsw_num_threads, index, index_recall, index_stability, model, "
        "multi_vector, normalize, pca_dims, query_prompt, ray_address, search_block_mb, stages, "
        "timeout, "
        "weights"
    )
    parsed = settings(
        {
            "srv": {
                "embedder": "model2vec",
                "distill_from": "m",
                "pca_dims": 32,
                "index": "chroma-server",
                "host": "chroma.local",
                "port": 9000,
            }
        }
    ).system("srv")
    assert parsed.kind == "embedding"
    assert (parsed.option("pca_dims"), parsed.option("host"), parsed.option("port")) == (
        32,
        "chroma.local",
        9000,
    )


def test_invalid_values_and_kind_selection() -> None:
    where = "/project/pyproject.toml [system.s]: "
    assert (
        config_error({"retriever": "m:f", "depth": True})
        == where + "invalid 'depth': True; expected integer (>= 1)"
    )
    assert (
        config_error({"retriever": "m:f", "depth": 0})
        == where + "invalid 'depth': 0; expected integer (>= 1)"
    )
    assert (
        config_error({"embedder": "sentence-transformers", "model": "m", "chunk_unit": "lines"})
        == where + "invalid 'chunk_unit': 'lines'; expected string (words, chars)"
    )
    assert (
        config_error(
            {"embedder": "model2vec", "model": "m", "index": "chroma-server", "port": 70000}
        )
        == where + "invalid 'port': 70000; expected integer (1 to 65535)"
    )
    assert (
        config_error({"retriever": "m:f", "embedder": "model2vec"})
        == where + "give either 'retriever' or 'embedder', not both"
    )
    assert (
        config_error({"retriever": "m:f", "run": "r.trec"})
        == where + "give one of 'retriever', 'embedder' or 'run', not 'retriever' and 'run'"
    )
    assert config_error({"depth": 3}) == (
        where + "a system needs one of 'retriever', 'embedder' or 'run' ('retriever = "
        "\"module:function\"', 'embedder' with 'model', 'run = \"path/to/run.trec\"')"
    )
    assert config_error({"depth": 3, "modle": "m"}).startswith(
        where + "unknown key 'modle'; known: aggregation, batch_size, "
    )
    assert config_error({"embedder": "openai", "model": "m"}) == (
        where + "unknown embedder 'openai'; known: http, model2vec, sentence-transformers"
    )
    assert config_error({"embedder": "model2vec", "model": "m", "index": "faiss"}) == (
        where + "unknown index 'faiss'; known: chroma, chroma-server, exact, lancedb, pgvector"
    )
    assert config_error({"embedder": "model2vec"}) == where + "an embedding system needs 'model'"
    assert config_error(
        {"embedder": "model2vec", "model": "m", "chunk_size": 10, "chunk_overlap": 10}
    ) == (where + "'chunk_overlap' (10) must be smaller than 'chunk_size' (10)")
    assert config_error({"retriever": "search"}) == (
        where + "'retriever' must be 'module:function', got 'search'"
    )


def test_a_system_name_rg_system_would_refuse_is_refused_at_settings_load() -> None:
    with pytest.raises(ConfigError) as info:
        settings({"my search": {"retriever": "m:f"}})
    assert str(info.value) == (
        "/project/pyproject.toml [system.my search]: invalid system name 'my search': use "
        "letters, digits, '-', '_' or '.' (the names --rg-system accepts)"
    )
    assert set(settings({"bm25-v1.2_x": {"retriever": "m:f"}}).systems) == {"bm25-v1.2_x"}


def test_a_key_given_twice_in_the_settings_yaml_is_refused(tmp_path: Path) -> None:
    from retrieval_gate.config import load_settings

    path = tmp_path / "retrieval-gate.yaml"
    path.write_text("system:\n  s:\n    retriever: m:f\n    depth: 10\n    depth: 5\n")
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path)
    assert str(info.value) == f"{path}: key 'depth' is given twice at line 5; keep one"


def test_identities_are_those_of_0_1() -> None:
    parsed = settings(
        {
            "kw": {"retriever": "app:search", "depth": 5},
            "st": {
                "embedder": "sentence-transformers",
                "model": "./models/mini",
                "index": "chroma-server",
                "port": 9000,
                "chunk_size": 50,
            },
            "m2v": {"embedder": "model2vec", "distill_from": "mini", "pca_dims": 32},
            "bm25": {"run": "runs/bm25.trec"},
        }
    )
    assert parsed.system("kw").identity == {"retriever": "app:search"}
    assert parsed.system("st").identity == {
        "embedder": "sentence-transformers",
        "model": "/project/models/mini",
        "index": "chroma-server",
        "query_prompt": "",
        "document_prompt": "",
        "normalize": True,
        "chunk_size": 50,
        "chunk_overlap": 0,
        "distill_from": None,
    }
    assert parsed.system("m2v").identity == {
        "embedder": "model2vec",
        "model": None,
        "index": "chroma",
        "query_prompt": "",
        "document_prompt": "",
        "normalize": True,
        "chunk_size": None,
        "chunk_overlap": 0,
        "distill_from": "mini",
    }
    assert parsed.system("bm25").identity == {"run": "runs/bm25.trec"}
    # Configs travel (xdist, copies) and stay equal.
    import copy
    import pickle

    for name in ("kw", "st", "m2v", "bm25"):
        config = parsed.system(name)
        assert pickle.loads(pickle.dumps(config)) == config
        assert copy.deepcopy(config).identity == config.identity


# -- a project with a retriever, a run file and a suite ------------------------------------------

RETRIEVER = """
DOCS = {"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0}


def search(query, k):
    return list(DOCS.items())[:k]
"""

SUITE = {
    "name": "tiny",
    "k": [1, 2],
    "gates": {"P@1": 0.5},
    "queries": [
        {"id": "q1", "query": "one", "relevant": ["c"]},
        {"id": "q2", "query": "two", "relevant": ["a"]},
    ],
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    module = f"systems_app_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(RETRIEVER)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r.trec").write_text("q1 Q0 b 1 0.5 t\nq1 Q0 a 2 0.5 t\n")
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [tool.retrieval_gate.system.kw]
            retriever = "{module}:search"

            [tool.retrieval_gate.system.stored]
            run = "runs/r.trec"
            """
        )
    )
    return tmp_path


def _settings(root: Path, extra: Mapping[str, Any] | None = None) -> Settings:
    import tomllib

    table = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["retrieval_gate"]
    for name, spec in (extra or {}).items():
        table["system"][name] = spec
    return parse_settings(table, root / "pyproject.toml")


def _run(root: Path, name: str, extra: Mapping[str, Any] | None = None) -> Any:
    suite = parse_suite(SUITE, root / "tiny.retrieval.yaml")
    found = _settings(root, extra)
    return run_suite(suite, found.system(name), found, RunOptions(cache_dir=root / "cache"))


def test_run_file_system_through_run_suite(project: Path) -> None:
    run = _run(project, "stored")
    # a and b tie at 0.5: doc id descending puts b first; q2 is not in the run.
    assert run.rankings == (("b", "a"), ())
    assert run.scores == ((0.5, 0.5), ())
    assert run.latencies_ms == (0.0, 0.0)
    digest = hashlib.sha256((project / "runs" / "r.trec").read_bytes()).hexdigest()
    assert run.fingerprint["system"] == {"run": "runs/r.trec", "run_digest": digest}
    timings = run.stats["timings_ms"]
    assert {k: v for k, v in run.stats.items() if k != "timings_ms"} == {
        "run_file_queries": 1,
        "run_file_missing_queries": 1,
        "latency_measured": False,
        "latency_reason": "a stored run holds no query times",
        # One call per query, as for a retriever: every query goes through the timed path.
        "latency_queries": 2,
        "warnings": [
            "runs/r.trec answers 1 of the suite's 2 queries; the 1 it does not answer scores 0 "
            "(e.g. 'q2')"
        ],
    }
    # Opening counts as load, the calls as search; nothing is embedded or indexed.
    assert set(timings) == {"load", "embed", "index", "search", "latency", "metrics"}
    assert timings["embed"] == timings["index"] == timings["latency"] == 0.0


def test_retriever_system_through_run_suite_ranks_by_the_tie_policy(project: Path) -> None:
    run = _run(project, "kw")
    # b and c tie at 2.0: c (greater id) first.
    assert run.rankings == (("a", "c", "b", "d"), ("a", "c", "b", "d"))
    assert run.fingerprint["system"] == {"retriever": run.system.option("retriever")}
    assert len(run.latencies_ms) == 2 and all(ms >= 0.0 for ms in run.latencies_ms)


def test_fixture_system_opens_a_run_file(project: Path) -> None:
    opened = open_system(project, name="stored", cache_dir=project / "cache")
    try:
        assert opened.search("anything", 5) == []
    finally:
        opened.close()
    kw = open_system(project, name="kw", cache_dir=project / "cache")
    # The retriever returns a, b, c for k = 3; b and c tie at 2.0: c first.
    assert kw.search("x", 3) == [("a", 3.0), ("c", 2.0), ("b", 2.0)]
    assert kw.stats == {}


# -- stages --------------------------------------------------------------------------------------


class Drop(Stage):
    """Test-only stage: removes the documents named in its ``drop`` option."""

    def apply(self, qid: str, text: str, hits: Mapping[str, float]) -> Mapping[str, float]:
        gone = set(self.stage.options["drop"])
        return {doc: score for doc, score in hits.items() if doc not in gone}


class Invert(Stage):
    """Test-only stage: scores become their negation (the ranking turns around)."""

    def apply(self, qid: str, text: str, hits: Mapping[str, float]) -> Mapping[str, float]:
        return {doc: -score for doc, score in hits.items()}


@pytest.fixture
def test_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    systems.stages()  # built-ins and entry points first, so the patch below is undone cleanly
    for stage in (
        StageKind("drop", {"drop": Option(list, [], "ids to drop")}, Drop, "drops ids"),
        StageKind("invert", {}, Invert, "negates scores"),
    ):
        monkeypatch.setitem(systems._STAGES, stage.name, stage)
        register_stage(stage)


@pytest.mark.usefixtures("test_stages")
def test_stages_compose_in_order_without_run_py_knowing(project: Path) -> None:
    module = _settings(project).system("kw").option("retriever")
    extra = {
        "staged": {
            "retriever": module,
            "stages": [{"stage": "drop", "drop": ["a"]}, {"stage": "invert"}],
        }
    }
    run = _run(project, "staged", extra)
    # Without a: b 2, c 2, d 1; inverted: d -1, b -2, c -2 (tie: c before b).
    assert run.rankings[0] == ("d", "c", "b")
    assert run.scores[0] == (-1.0, -2.0, -2.0)
    stage_list = [{"stage": "drop", "drop": ["a"]}, {"stage": "invert"}]
    assert run.fingerprint["system"] == {"retriever": module, "stages": stage_list}
    assert _settings(project, extra).system("staged").identity == run.fingerprint["system"]
    assert _settings(project, extra).system("staged").stages == (
        StageConfig("drop", {"drop": ["a"]}),
        StageConfig("invert", {}),
    )


@pytest.mark.usefixtures("test_stages")
def test_stage_errors_name_the_system_and_position() -> None:
    where = "/project/pyproject.toml [system.s.stages[0]]: "
    assert config_error({"retriever": "m:f", "stages": [{"stage": "boost"}]}) == (
        where + "unknown stage 'boost'; known: drop, invert, rerank"
    )
    assert config_error({"retriever": "m:f", "stages": [{"stage": "drop", "keep": 1}]}) == (
        where + "unknown key 'keep'; known: drop, stage"
    )
    assert config_error({"retriever": "m:f", "stages": ["drop"]}) == (
        where + 'a stage must be a table naming its kind: {stage = "NAME", ...}'
    )


# -- a kind registered from outside ------------------------------------------------------------


class Constant:
    """Test-only kind: every query gets the same hits."""

    measures_latency = False

    def __init__(self, config: Any, context: OpenContext) -> None:
        self.config = config

    def retrieve(
        self, queries: Any, depth: int, *, cutoff: int | None = None, where: Path | None = None
    ) -> list[Retrieved]:
        return [Retrieved({"a": 1.0, "b": 1.0}, 0.0) for _ in queries]

    def identity(self) -> Mapping[str, Any]:
        return {"constant": self.config.option("constant")}

    @property
    def stats(self) -> Mapping[str, Any]:
        return {}

    @property
    def fingerprint_fields(self) -> Mapping[str, Any]:
        return {}

    def close(self) -> None:
        pass


def test_a_registered_kind_is_selected_by_its_key(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    systems.kinds()
    kind = SystemKind(
        name="constant",
        key="constant",
        options={"constant": Option(str, None, "a label")},
        open=Constant,
        identity=lambda options: {"constant": options["constant"]},
        summary="the same hits for every query",
    )
    monkeypatch.setitem(systems._KINDS, "constant", kind)
    register_kind(kind)
    run = _run(project, "c", {"c": {"constant": "x"}})
    assert run.rankings == (("b", "a"), ("b", "a"))
    assert run.fingerprint["system"] == {"constant": "x"}
    with pytest.raises(ValueError, match="selects by 'run', as 'run' does"):
        register_kind(
            SystemKind("other", "run", {"run": Option(str, None, "")}, Constant, dict, "")
        )


# -- run files --------------------------------------------------------------------------------


def test_trec_run_reading(tmp_path: Path) -> None:
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 d1 1 2.5 t\n\n  q1\tQ0 d2 9 -1e-3 t  \nq2 Q0 d1 1 7 t\n")
    assert read_trec_run(path) == {"q1": {"d1": 2.5, "d2": -0.001}, "q2": {"d1": 7.0}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 Q0 d1 1 2.5\n", "[line 1]: expected 6 columns 'qid Q0 docno rank score tag', got 5"),
        ("q1 Q0 d1 1 1 t\nq1 Q0 d2 2 nan t\n", "[line 2]: score 'nan' is not a finite number"),
        ("q1 Q0 d1 1 1 t\nq1 Q0 d1 2 0 t\n", "[line 2]: document 'd1' is listed twice for query"),
    ],
)
def test_malformed_trec_runs(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.trec"
    path.write_text(text)
    with pytest.raises(RunError) as info:
        read_trec_run(path)
    assert str(info.value).startswith(f"{path} {message}")


def test_json_run_reading(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"q1": {"d1": 1, "d2": 0.5}, "7": {}}))
    assert read_json_run(path) == {"q1": {"d1": 1.0, "d2": 0.5}, "7": {}}
    path.write_text(json.dumps({"q1": {"d1": "x"}}))
    with pytest.raises(
        RunError, match=r"\[query q1\]: score 'x' for 'd1' is not a number \(a JSON string\)"
    ):
        read_json_run(path)
    with pytest.raises(RunError, match=r"r.trec: run file not found"):
        read_trec_run(tmp_path / "r.trec")


# -- the one tie policy ---------------------------------------------------------------------------


def test_exact_index_orders_ties_as_rank_scored() -> None:
    from retrieval_gate.index.exact import ExactIndex

    # Six documents on three directions: scores tie in pairs for every query.
    ids = ["b", "e", "a", "f", "c", "d"]
    directions = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [0.6, 0.8]])
    index = ExactIndex()
    index.add(ids, directions)
    queries = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    for k in (1, 3, 6):
        for row, query in zip(index.search(queries, k), queries, strict=True):
            scores = {doc: float(directions[i] @ query) for i, doc in enumerate(ids)}
            assert [doc for doc, _ in row] == rank_scored(scores)[:k]


def test_a_backends_hits_are_ordered_as_rank_scored_orders() -> None:
    from retrieval_gate.index import best_first

    pairs = [("a", 0.5), ("c", 0.75), ("b", 0.5), ("d", 0.5)]
    assert best_first(list(pairs)) == [("c", 0.75), ("d", 0.5), ("b", 0.5), ("a", 0.5)]


def test_chunk_hits_tied_at_the_cut_keep_the_document_trec_eval_ranks_first() -> None:
    from retrieval_gate.systems.config import SystemConfig
    from retrieval_gate.systems.embedding import EmbeddingIndex

    class Fixed:
        def search(self, vectors: Any, k: int) -> list[list[tuple[str, float]]]:
            # Chunks best first; documents x and y tie at 0.5 through their best chunks.
            return [[("z#0", 0.9), ("x#0", 0.5), ("y#1", 0.5), ("y#0", 0.1)][:k]]

    index = EmbeddingIndex.__new__(EmbeddingIndex)
    index.index = Fixed()  # type: ignore[assignment]
    index.unit_ids = ["x#0", "y#0", "y#1", "z#0"]
    index.parent_of = {"x#0": "x", "y#0": "y", "y#1": "y", "z#0": "z"}
    index.corpus = ["x", "y", "z"]  # type: ignore[assignment]
    index.index_kind = "fixed"
    index.system = SystemConfig(name="s", kind="embedding")
    # y before x at equal score (id descending), so the cut at 2 keeps y.
    assert index.search_vector(np.zeros((1, 2), dtype=np.float32), 2) == [("z", 0.9), ("y", 0.5)]


# -- libraries failing underneath ---------------------------------------------------------------


def test_an_encoder_failing_is_its_library_s_one_line_naming_the_text() -> None:
    from retrieval_gate.embed import EmbedderSpec
    from retrieval_gate.embed.checks import EmbeddingCall, encode
    from retrieval_gate.embed.model2vec import Model2VecEmbedder
    from retrieval_gate.errors import LibraryError

    class Broken:
        dim = 4
        # Raised in model2vec's own code, as a tokenizer's id past the vocabulary would be.
        encode = raising_in("model2vec.model", IndexError("token id 70000 out of range"))

    embedder = Model2VecEmbedder(
        Broken(), EmbedderSpec("model2vec", "static"), identity="i", path=Path("static")
    )
    call = EmbeddingCall(system="static", embedder="model2vec", timeout=0, path="pyproject.toml")
    with pytest.raises(LibraryError) as info:
        encode(embedder, ["q"], queries=True, call=call, names=["q1"])
    assert str(info.value) == (
        "pyproject.toml [system.static]: model2vec failed while embedding query 'q1': "
        "IndexError: token id 70000 out of range"
    )
    assert "IndexError: token id 70000 out of range" in (info.value.traceback or "")


# -- retriever ids against the corpus -------------------------------------------------------------


def _corpus(tmp_path: Path, *ids: str) -> Any:
    from retrieval_gate.corpus import load_corpus

    for doc in ids:
        (tmp_path / "c" / doc).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "c" / doc).write_text(f"text of {doc}")
    return load_corpus(tmp_path / "c")


def test_ids_ending_with_one_corpus_id_as_a_path_are_mapped_once(tmp_path: Path) -> None:
    from retrieval_gate.systems.retriever import IdCheck

    corpus = _corpus(tmp_path, "sql/x.sql", "sql/y.sql", "b/c.sql", "c.sql")
    check = IdCheck(corpus, source="retriever app:search", where=Path("s.retrieval.yaml"))
    hits = check.map(
        [
            {"/repo/sql/x.sql": 2.0, "sql/y.sql": 1.0, "other.md": 0.5},
            # Both b/c.sql and c.sql end a/b/c.sql: ambiguous, kept as it is.
            {"/repo/sql/x.sql": 1.0, "/srv/sql/x.sql": 3.0, "a/b/c.sql": 0.1},
        ]
    )
    # Two returned ids reach sql/x.sql in the second query: it keeps the best score, 3.0.
    assert hits == [
        {"sql/x.sql": 2.0, "sql/y.sql": 1.0, "other.md": 0.5},
        {"sql/x.sql": 3.0, "a/b/c.sql": 0.1},
    ]
    assert check.notes() == (
        "mapped 2 ids by path suffix onto corpus ids, e.g. /repo/sql/x.sql -> sql/x.sql",
        "2 returned ids are not in the corpus and count as non-relevant, "
        "e.g. 'other.md', 'a/b/c.sql'",
    )


def test_ids_none_of_which_is_in_the_corpus_are_a_run_error_with_a_hint(tmp_path: Path) -> None:
    from retrieval_gate.systems.retriever import IdCheck

    corpus = _corpus(tmp_path, "a.txt", "b.txt", "c.txt", "d.txt")
    check = IdCheck(corpus, source="retriever app:search", where=Path("s.retrieval.yaml"))
    check.map([{"a": 1.0, "b": 0.5}, {"c": 1.0, "d": 0.9}])
    with pytest.raises(RunError) as info:
        check.notes()
    assert str(info.value) == (
        "s.retrieval.yaml: none of the 4 document ids retriever app:search returned is in the "
        f"corpus {tmp_path / 'c'} (4 documents), e.g. 'a', 'b', 'c', ...; the corpus has 'a.txt' "
        "for 'a': return the corpus ids, file extension included"
    )
    # Nothing returned at all is not an id mismatch.
    nothing = IdCheck(corpus, source="r", where=Path("s"))
    nothing.map([{}])
    assert nothing.notes() == ()


def test_ids_are_judged_over_every_call_of_a_run(tmp_path: Path) -> None:
    from retrieval_gate.systems.retriever import IdCheck

    # A runner asks one query per call in a small suite: a first query answered only outside
    # the corpus is a miss, and the notes count the unknown ids of every call, not the last's.
    corpus = _corpus(tmp_path, "a.txt", "b.txt")
    check = IdCheck(corpus, source="retriever app:search", where=Path("s.retrieval.yaml"))
    assert check.map([{"x" * 200: 1.0}]) == [{"x" * 200: 1.0}]
    assert check.map([{"a.txt": 1.0, "other": 0.5}]) == [{"a.txt": 1.0, "other": 0.5}]
    assert check.notes() == (
        "2 returned ids are not in the corpus and count as non-relevant, "
        f"e.g. '{'x' * (ID_WIDTH - 1)}…', 'other'",
    )
    # Only when no call of the run returned a corpus id is it an error.
    alone = IdCheck(corpus, source="retriever app:search", where=Path("s.retrieval.yaml"))
    alone.map([{"x": 1.0}])
    alone.map([{"y": 1.0}])
    with pytest.raises(RunError, match="none of the 2 document ids"):
        alone.notes()


def test_run_file_counts_every_unanswered_query_of_the_run(project: Path) -> None:
    # q1, the first query, is not in this run; the runner asks one query per call (q1 twice,
    # with the warm-up), so the count is over every call, not the last one.
    (project / "runs" / "r.trec").write_text("q2 Q0 a 1 0.5 t\n")
    run = _run(project, "stored")
    assert run.stats["run_file_missing_queries"] == 1


# -- device ---------------------------------------------------------------------------------------


def test_device_is_a_setting_passed_to_the_library_and_not_in_the_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    from retrieval_gate.embed import EmbedderSpec
    from retrieval_gate.embed.sentence_transformers import _construct

    base = {"embedder": "sentence-transformers", "model": "m"}
    plain = settings({"s": base}).system("s")
    on_gpu = settings({"s": {**base, "device": "cuda:1"}}).system("s")
    assert plain.option("device") == "cpu"
    assert on_gpu.option("device") == "cuda:1"
    # The same vectors (up to float noise) on any device: baselines compare across machines.
    assert on_gpu.identity == plain.identity
    for bad in ("gpu", "cuda:", "cuda:x", 1):
        assert config_error({**base, "device": bad}) == (
            f"/project/pyproject.toml [system.s]: invalid 'device': {bad!r}; expected string (cpu, cuda, cuda:N, mps, auto)"
        )

    seen: list[Any] = []

    class FakeLibrary:
        @staticmethod
        def SentenceTransformer(where: str, *, device: str, local_files_only: bool) -> str:
            seen.append(device)
            return where

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    _construct(
        FakeLibrary, "m", EmbedderSpec("sentence-transformers", "m", device="auto"), local_only=True
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    _construct(
        FakeLibrary, "m", EmbedderSpec("sentence-transformers", "m", device="auto"), local_only=True
    )
    _construct(
        FakeLibrary, "m", EmbedderSpec("sentence-transformers", "m", device="mps"), local_only=True
    )
    assert seen == ["cuda", "cpu", "mps"]


# -- a read-only chroma store ---------------------------------------------------------------------


class TwoWordEmbedder:
    """Test-only embedder: [1, 0] for a text that mentions "a.txt" (or is "a"), else [0, 1]."""

    identity = "test-two-words"
    dim = 2

    def _rows(self, texts: Any) -> np.ndarray:
        return np.array(
            [[1.0, 0.0] if "a.txt" in t or t == "a" else [0.0, 1.0] for t in texts],
            dtype=np.float32,
        )

    def encode_documents(self, texts: Any, *, progress: bool = False) -> np.ndarray:
        return self._rows(texts)

    def encode_queries(self, texts: Any) -> np.ndarray:
        return self._rows(texts)


def test_a_read_only_chroma_store_falls_back_to_exact_search_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import chromadb

    from retrieval_gate.embed import EmbedderSpec
    from retrieval_gate.systems.embedding import EmbeddingIndex

    def read_only(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(chromadb, "PersistentClient", read_only)
    corpus = _corpus(tmp_path, "a.txt", "b.txt")
    found = settings({"s": {"embedder": "model2vec", "model": "m"}})
    spec = EmbedderSpec(
        kind="model2vec", model="m", backend_options={"distill_from": None, "pca_dims": 256}
    )
    options = RunOptions(cache_dir=tmp_path / "cache", embedders={spec: TwoWordEmbedder()})
    index = EmbeddingIndex(found.system("s"), options, corpus)
    try:
        # Cosine against [1, 0]: a.txt 1.0, b.txt 0.0.
        assert index.search("a", 2) == [("a.txt", 1.0), ("b.txt", 0.0)]
        assert index.stats["notes"] == [
            f"chroma store at {tmp_path / 'cache' / 'chroma'} cannot be written (read-only or "
            "not permitted: [Errno 30] Read-only file system); give a writable cache folder "
            'with --rg-cache-dir, or use index = "exact"; searched with the exact index instead'
        ]
    finally:
        index.close()


def test_an_embedding_cache_that_cannot_be_written_costs_a_warning_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from retrieval_gate.embed import EmbedderSpec
    from retrieval_gate.embed.cache import EmbeddingCache
    from retrieval_gate.errors import CacheWarning
    from retrieval_gate.systems.embedding import EmbeddingIndex

    def full(self: EmbeddingCache, digests: Any, vectors: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(EmbeddingCache, "store", full)
    corpus = _corpus(tmp_path, "a.txt", "b.txt")
    found = settings({"s": {"embedder": "model2vec", "model": "m", "index": "exact"}})
    spec = EmbedderSpec(
        kind="model2vec", model="m", backend_options={"distill_from": None, "pca_dims": 256}
    )
    options = RunOptions(cache_dir=tmp_path / "cache", embedders={spec: TwoWordEmbedder()})
    with pytest.warns(CacheWarning, match=r"could not store 2 vectors \(no space left on the "):
        index = EmbeddingIndex(found.system("s"), options, corpus)
    assert index.search("a", 1) == [("a.txt", 1.0)]


def test_a_disk_that_fills_as_the_cache_folder_is_made_costs_a_warning_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every file the cache writes (its identity, its width, its shards) meets a full disk,
    # from the documents' folder to the queries' one made after it.
    import errno

    from retrieval_gate.embed import EmbedderSpec
    from retrieval_gate.embed.cache import EmbeddingCache
    from retrieval_gate.errors import CacheWarning
    from retrieval_gate.systems.embedding import EmbeddingIndex

    def full(self: EmbeddingCache, target: Path, payload: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    monkeypatch.setattr(EmbeddingCache, "_atomic_write", full)
    corpus = _corpus(tmp_path, "a.txt", "b.txt")
    found = settings({"s": {"embedder": "model2vec", "model": "m", "index": "exact"}})
    spec = EmbedderSpec(
        kind="model2vec", model="m", backend_options={"distill_from": None, "pca_dims": 256}
    )
    options = RunOptions(cache_dir=tmp_path / "cache", embedders={spec: TwoWordEmbedder()})
    with pytest.warns(CacheWarning, match=r"cannot be written \(No space left on device\)"):
        index = EmbeddingIndex(found.system("s"), options, corpus)
    assert index.search("a", 1) == [("a.txt", 1.0)]


def test_an_embedding_query_that_never_returns_is_one_line_after_its_timeout(
    tmp_path: Path,
) -> None:
    import threading

    from retrieval_gate.embed import EmbedderSpec
    from retrieval_gate.systems import open_configured

    release = threading.Event()

    class Stuck(TwoWordEmbedder):
        def encode_queries(self, texts: Any) -> np.ndarray:
            release.wait(60)  # a server that stopped answering
            return self._rows(texts)

    corpus = _corpus(tmp_path, "a.txt", "b.txt")
    found = settings(
        {"s": {"embedder": "model2vec", "model": "m", "index": "exact", "timeout": 0.2}}
    )
    spec = EmbedderSpec(
        kind="model2vec", model="m", backend_options={"distill_from": None, "pca_dims": 256}
    )
    options = RunOptions(cache_dir=tmp_path / "cache", embedders={spec: Stuck()})
    opened = open_configured(found.system("s"), found.context(options, corpus=corpus))
    try:
        with pytest.raises(RunError) as info:
            opened.retrieve([("q7", "a")], 2, where=Path("s.retrieval.yaml"))
    finally:
        release.set()
        opened.close()
    assert str(info.value) == (
        "s.retrieval.yaml [query q7]: system s did not return within 0.2 s for query q7 "
        "(its 'timeout' setting)"
    )

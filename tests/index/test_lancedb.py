"""The LanceDB index against a real LanceDB folder (the Rust engine, embedded)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.errors import ConfigError
from retrieval_gate.index import INDEXES, index_recall, make_index
from retrieval_gate.index.exact import ExactIndex

from .test_index import EXPECTED_FULL, IDS, QUERIES, VECTORS, _check, _random

lancedb = pytest.importorskip("lancedb", reason="lancedb is needed (pip install '.[lancedb]')")
import pyarrow as pa  # noqa: E402

from retrieval_gate.index.lancedb import BUILD_PREFIX, read_build, table_name  # noqa: E402


def defaults(**given: Any) -> dict[str, Any]:
    return {name: o.default for name, o in INDEXES["lancedb"].options.items()} | given


def test_exact_search_orders_by_cosine_with_the_trec_eval_tie_order(tmp_path: Path) -> None:
    index = make_index("lancedb", cache_dir=tmp_path, key="k")
    index.add(IDS, VECTORS)
    assert len(index) == 5
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-6)
    # c and d tie for third on q1: d (id descending) makes the cut, as exact search keeps it.
    _check(index.search(QUERIES, k=3), [row[:3] for row in EXPECTED_FULL], 1e-6)


def test_the_table_lives_in_the_cache_folder_and_a_warm_add_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = make_index("lancedb", cache_dir=tmp_path, key="k")
    index.add(IDS, VECTORS)
    name = table_name("k", defaults())
    assert name.startswith("rg-") and len(name) == 35
    assert (tmp_path / "lancedb" / f"{name}.lance").is_dir()
    build = (tmp_path / "lancedb" / f"{BUILD_PREFIX}{name}").read_text().strip()
    version = lancedb.connect(tmp_path / "lancedb").open_table(name).version

    again = make_index("lancedb", cache_dir=tmp_path, key="k")
    again.add(list(reversed(IDS)), VECTORS[::-1].copy())
    assert lancedb.connect(tmp_path / "lancedb").open_table(name).version == version
    _check(again.search(QUERIES, k=5), EXPECTED_FULL, 1e-6)
    # The build id is read from the folder without lancedb (a warm run answered from the
    # result cache imports none).
    monkeypatch.setitem(sys.modules, "lancedb", None)
    assert read_build(tmp_path, "k", defaults()) == build
    assert read_build(tmp_path, "other", defaults()) is None


def test_a_table_the_gate_did_not_write_is_refused_and_kept(tmp_path: Path) -> None:
    name = table_name("k", defaults())
    db = lancedb.connect(tmp_path / "lancedb")
    db.create_table(name, pa.table({"id": ["x"], "note": ["the team's row"]}))
    index = make_index("lancedb", cache_dir=tmp_path, key="k")
    with pytest.raises(ConfigError) as info:
        index.add(IDS, VECTORS)
    assert str(info.value) == (
        f"LanceDB table {name!r} at {tmp_path / 'lancedb'} exists and was not written by the "
        "gate; it is left alone (drop it, or read it with 'table')"
    )
    assert db.open_table(name).to_arrow().to_pylist() == [{"id": "x", "note": "the team's row"}]


def test_ann_indexes_are_built_and_measured_against_exact(tmp_path: Path) -> None:
    vectors = _random(600, 16, seed=3)
    ids = [f"doc{i:03d}" for i in range(600)]
    queries = _random(30, 16, seed=4)
    exact = ExactIndex()
    exact.add(ids, vectors)
    truth = [[d for d, _ in row] for row in exact.search(queries, 10)]
    # Every partition probed: IVF_FLAT is then exhaustive and finds the exact top 10.
    ivf = make_index(
        "lancedb", cache_dir=tmp_path, key="k", ann_index="ivf_flat", num_partitions=4, nprobes=4
    )
    ivf.add(ids, vectors)
    found = [[d for d, _ in row] for row in ivf.search(queries, 10)]
    assert index_recall(found, truth, 10) == 1.0
    hnsw = make_index("lancedb", cache_dir=tmp_path, key="k", ann_index="ivf_hnsw_sq")
    hnsw.add(ids, vectors)
    found = [[d for d, _ in row] for row in hnsw.search(queries, 10)]
    assert 0.5 <= index_recall(found, truth, 10) <= 1.0
    kinds = {
        name: [
            i.index_type
            for i in lancedb.connect(tmp_path / "lancedb").open_table(name).list_indices()
        ]
        for name in (
            table_name("k", defaults(ann_index="ivf_flat", num_partitions=4, nprobes=4)),
            table_name("k", defaults(ann_index="ivf_hnsw_sq")),
        )
    }
    assert sorted(kinds.values()) == [["IvfFlat"], ["IvfHnswSq"]]
    assert INDEXES["lancedb"].approximate_for(defaults(ann_index="ivf_pq")) is True
    assert INDEXES["lancedb"].approximate_for(defaults()) is False


def test_a_scratch_build_never_goes_to_the_given_uri(tmp_path: Path) -> None:
    team = tmp_path / "team-storage"
    scratch = tmp_path / "scratch"
    index = make_index(
        "lancedb", cache_dir=scratch, key="k", uri=str(team), ann_index="ivf_flat", scratch=True
    )
    index.add(IDS, VECTORS)
    assert not team.exists()
    assert list((scratch / "lancedb").glob("rg-*.lance"))


# -- a team's table ------------------------------------------------------------------------


@pytest.fixture
def team_uri(tmp_path: Path) -> str:
    uri = tmp_path / "team"
    rows = pa.FixedSizeListArray.from_arrays(pa.array(VECTORS.ravel()), 3)
    lancedb.connect(uri).create_table(
        "docs", pa.table({"doc_id": IDS, "emb": rows, "title": ["t"] * 5})
    )
    return str(uri)


def test_a_teams_table_is_searched_and_never_written(team_uri: str, tmp_path: Path) -> None:
    options: dict[str, Any] = {
        "uri": team_uri,
        "table": "docs",
        "id_column": "doc_id",
        "vector_column": "emb",
    }
    table = lancedb.connect(team_uri).open_table("docs")
    version = table.version
    index = make_index("lancedb", cache_dir=tmp_path, key="k", **options)
    index.add([*IDS, "new"], np.vstack([VECTORS, VECTORS[:1]]))
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-6)
    assert lancedb.connect(team_uri).open_table("docs").version == version
    assert read_build(tmp_path, "k", defaults(**options)) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"table": "nope"}, "does not exist"),
        (
            {"table": "docs", "id_column": "name"},
            "has no column 'name' (its columns: doc_id, emb, title)",
        ),
        (
            {"table": "docs", "id_column": "doc_id", "vector_column": "title"},
            "has a column 'title' of string, not a fixed-size vector column",
        ),
    ],
    ids=["missing table", "missing column", "not a vector"],
)
def test_a_teams_table_that_does_not_fit_is_one_line(
    team_uri: str, tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        make_index(
            "lancedb", cache_dir=tmp_path, key="k", uri=team_uri, entry="system.l", **options
        )
    name = options["table"]
    assert str(info.value) == f"[system.l]: LanceDB table {name!r} at {team_uri} {message}"


def test_a_wrong_dimension_is_one_line(team_uri: str, tmp_path: Path) -> None:
    index = make_index(
        "lancedb",
        cache_dir=tmp_path,
        key="k",
        uri=team_uri,
        table="docs",
        id_column="doc_id",
        vector_column="emb",
    )
    with pytest.raises(ConfigError) as info:
        index.search(np.ones((1, 4), dtype=np.float32), k=3)
    assert str(info.value) == (
        f"LanceDB table 'docs' at {team_uri} holds 3-dimensional vectors in 'emb'; the model "
        "gives 4-dimensional ones"
    )


def test_the_hosted_service_without_an_api_key_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RG_NO_LANCE_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        make_index(
            "lancedb",
            cache_dir=tmp_path,
            key="k",
            uri="db://team-db",
            entry="system.l",
            api_key_env="RG_NO_LANCE_KEY",
        )
    assert str(info.value) == (
        "[system.l]: LanceDB at db://team-db needs an API key: set 'api_key_env' to the name of "
        "the environment variable holding it (RG_NO_LANCE_KEY is not set)"
    )


# -- a killed run --------------------------------------------------------------------------

KILLED = """
import os, signal, sys
import numpy as np
import retrieval_gate.index.lancedb as engine
from retrieval_gate.index import make_index

def dying(self, rows):
    os.kill(os.getpid(), signal.SIGKILL)  # the table is written, its index not yet built

engine.LanceDBIndex._index_config = dying
rng = np.random.default_rng(7)
index = make_index(
    "lancedb", cache_dir=sys.argv[1], key="k", ann_index="ivf_flat", num_partitions=2, nprobes=2
)
index.add([f"d{i}" for i in range(300)], rng.normal(size=(300, 8)).astype(np.float32))
"""


def test_a_run_killed_before_its_index_is_built_leaves_a_usable_table(tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED))
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], check=False)
    assert done.returncode == -9
    # Both partitions probed: the index search is exhaustive, so it must equal exact search.
    settings: dict[str, Any] = {"ann_index": "ivf_flat", "num_partitions": 2, "nprobes": 2}
    name = table_name("k", defaults(**settings))
    table = lancedb.connect(tmp_path / "lancedb").open_table(name)
    assert (table.count_rows(), table.list_indices()) == (300, [])
    # No build id was written for the half-done build: nothing can be cached against it.
    assert read_build(tmp_path, "k", defaults(**settings)) is None

    vectors = np.random.default_rng(7).normal(size=(300, 8)).astype(np.float32)
    ids = [f"d{i}" for i in range(300)]
    index = make_index("lancedb", cache_dir=tmp_path, key="k", **settings)
    index.add(ids, vectors)
    table = lancedb.connect(tmp_path / "lancedb").open_table(name)
    assert [i.index_type for i in table.list_indices()] == ["IvfFlat"]
    assert read_build(tmp_path, "k", defaults(**settings)) is not None
    exact = ExactIndex()
    exact.add(ids, vectors)
    queries = vectors[:5] + 0.01
    assert [[d for d, _ in r] for r in index.search(queries, 10)] == [
        [d for d, _ in r] for r in exact.search(queries, 10)
    ]


# -- a team's table that cannot be measured as it is ----------------------------------------


def _team(tmp_path: Path, ids: list[str], rows: list[list[float] | None], **options: Any) -> Any:
    uri = tmp_path / "odd"
    vectors = pa.array(rows, type=pa.list_(pa.float32(), 3))
    table = lancedb.connect(uri).create_table(
        "docs", pa.table({"doc_id": pa.array(ids, pa.string()), "emb": vectors})
    )
    if options.pop("indexed", False):
        table.create_index("emb", config=lancedb.index.IvfFlat(num_partitions=1))
    return make_index(
        "lancedb",
        cache_dir=tmp_path,
        key="k",
        uri=str(uri),
        table="docs",
        id_column="doc_id",
        vector_column="emb",
        entry="system.team",
        **options,
    )


def test_a_row_with_a_null_vector_is_counted_not_skipped_silently(tmp_path: Path) -> None:
    index = _team(tmp_path, ["a", "b", "c"], [[1, 0, 0], None, [0, 1, 0]])
    # b has no vector: LanceDB never returns it (cos(q, a) = 1, cos(q, c) = 0)...
    _check(index.search(np.array([[1, 0, 0]], dtype=np.float32), 3), [[("a", 1), ("c", 0)]], 1e-6)
    # ... and opening the table says so.
    assert index.check_table(["a", "b", "c"]) == [
        f"LanceDB table 'docs' at {tmp_path / 'odd'}: 1 of 3 rows has a NULL 'emb' and is "
        "never found by a search"
    ]


@pytest.mark.parametrize(
    ("ids", "corpus", "options", "message"),
    [
        ([], ["a"], {}, " is empty: there is no document to search"),
        (
            ["x2", "x1"],
            ["a", "b"],
            {},
            ": none of the 2 ids in column 'doc_id' is a corpus document id (e.g. 'x1'; the "
            "corpus has e.g. 'a'); 'id_column' must hold the corpus' ids",
        ),
        (
            ["a", "b"],
            ["a", "b"],
            {"ann_index": "ivf_pq"},
            " has no ivf_pq index on 'emb' (LanceDB would search it by a flat scan), so a "
            "search would scan every row and its recall would not be an index's; create the "
            'index, or set ann_index = "none" for exact search',
        ),
    ],
    ids=["empty", "no id matches", "no ann index"],
)
def test_a_team_table_that_cannot_be_measured_is_one_line(
    tmp_path: Path, ids: list[str], corpus: list[str], options: dict[str, Any], message: str
) -> None:
    # Before: every metric was 0 with no reason, or a flat scan's recall was reported as the
    # (absent) index's.
    index = _team(tmp_path, ids, [[1.0, 0, 0]] * len(ids), **options)
    with pytest.raises(ConfigError) as info:
        index.check_table(corpus)
    assert str(info.value) == f"[system.team]: LanceDB table 'docs' at {tmp_path / 'odd'}{message}"


def test_an_id_on_two_rows_is_refused_when_the_table_is_opened_not_when_a_search_meets_it(
    tmp_path: Path,
) -> None:
    # a's second row points away from its first: no search for one hit meets both (the flat
    # scan fetches 2: for q = [1, 0, 0] the rows score 1, 0.8, 0 and -1), so a check of each
    # search's hits let the table pass, a ranked by whichever of its rows the engine returned.
    index = _team(tmp_path, ["a", "b", "c", "a"], [[1, 0, 0], [0.8, 0.6, 0], [0, 1, 0], [-1, 0, 0]])
    assert [d for d, _ in index.search(np.array([[1, 0, 0]], dtype=np.float32), 1)[0]] == ["a"]
    with pytest.raises(ConfigError) as info:
        index.check_table(["a", "b", "c"])
    assert str(info.value) == (
        f"[system.team]: LanceDB table 'docs' at {tmp_path / 'odd'}: 1 of 4 rows repeats an id "
        "of another row in column 'doc_id' (e.g. 'a'); the gate ranks one vector per document: "
        "keep one row per id (chunked tables are not supported)"
    )


def test_a_vector_with_nan_or_infinity_is_refused_not_left_out_of_every_result(
    tmp_path: Path,
) -> None:
    nan, inf = float("nan"), float("inf")
    # The NaN 0 / 0 gives on x86 has its sign bit set: LanceDB sorts it below every number.
    with np.errstate(invalid="ignore"):
        negative_nan = float(np.float32(0) / np.float32(0))
    ids = ["a", "b", "c", "d", "e"]
    index = _team(
        tmp_path, ids, [[1, 0, 0], [nan, 1, 0], [0, 1, 0], [1, -inf, 0], [0, negative_nan, 1]]
    )
    # Before: LanceDB left b, d and e out of every result, with no word said (cos(q, a) = 1,
    # cos(q, c) = 0).
    _check(index.search(np.array([[1, 0, 0]], dtype=np.float32), 5), [[("a", 1), ("c", 0)]], 1e-6)
    with pytest.raises(ConfigError) as info:
        index.check_table(ids)
    assert str(info.value) == (
        f"[system.team]: LanceDB table 'docs' at {tmp_path / 'odd'} holds NaN or infinite "
        "values in 3 of 5 vectors in 'emb' (e.g. document 'b'), which no search can score; "
        "embed those documents again, or name a view without them in 'table'"
    )


def test_a_team_table_with_its_index_passes_the_check(tmp_path: Path) -> None:
    ids = [f"d{i}" for i in range(300)]
    rows = _random(300, 3, seed=1).tolist()
    index = _team(tmp_path, ids, rows, ann_index="ivf_flat", indexed=True)
    assert index.check_table(ids) == []


def test_sub_vectors_that_do_not_divide_the_dimension_are_one_line(tmp_path: Path) -> None:
    index = make_index(
        "lancedb",
        cache_dir=tmp_path,
        key="k",
        ann_index="ivf_pq",
        num_sub_vectors=5,
        entry="system.pq",
    )
    with pytest.raises(ConfigError) as info:
        index.add([f"d{i}" for i in range(300)], _random(300, 8, seed=2))
    assert str(info.value) == (
        "[system.pq]: 'num_sub_vectors' (5) does not divide the vectors' dimension (8): ivf_pq "
        "cuts each vector into that many equal sub-vectors; give a divisor of 8"
    )
    # Nothing written: the table is made only once its index can be.
    assert not list((tmp_path / "lancedb").glob("rg-*.lance"))


# -- reproducible builds ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ivf_flat", "ivf_pq"])
def test_two_fresh_builds_of_the_same_vectors_rank_the_same(tmp_path: Path, kind: str) -> None:
    pytest.importorskip("lance", reason="pylance trains the gate's LanceDB index")
    rng = np.random.default_rng(5)
    centers = rng.normal(size=(20, 16))
    vectors = (centers[rng.integers(0, 20, 600)] + 0.7 * rng.normal(size=(600, 16))).astype(
        np.float32
    )
    ids = [f"doc{i:03d}" for i in range(600)]
    queries = vectors[:40] + 0.05
    found = []
    for build, order in enumerate([np.arange(600), rng.permutation(600)]):
        # A folder of its own each time: built from nothing, the rows given in another order.
        index = make_index(
            "lancedb",
            cache_dir=tmp_path / str(build),
            key="k",
            ann_index=kind,
            num_partitions=16,
            nprobes=1,
        )
        index.add([ids[i] for i in order], vectors[order])
        found.append(index.search(queries, 10))
    assert found[0] == found[1]
    exact = ExactIndex()
    exact.add(ids, vectors)
    truth = [[d for d, _ in row] for row in exact.search(queries, 10)]
    # One partition of 16 probed: approximate, so which build is searched matters.
    assert index_recall([[d for d, _ in row] for row in found[0]], truth, 10) < 1.0


def test_each_request_to_the_hosted_service_is_bounded_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LanceDB's read_timeout is per read, and it sets no overall timeout by default: each
    # request is given one (and one retry), so a service dripping its answer ends.
    from retrieval_gate.index import lancedb as backend

    asked: dict[str, Any] = {}
    monkeypatch.setattr(lancedb, "connect", lambda uri, **kwargs: asked.update(kwargs))
    monkeypatch.setenv("RG_LANCE_KEY", "lance-key-for-the-test")
    backend.connect("db://project", {"api_key_env": "RG_LANCE_KEY", "connect_timeout": 5})
    assert asked["client_config"] == {
        "timeout_config": {"connect_timeout": 5, "read_timeout": 30, "timeout": 30},
        "retry_config": {"retries": 1},
    }

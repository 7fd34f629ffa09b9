"""Does a fresh build of an ANN index rank the same? Each engine's index is built from nothing
several times from the same vectors, and each build's top 10 is compared with the first's.

    python benchmarks/bench_rebuilds.py --docs 2000 --queries 100 --builds 4

The documents are seeded clustered unit vectors (``--dim`` 48, 40 clusters: the structure
k-means partitions), the queries documents moved a little. Every build is the gate's own table
from nothing, through the index classes the gate uses, under the same key: for pgvector the
table is dropped first (each build runs in a new connection, so a new server process), for
LanceDB the folder is new. The settings are deliberately coarse (few links, one list or
partition probed), so that two different builds are certain to rank differently. Printed per
engine: recall@10 against exact search for each build, and for each later build the number of
queries whose top 10 differs from the first build's. PostgreSQL is pgserver's unless ``--dsn``
names one. Nothing is asserted: figures go to docs/embedding.md ("Reproducible ANN builds")
with this command.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.index import index_recall, make_index
from retrieval_gate.index.exact import ExactIndex

ENGINES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "pgvector hnsw",
        "pgvector",
        {
            "ann_index": "hnsw",
            "hnsw_max_neighbors": 4,
            "hnsw_ef_construction": 8,
            "hnsw_ef_search": 10,
        },
    ),
    ("pgvector ivfflat", "pgvector", {"ann_index": "ivfflat", "ivfflat_lists": 32}),
    ("lancedb ivf_flat", "lancedb", {"ann_index": "ivf_flat", "num_partitions": 32, "nprobes": 1}),
    ("lancedb ivf_pq", "lancedb", {"ann_index": "ivf_pq", "num_partitions": 32, "nprobes": 1}),
    (
        "lancedb ivf_hnsw_sq",
        "lancedb",
        {
            "ann_index": "ivf_hnsw_sq",
            "num_partitions": 8,
            "nprobes": 1,
            "hnsw_max_neighbors": 4,
            "hnsw_ef_construction": 8,
        },
    ),
]


def clustered(docs: int, queries: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(40, dim))
    x = centers[rng.integers(0, 40, docs)] + 0.7 * rng.normal(size=(docs, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[rng.choice(docs, queries, replace=False)] + 0.05 * rng.normal(size=(queries, dim))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return x.astype(np.float32), q.astype(np.float32)


def drop_table(dsn: str, name: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dim", type=int, default=48)
    parser.add_argument("--builds", type=int, default=4)
    parser.add_argument("--dsn", help="a PostgreSQL with pgvector (default: start pgserver)")
    parser.add_argument(
        "--engines", nargs="+", default=None, help="only the engines whose label starts so"
    )
    args = parser.parse_args()
    docs, queries = clustered(args.docs, args.queries, args.dim)
    ids = [f"doc{i:06d}" for i in range(args.docs)]
    exact = ExactIndex()
    exact.add(ids, docs)
    truth = [[d for d, _ in row] for row in exact.search(queries, 10)]
    scratch = Path(tempfile.mkdtemp(prefix="rg-rebuilds-"))
    server = None
    dsn = args.dsn
    if dsn is None:
        import pgserver

        server = pgserver.get_server(scratch / "pg", cleanup_mode="stop")
        dsn = server.get_uri()
    print(f"{args.docs} documents, {args.queries} queries, dim {args.dim}; {platform.platform()}")
    try:
        for label, kind, settings in ENGINES:
            if args.engines and not label.startswith(tuple(args.engines)):
                continue
            options = dict(settings)
            if kind == "pgvector":
                options["dsn"] = dsn
            first: list[list[str]] | None = None
            recalls: list[float] = []
            differing: list[int] = []
            seconds: list[float] = []
            for build in range(args.builds):
                folder = scratch / f"{kind}-{build}"
                index = make_index(kind, cache_dir=folder, key="rebuilds", **options)
                if kind == "pgvector":
                    drop_table(dsn, index.table.name)  # type: ignore[attr-defined]
                began = time.perf_counter()
                index.add(ids, docs)
                seconds.append(time.perf_counter() - began)
                found = [[d for d, _ in row] for row in index.search(queries, 10)]
                getattr(index, "close", lambda: None)()
                recalls.append(index_recall(found, truth, 10))
                if first is None:
                    first = found
                else:
                    differing.append(sum(a != b for a, b in zip(first, found, strict=True)))
            print(
                f"{label:22} recall@10 per build {', '.join(f'{r:.4f}' for r in recalls)}; "
                f"queries whose top 10 differs from build 1: {differing} of {args.queries}; "
                f"build seconds (wall) {', '.join(f'{s:.1f}' for s in seconds)}"
            )
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

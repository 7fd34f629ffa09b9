"""Build and query times of the production engines against the exact index, in one process.

    python benchmarks/bench_engines.py --docs 100000 --queries 1000 --repeats 3

Random unit vectors (seeded, 384 dimensions: MiniLM's width) are the documents; the queries
are other random unit vectors. Per repeat, each engine builds its index from the vectors (the
gate's own table, named from a fresh key: for pgvector the binary COPY and, with an ANN index,
its build, in one transaction; for LanceDB the one-commit table write and its index) and
answers every query at top 10 in batches, through the index classes the gate uses. The engines
run in an order that rotates between repeats; each ratio is taken against the exact index's
time in the same repeat, and the medians over repeats are printed with each engine's recall@10
against the exact index (which must be 1.0 for the exact scans).

PostgreSQL is pgserver's (PostgreSQL 16 with pgvector, started here on a unix socket) unless
``--dsn`` names one. LanceDB writes to a temporary folder. Nothing is asserted: figures go to
docs/performance.md with this command.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.index import index_recall, make_index

Engine = tuple[str, str, dict[str, Any]]

ENGINES: list[Engine] = [
    ("exact", "exact", {}),
    ("pgvector", "pgvector", {}),
    ("pgvector hnsw", "pgvector", {"ann_index": "hnsw"}),
    ("pgvector hnsw 1GB", "pgvector", {"ann_index": "hnsw", "build_memory": "1GB"}),
    ("pgvector ivfflat", "pgvector", {"ann_index": "ivfflat", "ivfflat_probes": 10}),
    ("lancedb", "lancedb", {}),
    ("lancedb ivf_pq", "lancedb", {"ann_index": "ivf_pq", "nprobes": 20, "refine_factor": 5}),
    ("lancedb ivf_hnsw_sq", "lancedb", {"ann_index": "ivf_hnsw_sq"}),
]


def unit(rows: int, dim: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def drop_gate_tables(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT relname FROM pg_class WHERE relname LIKE 'rg\\_%' AND relkind = 'r'")
        for (name,) in cur.fetchall():
            cur.execute(f'DROP TABLE IF EXISTS "{name}"')


def run_engine(
    engine: Engine, ids: list[str], docs: np.ndarray, queries: np.ndarray, folder: Path, dsn: str
) -> tuple[float, float, list[list[str]]]:
    _, kind, settings = engine
    options = dict(settings)
    if kind == "pgvector":
        options |= {"dsn": dsn, "statement_timeout": 3600}
    began = time.perf_counter()
    index = make_index(kind, cache_dir=folder, key=uuid.uuid4().hex, **options)
    index.add(ids, docs)
    built = time.perf_counter() - began
    began = time.perf_counter()
    found = index.search(queries, 10)
    searched = time.perf_counter() - began
    close: Callable[[], None] | None = getattr(index, "close", None)
    if close is not None:
        close()
    return built, searched, [[doc for doc, _ in row] for row in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--dsn", default=None, help="a PostgreSQL with pgvector (default: pgserver)"
    )
    parser.add_argument("--only", nargs="*", default=None, help="engine labels to run")
    args = parser.parse_args()

    engines = [e for e in ENGINES if args.only is None or e[0] in args.only or e[0] == "exact"]
    work = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    server = None
    dsn = args.dsn
    if dsn is None and any(kind == "pgvector" for _, kind, _ in engines):
        import pgserver

        server = pgserver.get_server(work / "pg", cleanup_mode="stop")
        dsn = server.get_uri()
    ids = [f"doc{i:07d}" for i in range(args.docs)]
    docs = unit(args.docs, args.dim, seed=1)
    queries = unit(args.queries, args.dim, seed=2)
    rows: dict[str, list[tuple[float, float, float, float, float]]] = {e[0]: [] for e in engines}
    try:
        for repeat in range(args.repeats):
            order = engines[repeat % len(engines) :] + engines[: repeat % len(engines)]
            timings: dict[str, tuple[float, float, list[list[str]]]] = {}
            for engine in order:
                folder = work / f"r{repeat}"
                timings[engine[0]] = run_engine(engine, ids, docs, queries, folder, dsn or "")
                built, searched, _ = timings[engine[0]]
                print(
                    f"repeat {repeat + 1} {engine[0]:<20} build {built:8.2f} s  "
                    f"queries {searched:8.2f} s",
                    flush=True,
                )
            exact_build, exact_query, truth = timings["exact"]
            for label, (built, searched, found) in timings.items():
                recall = index_recall(found, truth, 10)
                rows[label].append(
                    (built, searched, built / exact_build, searched / exact_query, recall)
                )
            if dsn:
                drop_gate_tables(dsn)
            shutil.rmtree(work / f"r{repeat}", ignore_errors=True)
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(
        f"{args.docs:,} documents x {args.dim} dims, {args.queries:,} queries at top 10, "
        f"medians of {args.repeats} repeats; Python {platform.python_version()}, "
        f"{platform.machine()}"
    )
    print()
    print(
        "| engine | build s | build / exact | queries s | ms a query | queries / exact | recall@10 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, _, _ in engines:
        data = rows[label]
        build = statistics.median(r[0] for r in data)
        query = statistics.median(r[1] for r in data)
        print(
            f"| {label} | {build:.2f} | {statistics.median(r[2] for r in data):.1f}x | "
            f"{query:.2f} | {1000 * query / args.queries:.2f} | "
            f"{statistics.median(r[3] for r in data):.1f}x | "
            f"{statistics.median(r[4] for r in data):.4f} |"
        )


if __name__ == "__main__":
    main()

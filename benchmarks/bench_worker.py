"""A thread per bounded call (``call_bounded``, before) against one reused worker thread per
system (``usercode.Worker``, now), for the calls a run makes once per query.

Three workloads, each call under a time limit as a run makes it:

- ``no-op``: the hand-over alone;
- ``exact search``: one query against 10,000 384-wide unit vectors (numpy), a small exact index;
- ``cold query``: one text embedded by a static (model2vec-style) model through the embedding
  boundary (``embed/checks.encode``), as an embedding system embeds each query the cache lacks.

Rounds alternate between the two ways (before, now, before, now, ...) so that load on a shared
machine falls on both alike; each round times ``CALLS`` calls, and the medians of the rounds'
per-call times are compared as a ratio (before / now).

    python benchmarks/bench_worker.py [--rounds 15] [--calls 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from retrieval_gate.embed.checks import EmbeddingCall, encode
from retrieval_gate.usercode import Worker, call_bounded

LIMIT_S = 60.0


class StaticModel:
    """A static embedder: the mean of its words' vectors (as model2vec computes one)."""

    identity = "bench-static/1"
    dim = 256

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.table = rng.standard_normal((30_000, self.dim)).astype(np.float32)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        rows = [self.table[[hash(w) % len(self.table) for w in t.split()]].mean(0) for t in texts]
        return np.stack(rows)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        return self._encode(texts)


def _workloads() -> dict[str, Callable[[Callable[[Callable[[], Any]], Any]], None]]:
    """Each workload as ``run(bounded)``: one call of it, through ``bounded``."""
    rng = np.random.default_rng(1)
    docs = rng.standard_normal((10_000, 384)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    query = docs[0] + 0.1

    def search() -> Any:
        return np.argpartition(-(docs @ query), 10)[:10]

    model = StaticModel()
    text = "which tables join orders to customers"

    def noop(bounded: Callable[[Callable[[], Any]], Any]) -> None:
        bounded(lambda: None)

    def exact(bounded: Callable[[Callable[[], Any]], Any]) -> None:
        bounded(search)

    def cold(bounded: Callable[[Callable[[], Any]], Any]) -> None:
        bounded(lambda: model.encode_queries([text]))

    return {"no-op": noop, "exact search": exact, "cold query": cold}


def _cold_query_paths() -> tuple[Callable[[], None], Callable[[], None]]:
    """The cold-query workload through the embedding boundary itself, before and now: the
    same EmbeddingCall with no worker (a thread per call) and with one."""
    model = StaticModel()
    before = EmbeddingCall(system="s", embedder="static", timeout=LIMIT_S)
    now = EmbeddingCall(system="s", embedder="static", timeout=LIMIT_S, worker=Worker())

    def run(call: EmbeddingCall) -> Callable[[], None]:
        def one() -> None:
            encode(model, ["which tables join orders"], queries=True, call=call)

        return one

    return run(before), run(now)


def _through(
    workload: Callable[[Callable[[Callable[[], Any]], Any]], None],
    bounded: Callable[[Callable[[], Any]], Any],
) -> Callable[[], None]:
    return lambda: workload(bounded)


def _time(run: Callable[[], None], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls * 1e6  # microseconds per call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    worker = Worker()
    ways: dict[str, Callable[[Callable[[], Any]], Any]] = {
        "before": lambda f: call_bounded(f, LIMIT_S),
        "now": lambda f: worker.call(f, LIMIT_S),
    }
    cases: dict[str, dict[str, Callable[[], None]]] = {}
    for name, workload in _workloads().items():
        cases[name] = {way: _through(workload, bounded) for way, bounded in ways.items()}
    before, now = _cold_query_paths()
    cases["cold query via encode()"] = {"before": before, "now": now}

    print(f"{args.rounds} alternated rounds of {args.calls} calls; medians of per-call time")
    print(f"{'workload':<26} {'before (us)':>12} {'now (us)':>10} {'ratio':>7}")
    for name, pair in cases.items():
        for run in pair.values():
            _time(run, 20)  # warm up: imports, the worker's thread, caches
        times: dict[str, list[float]] = {"before": [], "now": []}
        for round_ in range(args.rounds):
            order = ("before", "now") if round_ % 2 == 0 else ("now", "before")
            for way in order:
                times[way].append(_time(pair[way], args.calls))
        b, n = statistics.median(times["before"]), statistics.median(times["now"])
        print(f"{name:<26} {b:>12.1f} {n:>10.1f} {b / n:>6.2f}x")
    worker.close()


if __name__ == "__main__":
    main()

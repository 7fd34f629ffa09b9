"""Embedding on a Ray cluster (``embed_executor = "ray"``): the documents the cache lacks are
encoded by Ray actors, one per GPU of the cluster (else one per CPU), each holding the model,
and land in the same content-addressed cache as local vectors do.

Only the misses travel: the caller (the embedding system, ``embed_texts``) looks the texts up in
the cache first and hands this embedder the rest. Queries are embedded locally, as the timed
latency must be this machine's. The vectors are the local path's: each actor loads the model
from the same :class:`~retrieval_gate.embed.EmbedderSpec` (so the same identity) and encodes
the very batches one local ``encode`` call would form (sentence-transformers sorts by length and
cuts ``batch_size`` texts; a vector depends on the batch it was padded in); on the same kind of
device they are bitwise equal (tested on a local cluster; the ONNX backends batch by token
count, so theirs agree within float noise), which is why the identity, and so
the cache and the baselines, do not name the executor. On a cluster with GPUs the actors run
the model there (``device = "cuda"``): equal to the CPU's within float noise, as the ``device``
setting is.

``ray_address`` unset starts a local cluster for the session (``ray.init()``; its resources are
this machine's); an address (``auto``, ``host:6379``, ``ray://host:10001``) joins a running one,
whose workers need this package and the model importable (a Ray ``runtime_env`` or the image).
A session that already called ``ray.init`` (a conftest, a notebook) keeps its cluster. Ray is
imported only when the first miss is embedded: a warm run never starts it.

Nothing waits on the cluster without an end: joining it may take the system's ``timeout``, and
the actors ``timeout`` per batch each runs plus one for their start (docs/embedding.md). Ray's
errors are one line each, its colour codes stripped and an actor's creation error kept whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.embed import Embedder, EmbedderSpec, LazyEmbedder, import_optional
from retrieval_gate.errors import ConfigError, RunError
from retrieval_gate.records import counted
from retrieval_gate.usercode import CallTimeout, call_bounded

__all__ = ["RayEmbedder", "ray_embedder"]


_COLOUR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _error_line(exc: BaseException) -> str:
    """A Ray error in one line, colour codes stripped: its first line (which task or actor,
    less the pid and ip) and, where a traceback follows, the error that ended it (an actor's
    creation error, e.g. the model not found on the worker), never the traceback between."""
    text = _COLOUR.sub("", str(exc)).strip() or type(exc).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    head = re.sub(r" \(pid=[^)]*\)", "", lines[0]).rstrip(" ,")
    # The raised error is the last run of lines that are not indented (traceback lines are).
    tail: list[str] = []
    for line in reversed(lines[1:]):
        if line[:1].isspace():
            break
        tail.insert(0, line.strip())
    return f"{head}: {' '.join(tail)}" if tail else head


# Actors by (spec, cache folder, cluster): a cluster started again (a new session) gets new ones.
_POOL: dict[tuple[EmbedderSpec, str, str], list[Any]] = {}


def _cluster(ray: Any) -> str:
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:
        return ""


class _Encoder:
    """A Ray actor's model: loaded once from the spec, then encodes the runs of texts it gets."""

    def __init__(self, spec: EmbedderSpec, cache_dir: str) -> None:
        from retrieval_gate.embed import load_embedder

        self.model = load_embedder(spec, cache_dir=Path(cache_dir))

    def encode(self, batches: list[list[str]]) -> np.ndarray:
        """Each batch in its own encode() call (so padded as the local call pads it), stacked."""
        parts = [np.asarray(self.model.encode_documents(b), dtype=np.float32) for b in batches]
        return np.concatenate(parts, axis=0)


class RayEmbedder(LazyEmbedder):
    """An :class:`~retrieval_gate.embed.Embedder` whose documents are encoded on Ray.

    A :class:`~retrieval_gate.embed.LazyEmbedder` over the local embedder: ``identity`` is its,
    its model is loaded here only for queries (or a dimension nothing else tells), and
    ``encode_documents`` fans the texts out over the cluster's actors. ``sent`` counts the
    texts sent (the misses).
    """

    #: Its calls to the cluster run under ``timeout`` itself (embed/checks.py adds none); its
    #: queries are the local model's, bounded there.
    bounds_itself = "documents"

    def __init__(
        self,
        local: Embedder,
        spec: EmbedderSpec,
        *,
        address: str | None,
        cache_dir: Path,
        timeout: float = 0,
    ) -> None:
        def load() -> Embedder:
            return local.model if isinstance(local, LazyEmbedder) else local

        super().__init__(local.identity, load)
        if not isinstance(local, LazyEmbedder):
            self._model = local  # already loaded: nothing to defer
        elif local.known_dim is not None:
            self.know_dim(local.known_dim)
        self.spec = spec
        self.address = address
        self.cache_dir = Path(cache_dir)
        #: The system's ``timeout`` (0: none): joining the cluster may take it, and the actors
        #: it per batch each runs, plus one for starting them (loading the model).
        self.timeout = float(timeout)
        self.sent = 0
        self._actors: list[Any] = []
        self._pool_key: tuple[EmbedderSpec, str, str] | None = None
        self._options: dict[str, Any] = {}

    def __repr__(self) -> str:
        where = self.address or "a local cluster"
        return f"RayEmbedder({self.identity} on {where})"

    def _ray(self) -> Any:
        ray = import_optional("ray", package="ray", extra="ray")
        if ray.is_initialized():
            return ray
        where = f"at {self.address}" if self.address else "on this machine"
        try:
            # ray.init waits for an address that never answers with no end of its own.
            call_bounded(
                lambda: ray.init(
                    address=self.address,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level="ERROR",
                ),
                self.timeout or None,
            )
        except CallTimeout:
            raise ConfigError(
                f"Ray cluster {where} could not be started or joined within {self.timeout:g} s "
                "(the system's 'timeout'); check 'ray_address'"
            ) from None
        except Exception as exc:
            raise ConfigError(
                f"Ray cluster {where} could not be started or joined: {_error_line(exc)}"
            ) from None
        return ray

    def _placement(self, resources: dict[str, Any]) -> tuple[EmbedderSpec, int, dict[str, Any]]:
        """The actors' spec, how many the cluster can hold, and the resources each asks for:
        one GPU each where the cluster has GPUs, else one CPU each."""
        gpus = int(resources.get("GPU", 0))
        if gpus:
            return (
                dataclasses.replace(self.spec, device="cuda"),
                gpus,
                {"num_gpus": 1, "num_cpus": 1},
            )
        return self.spec, max(1, int(resources.get("CPU", 1))), {"num_cpus": 1}

    def _start(self, ray: Any, runs: int) -> list[Any]:
        spec, wanted, options = self._placement(dict(ray.cluster_resources()))
        self._options = options
        count = max(1, min(wanted, runs))
        # Shared by every embedder of the same spec on the same cluster: a model loads once per
        # actor, however many systems or sessions of this process use it.
        self._pool_key = (spec, str(self.cache_dir), _cluster(ray))
        pool = _POOL.setdefault(self._pool_key, [])
        if len(pool) < count:
            _release_others(ray, self._pool_key)
        while len(pool) < count:
            actor = ray.remote(**options)(_Encoder)
            pool.append(actor.remote(spec, str(self.cache_dir)))
        self._actors = pool
        return pool[:count]

    def _drop(self, ray: Any, actors: list[Any]) -> None:
        """Actors that failed or never started are killed and forgotten: a later call starts
        new ones rather than waiting on them again."""
        for actor in actors:
            with contextlib.suppress(Exception):  # already dead
                ray.kill(actor)
        gone = {id(actor) for actor in actors}
        pool = _POOL.get(self._pool_key) if self._pool_key is not None else None
        if pool is not None:
            pool[:] = [actor for actor in pool if id(actor) not in gone]
        self._actors = []

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        ray = self._ray()
        size = max(1, self.spec.batch_size)
        # The batches one local encode() call forms: sentence-transformers sorts its texts by
        # length (numpy's argsort of minus the length) and cuts batches of batch_size. A text's
        # vector depends on the batch it is padded with (float noise, 1e-7), not on the order
        # within it, so the same batches give the same bits.
        order = np.argsort([-len(text) for text in texts])
        batches = [order[i : i + size] for i in range(0, len(texts), size)]
        actors = self._start(ray, len(batches))
        per_actor = math.ceil(len(batches) / len(actors))
        runs = [batches[i : i + per_actor] for i in range(0, len(batches), per_actor)]
        # Each actor's batches one after the other, and its start (the model's load) first.
        limit = self.timeout * (len(runs[0]) + 1) if self.timeout else None
        try:
            parts = ray.get(
                [
                    actor.encode.remote([[str(texts[j]) for j in batch] for batch in run])
                    for actor, run in zip(actors, runs, strict=False)
                ],
                timeout=limit,
            )
        except Exception as exc:
            self._drop(ray, actors)
            if isinstance(exc, ray.exceptions.GetTimeoutError):
                raise RunError(
                    f"Ray did not embed {counted(len(texts), 'document')} within {limit:g} s "
                    f"(the system's 'timeout', {self.timeout:g} s per batch of "
                    f"{counted(size, 'text')} and one "
                    f"for starting the actors): no actor asking for {self._options} may fit "
                    f"the cluster ({_resources(ray)}), or the model does not load there"
                ) from None
            raise RunError(
                f"embedding {counted(len(texts), 'document')} on Ray failed: {_error_line(exc)}"
            ) from None
        vectors = np.zeros((len(texts), parts[0].shape[-1]), dtype=np.float32)
        for run, part in zip(runs, parts, strict=True):
            rows = np.concatenate(run)
            if part.shape != (rows.size, vectors.shape[1]):
                raise RunError(
                    f"Ray returned {part.shape} vectors for {counted(rows.size, 'document')}"
                )
            vectors[rows] = part
        self.sent += len(texts)
        self.know_dim(int(vectors.shape[1]))
        return vectors


def _release_others(ray: Any, keep: tuple[EmbedderSpec, str, str]) -> None:
    """Other specs' actors on ``keep``'s cluster are killed and forgotten before its own start:
    each holds a CPU (or GPU) while it lives, so on a cluster they fill (a local one has a CPU
    per core) the new spec's actors could never be scheduled. This process embeds one spec at
    a time, so they are idle; a later run of their spec starts them again."""
    for key, actors in _POOL.items():
        if key != keep and key[2] == keep[2] and actors:
            for actor in actors:
                with contextlib.suppress(Exception):  # already dead
                    ray.kill(actor)
            actors.clear()


def _resources(ray: Any) -> str:
    try:
        found = ray.cluster_resources()
    except Exception:
        return "its resources unknown"
    return ", ".join(
        f"{name} {value:g}"
        for name, value in sorted(found.items())
        if not name.startswith(("node:", "memory", "object_store"))
    )


def ray_embedder(
    local: Embedder,
    spec: EmbedderSpec,
    address: str | None,
    *,
    cache_dir: Path,
    embedders: dict[Any, Any],
    timeout: float = 0,
) -> RayEmbedder:
    """The session's Ray embedder for ``spec`` on ``address`` under ``timeout`` (the system's),
    kept in ``embedders`` (the session's loaded embedders) beside the local one: one per spec,
    address and timeout (their actors are shared)."""
    key = ("ray", spec, address, float(timeout))
    found = embedders.get(key)
    if isinstance(found, RayEmbedder):
        return found
    made = RayEmbedder(local, spec, address=address, cache_dir=cache_dir, timeout=timeout)
    embedders[key] = made
    return made

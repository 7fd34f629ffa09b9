"""LanceDB: the gate's own table in a folder, object storage or LanceDB's hosted service, or a
team's existing table read as it is.

Imported with the index registry (its option table); lancedb itself is imported only when a
LanceDB system opens. ``uri`` is whatever ``lancedb.connect`` takes: a folder (default
``<cache_dir>/lancedb``), ``s3://``, ``gs://`` or ``az://`` object storage, or ``db://`` for
the hosted service (its API key from the variable ``api_key_env`` names).

The gate's own table is ``rg-<hash>`` (the hash of the system's index key and the settings that
shape a build) with columns ``id`` and ``vector``, written in one commit (a killed run leaves the
table as it was, or none), its schema metadata recording what it holds (the ids' digest, the
dimension, a build id). A warm run finds them matching and writes nothing; only tables carrying
that record are ever replaced. A team's table (``table``) is only ever read.

Search is exact by default (``ann_index = "none"``: a flat scan, LanceDB's vector index
bypassed); ``ivf_flat``, ``ivf_pq`` and ``ivf_hnsw_sq`` build that index on the gate's table
(a team's table uses its own) and search it, its recall measured against the flat scan. Queries
go in batches, one LanceDB query per batch.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import json
import math
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.display import register_secret
from retrieval_gate.errors import ConfigError, RunError, first_line
from retrieval_gate.files.lock import LockError
from retrieval_gate.index import (
    IndexBackend,
    TableCensus,
    best_first,
    check_census,
    check_ids,
    check_vectors,
    hnsw_settings,
    named_errors,
    table_identity,
    table_mode,
    team_table,
)
from retrieval_gate.schema import Option, OptionTable, at_least, beside_settings, one_of

__all__ = ["BACKEND", "OPTIONS", "LanceDBError", "LanceDBIndex", "table_name"]

#: Schema metadata key of the gate's record: only tables carrying it are ever replaced.
MARK = "retrieval-gate"
_RECORD_VERSION = 1
#: Beside the tables of a local folder, per table, the id of its current build.
BUILD_PREFIX = ".retrieval-gate-build-"
LOCK_FILE = ".retrieval-gate.lock"
_QUERY_BATCH = 256
#: How the gate trains its ANN index (index/training.py); part of its tables' names.
_TRAINED = "r1"
_REMOTE = ("s3://", "s3+ddb://", "gs://", "az://", "abfs://", "db://", "memory://")

ANN_KINDS = ("none", "ivf_flat", "ivf_pq", "ivf_hnsw_sq")
#: The environment variables holding object-store credentials that LanceDB reads.
_STORE_SECRETS = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
)


OPTIONS: OptionTable = {
    "uri": Option(
        str,
        None,
        "where the tables live: a folder (relative to the settings file), s3://, gs://, az:// "
        "object storage or db:// (LanceDB's hosted service); default: <cache_dir>/lancedb "
        "(not in the identity)",
        resolve=beside_settings,
        secret=True,
    ),
    "api_key_env": Option(
        str,
        None,
        "name of the environment variable holding the hosted service's API key",
        secret_env=True,
    ),
    "region": Option(str, None, "the hosted service's region (LanceDB: us-east-1)"),
    "table": Option(
        str,
        None,
        "a team's existing table, searched read-only and never written; unset: the gate's own "
        "table, named from the system's identity",
    ),
    "id_column": Option(str, "id", "column of `table` holding the document ids"),
    "vector_column": Option(str, "vector", "column of `table` holding the vectors"),
    "ann_index": Option(
        str,
        "none",
        "none: exact search (a flat scan, reproducible); ivf_flat, ivf_pq or ivf_hnsw_sq: "
        "search that vector index (built on the gate's own table; a team's table uses its "
        "own), its recall measured against exact",
        check=one_of(*ANN_KINDS),
        rule=", ".join(ANN_KINDS),
    ),
    "num_partitions": Option(
        int, None, "IVF partitions (default: sqrt(rows), rounded)", check=at_least(1), rule=">= 1"
    ),
    "num_sub_vectors": Option(
        int,
        None,
        "ivf_pq sub-vectors (LanceDB: dim / 16 or dim / 8)",
        check=at_least(1),
        rule=">= 1",
    ),
    "nprobes": Option(
        int, None, "IVF partitions searched per query (LanceDB: 20)", check=at_least(1), rule=">= 1"
    ),
    "refine_factor": Option(
        int,
        None,
        "re-rank refine_factor x k candidates by their full vectors (ivf_pq)",
        check=at_least(1),
        rule=">= 1",
    ),
    "hnsw_ef_construction": Option(
        int,
        None,
        "ivf_hnsw_sq candidate list while building (LanceDB: 300)",
        check=at_least(1),
        rule=">= 1",
    ),
    "hnsw_ef_search": Option(
        int,
        None,
        "ivf_hnsw_sq candidate list while searching (LanceDB: 1.5 x k)",
        check=at_least(1),
        rule=">= 1",
    ),
    "hnsw_max_neighbors": Option(
        int, None, "ivf_hnsw_sq links per node, m (LanceDB: 20)", check=at_least(2), rule=">= 2"
    ),
    "connect_timeout": Option(
        int,
        10,
        "seconds to wait for object storage or the hosted service to answer (not in the identity)",
        check=at_least(1),
        rule=">= 1",
    ),
}


class LanceDBError(RunError):
    """LanceDB failed while the gate wrote or searched a table: a one-line run error."""


#: ANN indexes whose build from nothing the gate makes reproducible: it trains them itself.
_SEEDED_ANN = ("ivf_flat", "ivf_pq")


def _reproducible(options: Mapping[str, Any]) -> bool:
    """Whether the same vectors rank the same after any rebuild (docs/embedding.md): exact scans;
    the gate's own IVF tables, trained here with a seed; not a team's table, not the hosted
    service (it trains its own index), not ``ivf_hnsw_sq`` (LanceDB builds its HNSW at random)."""
    approximate, owned = table_mode(options)
    if not approximate:
        return True
    hosted = str(options.get("uri") or "").startswith("db://")
    return owned and not hosted and options.get("ann_index") in _SEEDED_ANN


_identity = functools.partial(
    table_identity, parameters=("num_partitions", "num_sub_vectors", "nprobes", "refine_factor")
)


def table_name(key: str, options: Mapping[str, Any]) -> str:
    """The gate's own table for ``key``: ``rg-`` and 32 hex digits of the key and the settings
    that shape a build."""
    build = {**_identity(options), **hnsw_settings(options)}
    if options.get("ann_index", "none") != "none" and options.get("table") is None:
        # Trained by the gate (index/training.py): never the table of an earlier version that
        # let LanceDB train it, which a rebuild would not reproduce.
        build["trained"] = _TRAINED
    digest = hashlib.sha256(json.dumps([key, build], sort_keys=True).encode()).hexdigest()
    return "rg-" + digest[:32]


def _uri(cache_dir: Path, options: Mapping[str, Any]) -> str:
    uri = options.get("uri")
    return str(uri) if uri else str(Path(cache_dir) / "lancedb")


def _local(uri: str) -> bool:
    return not uri.startswith(_REMOTE) and "://" not in uri


def _ids_digest(ids: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for doc_id in sorted(ids):
        digest.update(doc_id.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


@contextlib.contextmanager
def _folder_lock(uri: str) -> Iterator[None]:
    """An exclusive advisory lock on a local folder of tables while one is written (none for
    remote URIs; unguarded without flock): xdist workers sharing a cache take turns, waiting at
    most ``lock_timeout`` and naming the holder past it (``files/lock.py``)."""
    if not _local(uri):
        yield
        return
    from retrieval_gate.files.lock import held

    Path(uri).mkdir(parents=True, exist_ok=True)
    with held(Path(uri) / LOCK_FILE, what="the LanceDB folder's lock", required=False):
        yield


def _import_lancedb() -> Any:
    from retrieval_gate.embed import import_optional

    # The Rust engine logs a warning to stderr for each table it creates ("No existing
    # dataset"), around pytest's capture; errors still show. A user's own setting wins.
    os.environ.setdefault("LANCEDB_LOG", "error")
    return import_optional("lancedb", package="lancedb", extra="lancedb")


def connect(uri: str, options: Mapping[str, Any]) -> Any:
    """A LanceDB connection; a one-line ``ConfigError`` when it cannot be made."""
    lancedb = _import_lancedb()
    kwargs: dict[str, Any] = {}
    timeout = int(options.get("connect_timeout") or 10)
    if uri.startswith("db://"):
        env = options.get("api_key_env")
        key = os.environ.get(env, "") if env else ""
        if not key:
            raise ConfigError(
                f"LanceDB at {uri} needs an API key: set 'api_key_env' to the name of the "
                "environment variable holding it" + (f" ({env} is not set)" if env else "")
            )
        register_secret(key)  # read now: masked in every message from here
        kwargs["api_key"] = key
        if options.get("region"):
            kwargs["region"] = options["region"]
        kwargs["client_config"] = {
            # read_timeout is per read; 'timeout' bounds each request whole (LanceDB has none
            # by default), and one retry bounds the two together.
            "timeout_config": {
                "connect_timeout": timeout,
                "read_timeout": timeout * 6,
                "timeout": timeout * 6,
            },
            "retry_config": {"retries": 1},
        }
    elif not _local(uri):
        for variable in _STORE_SECRETS:  # the object store's SDK reads them: masked if quoted
            register_secret(os.environ.get(variable, ""))
        kwargs["storage_options"] = {"connect_timeout": f"{timeout}s", "timeout": f"{timeout * 6}s"}
    try:
        return lancedb.connect(uri, **kwargs)
    except Exception as exc:
        raise ConfigError(f"LanceDB at {uri} could not be opened: {first_line(exc)}") from None


def _record(table: Any) -> dict[str, Any] | None:
    metadata = table.schema.metadata or {}
    raw = metadata.get(MARK.encode())
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get(MARK) == _RECORD_VERSION else None


def _build_of(table: Any) -> str | None:
    record = _record(table)
    if record is None:
        return None
    return f"{record['build']}:{table.version}"


def _least_id(found: Any) -> str | None:
    """The least id, as text, of an Arrow table whose first column holds ids; None for none."""
    if found is None:
        return None
    ids = [str(i) for i in found.column(0).to_pylist() if i is not None]
    return min(ids) if ids else None


class LanceDBIndex:
    """One LanceDB table searched by cosine distance; scores are ``1 - distance``."""

    #: ``(settings file, entry)`` its errors name, set by `make_index`.
    errors_named: tuple[str | None, str | None] = (None, None)

    def __init__(
        self,
        db: Any,
        name: str,
        *,
        uri: str,
        options: Mapping[str, Any],
        owned: bool,
        exact: bool = False,
    ) -> None:
        self._db = db
        self.name = name
        self.uri = uri
        self.options = dict(options)
        self.owned = owned
        self.ann = "none" if exact else str(options.get("ann_index", "none"))
        self.id_column = "id" if owned else str(options["id_column"])
        self.vector_column = "vector" if owned else str(options["vector_column"])
        self._table: Any = None
        self._dim: int | None = None
        if not owned:
            self._open_team_table()

    def __repr__(self) -> str:
        return f"LanceDBIndex({self.name!r} at {self.uri})"

    @property
    def where(self) -> str:
        return f"LanceDB table {self.name!r} at {self.uri}"

    def _failed(self, what: str, exc: BaseException) -> LanceDBError:
        return LanceDBError(f"{self.where}: {what} failed: {first_line(exc)}")

    def _open_team_table(self) -> None:
        try:
            table = self._db.open_table(self.name)
        except Exception as exc:
            if "not found" in str(exc).lower() or "does not exist" in str(exc).lower():
                raise ConfigError(f"{self.where} does not exist") from None
            raise ConfigError(f"{self.where} could not be opened: {first_line(exc)}") from None
        fields = {field.name: field for field in table.schema}
        for column in (self.id_column, self.vector_column):
            if column not in fields:
                raise ConfigError(
                    f"{self.where} has no column {column!r} (its columns: "
                    f"{', '.join(sorted(fields))})"
                )
        kind = fields[self.vector_column].type
        size = getattr(kind, "list_size", None)
        if size is None:
            raise ConfigError(
                f"{self.where} has a column {self.vector_column!r} of {kind}, not a fixed-size "
                "vector column"
            )
        self._dim = int(size)
        self._table = table

    def _existing(self) -> Any:
        try:
            return self._db.open_table(self.name)
        except Exception as exc:
            if "not found" in str(exc).lower() or "does not exist" in str(exc).lower():
                return None
            raise

    def build_id(self) -> str | None:
        """The id of the table's current build (its record and version), None without one."""
        table = self._table if self._table is not None else self._existing()
        return None if table is None else _build_of(table)

    @named_errors
    def __len__(self) -> int:
        table = self._table if self._table is not None else self._existing()
        if table is None:
            return 0
        try:
            return int(table.count_rows())
        except Exception as exc:
            raise self._failed("counting rows", exc) from exc

    @named_errors
    def check_table(self, ids: Sequence[str]) -> list[str]:
        """A team's table against the corpus ids (index/__init__.py's `check_census`): a
        one-line ``ConfigError`` when it cannot be measured, else lines to warn with."""
        table = self._table if self._table is not None else self._existing()
        if table is None:
            raise ConfigError(f"{self.where} does not exist")
        # Vectors with a NaN or an infinity, which a search leaves out of every result as it
        # does a NULL one. In the total order LanceDB sorts floats by, a NaN is the greatest
        # value or, with its sign bit set (what 0 / 0 gives on x86), the least; so it is found
        # by a row's maximum and minimum (an element lookup of NaN missed the negative one, and
        # took three times as long).
        column = f"`{self.vector_column}`"
        nonfinite = (
            f"isnan(array_max({column})) OR isnan(array_min({column})) OR "
            f"array_max({column}) = CAST('Infinity' AS FLOAT) OR "
            f"array_min({column}) = CAST('-Infinity' AS FLOAT)"
        )
        try:
            rows = int(table.count_rows())
            nulls = int(table.count_rows(f"`{self.vector_column}` IS NULL")) if rows else 0
            null_ids = int(table.count_rows(f"`{self.id_column}` IS NULL")) if rows else 0
            bad = int(table.count_rows(nonfinite)) if rows else 0
            found = table.search().select([self.id_column]).limit(None).to_arrow() if rows else None
            # Only for the message, only when the table is refused.
            bad_ids = (
                table.search().where(nonfinite).select([self.id_column]).limit(None).to_arrow()
                if bad
                else None
            )
            has_index = self.ann == "none" or self._has_index(table)
        except Exception as exc:
            raise self._failed("reading the table", exc) from exc
        wanted = set(ids)
        # As text, the form a search returns them in.
        table_ids = (
            [] if found is None else [str(i) for i in found.column(0).to_pylist() if i is not None]
        )
        counts = collections.Counter(table_ids)
        census = TableCensus(
            rows,
            nulls,
            sum(1 for doc_id in table_ids if doc_id in wanted),
            min(table_ids) if table_ids else None,
            has_index,
            null_ids=null_ids,
            repeated_ids=len(table_ids) - len(counts),
            repeated_example=min((i for i, n in counts.items() if n > 1), default=None),
            nonfinite_vectors=bad,
            nonfinite_example=_least_id(bad_ids),
        )
        return check_census(
            census,
            ids,
            where=self.where,
            id_column=self.id_column,
            vector_column=self.vector_column,
            ann=self.ann,
            ann_hint="LanceDB would search it by a flat scan",
        )

    def _check_dim(self, dim: int) -> None:
        if self._dim is not None and self._dim != dim:
            raise ConfigError(
                f"{self.where} holds {self._dim}-dimensional vectors in {self.vector_column!r}; "
                f"the model gives {dim}-dimensional ones"
            )

    @named_errors
    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Write the gate's table in one commit unless it already holds these vectors; on a
        team's table, only check that its vectors have the model's dimension."""
        id_list = check_ids(ids)
        array = check_vectors(vectors, rows=len(id_list))
        if not self.owned:
            if array.shape[0]:
                self._check_dim(array.shape[1])
            return
        if not id_list:
            return
        try:
            with _folder_lock(self.uri):
                self._fill(id_list, array)
        except (ConfigError, LanceDBError, LockError):
            raise
        except Exception as exc:
            raise self._failed("writing vectors", exc) from exc
        self._dim = array.shape[1]

    def _fill(self, ids: list[str], array: np.ndarray) -> None:
        import pyarrow as pa

        dim = array.shape[1]
        subs = self.options.get("num_sub_vectors")
        if self.ann == "ivf_pq" and subs is not None and dim % int(subs):
            # Cut into that many equal parts: a count that does not divide the width is not a
            # product quantizer of these vectors.
            raise ConfigError(
                f"'num_sub_vectors' ({subs}) does not divide the vectors' dimension ({dim}): "
                f"ivf_pq cuts each vector into that many equal sub-vectors; give a divisor of "
                f"{dim}"
            )
        # Rows in id order, whatever order the caller gives: the table, and so the training
        # sample and the engine's own order of rows, is the same for the same documents.
        order = sorted(range(len(ids)), key=ids.__getitem__)
        if order != list(range(len(ids))):
            ids = [ids[i] for i in order]
            array = array[order]
        digest = _ids_digest(ids)
        table = self._existing()
        record = None if table is None else _record(table)
        if table is not None and record is None:
            raise ConfigError(
                f"{self.where} exists and was not written by the gate; it is left alone "
                "(drop it, or read it with 'table')"
            )
        if (
            table is None
            or record is None
            or record.get("ids") != digest
            or record.get("dim") != dim
        ):
            record = {MARK: _RECORD_VERSION, "build": uuid.uuid4().hex, "ids": digest, "dim": dim}
            schema = pa.schema(
                [pa.field("id", pa.string()), pa.field("vector", pa.list_(pa.float32(), dim))],
                metadata={MARK: json.dumps(record, sort_keys=True)},
            )
            data = pa.table(
                {
                    "id": pa.array(ids, type=pa.string()),
                    "vector": pa.FixedSizeListArray.from_arrays(
                        pa.array(np.ascontiguousarray(array, dtype=np.float32).ravel()), dim
                    ),
                },
                schema=schema,
            )
            # One commit: a run killed while it writes leaves the previous table, or none.
            table = self._db.create_table(
                self.name, data, schema=schema, mode="overwrite" if table is not None else "create"
            )
        if self.ann != "none" and not self._has_index(table):
            table = self._build_index(table, array)
        self._table = table
        self._write_build(_build_of(table))

    def _has_index(self, table: Any) -> bool:
        try:
            indices = table.list_indices()
        except Exception:
            return False
        return any(self.vector_column in list(index.columns) for index in indices)

    def _partitions(self, rows: int) -> int:
        given = self.options.get("num_partitions")
        # Unset: about sqrt(rows), as LanceDB advises; never more partitions than rows.
        wanted = int(given) if given is not None else round(math.sqrt(rows))
        return min(max(1, wanted), max(1, rows))

    def _build_index(self, table: Any, array: np.ndarray) -> Any:
        """Build the ANN index, its IVF centroids (and PQ codebook) trained by the gate from
        the rows in id order (index/training.py), so that every build of the same vectors is
        the same index; the table as it is afterwards. LanceDB's hosted service trains its own
        (docs/embedding.md, "Reproducible ANN builds")."""
        config = self._index_config(len(array))
        if self.uri.startswith("db://") or not hasattr(table, "to_lance"):
            table.create_index(self.vector_column, config=config)
            return table
        from retrieval_gate.embed import import_optional
        from retrieval_gate.index.training import ivf_centroids, pq_codebook, pq_sub_vectors

        import_optional("lance", package="pylance", extra="lancedb")
        centroids = ivf_centroids(array, self._partitions(len(array)))
        kwargs: dict[str, Any] = {
            "metric": "cosine",
            "num_partitions": len(centroids),
            "ivf_centroids": centroids,
        }
        if self.ann == "ivf_pq":
            subs = self.options.get("num_sub_vectors") or pq_sub_vectors(array.shape[1])
            kwargs["num_sub_vectors"] = int(subs)
            kwargs["pq_codebook"] = pq_codebook(array, centroids, int(subs))
        elif self.ann == "ivf_hnsw_sq":
            hnsw = hnsw_settings(self.options)
            if "max_neighbors" in hnsw:
                kwargs["m"] = hnsw["max_neighbors"]
            if "ef_construction" in hnsw:
                kwargs["ef_construction"] = hnsw["ef_construction"]
        kind = {"ivf_flat": "IVF_FLAT", "ivf_pq": "IVF_PQ", "ivf_hnsw_sq": "IVF_HNSW_SQ"}
        table.to_lance().create_index(self.vector_column, kind[self.ann], **kwargs)
        # The index is a new version of the table: read back as it is now.
        return self._db.open_table(self.name)

    def _index_config(self, rows: int) -> Any:
        from lancedb.index import IvfFlat, IvfHnswSq, IvfPq

        opts = self.options
        common: dict[str, Any] = {"distance_type": "cosine"}
        if opts.get("num_partitions") is not None:
            common["num_partitions"] = min(int(opts["num_partitions"]), max(1, rows))
        if self.ann == "ivf_flat":
            return IvfFlat(**common)
        if self.ann == "ivf_pq":
            if opts.get("num_sub_vectors") is not None:
                common["num_sub_vectors"] = int(opts["num_sub_vectors"])
            return IvfPq(**common)
        hnsw = hnsw_settings(opts)
        if "max_neighbors" in hnsw:
            common["m"] = hnsw["max_neighbors"]
        if "ef_construction" in hnsw:
            common["ef_construction"] = hnsw["ef_construction"]
        return IvfHnswSq(**common)

    def _write_build(self, build: str | None) -> None:
        if build is None or not _local(self.uri):
            return
        from retrieval_gate.files.atomic import write_text_atomic

        # Read by `read_build` without importing lancedb; unwritten, results are not cached.
        with contextlib.suppress(OSError):
            write_text_atomic(Path(self.uri) / f"{BUILD_PREFIX}{self.name}", build + "\n")

    def exact(self) -> LanceDBIndex:
        """The same table searched exactly (a flat scan): what a team's table's ANN recall is
        measured against."""
        twin = LanceDBIndex.__new__(LanceDBIndex)
        twin.__dict__.update(self.__dict__)
        twin.ann = "none"
        return twin

    @named_errors
    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        q = check_vectors(queries, what="queries")
        if q.shape[0] == 0:
            return []
        self._check_dim(q.shape[1])
        table = self._table if self._table is not None else self._existing()
        if table is None:
            return [[] for _ in range(q.shape[0])]
        results: list[list[tuple[str, float]]] = []
        # The flat scan orders equal distances arbitrarily: it fetches k more, so documents tied
        # at the cut are chosen by the tie policy (id descending), as exact search chooses them.
        fetch = 2 * k if self.ann == "none" else k
        try:
            for start in range(0, q.shape[0], _QUERY_BATCH):
                block = q[start : start + _QUERY_BATCH]
                builder = (
                    table.search(list(block), vector_column_name=self.vector_column)
                    .distance_type("cosine")
                    .limit(fetch)
                    .select([self.id_column, "_distance"])
                )
                builder = self._tune(builder)
                found = builder.to_arrow()
                rows: list[list[tuple[str, float]]] = [[] for _ in range(block.shape[0])]
                positions = (
                    found.column("query_index").to_pylist()
                    if "query_index" in found.column_names
                    else [0] * found.num_rows
                )
                doc_ids = found.column(self.id_column).to_pylist()
                distances = found.column("_distance").to_pylist()
                for position, doc_id, distance in zip(positions, doc_ids, distances, strict=True):
                    rows[int(position)].append((str(doc_id), 1.0 - float(distance)))
                # An id on two rows of a team's table was refused by its census
                # (`check_table`), once, not per search.
                results.extend(best_first(pairs)[:k] for pairs in rows)
        except (ConfigError, LanceDBError):
            raise
        except Exception as exc:
            raise self._failed("a search", exc) from exc
        return results

    def _tune(self, builder: Any) -> Any:
        opts = self.options
        if self.ann == "none":
            # A team's table may have a vector index; exact search must not use it.
            return builder.bypass_vector_index()
        if opts.get("nprobes") is not None:
            builder = builder.nprobes(int(opts["nprobes"]))
        if opts.get("refine_factor") is not None:
            builder = builder.refine_factor(int(opts["refine_factor"]))
        if opts.get("hnsw_ef_search") is not None:
            builder = builder.ef(int(opts["hnsw_ef_search"]))
        return builder

    def close(self) -> None:
        self._table = None


def open_index(cache_dir: Path, key: str, options: Mapping[str, Any]) -> LanceDBIndex:
    """The system's table: the gate's own (``rg-<hash>`` under ``uri``) or the team's."""
    uri = _uri(cache_dir, options)
    owned = options.get("table") is None
    name = table_name(key, options) if owned else str(options["table"])
    if _local(uri):
        try:
            Path(uri).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"LanceDB folder {uri} cannot be created ({exc.strerror or exc}); give a "
                "writable 'uri' or --rg-cache-dir"
            ) from None
    return LanceDBIndex(connect(uri, options), name, uri=uri, options=options, owned=owned)


def open_scratch(cache_dir: Path, key: str, options: Mapping[str, Any]) -> LanceDBIndex:
    """A second build for the stability figures, always in the scratch folder given: never in
    the team's storage."""
    return open_index(cache_dir, key, {**options, "uri": None})


def read_build(cache_dir: Path, key: str, options: Mapping[str, Any]) -> str | None:
    """The build id of the gate's table for ``key``: from the file beside a local folder's
    tables (no lancedb import), or from the table's record and version for remote storage;
    None for a team's table (it may change under us) or when it cannot be read."""
    if options.get("table") is not None:
        return None
    uri = _uri(cache_dir, options)
    name = table_name(key, options)
    if _local(uri):
        try:
            text = (Path(uri) / f"{BUILD_PREFIX}{name}").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return text or None
    try:
        return LanceDBIndex(
            connect(uri, options), name, uri=uri, options=options, owned=True
        ).build_id()
    except Exception:
        return None


ORDER = 50
BACKEND = IndexBackend(
    name="lancedb",
    options=OPTIONS,
    open=open_index,
    summary="a LanceDB table (the gate's own in a folder, object storage or the hosted "
    "service, or a team's read-only), exact by default",
    built=read_build,
    mode=table_mode,
    identity=_identity,
    scratch=open_scratch,
    stored=team_table,
    reproducible=_reproducible,
    zero_vectors="LanceDB leaves a zero document vector out of every result, and finds nothing "
    "for a zero query vector (its cosine distance is undefined), where exact search scores "
    "them 0",
)

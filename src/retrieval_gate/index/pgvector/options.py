"""pgvector's option table and what the options decide: exact or ANN search, what of them
shapes a build (the system's identity, the gate's table name), and the checks across options.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from retrieval_gate.errors import ConfigError
from retrieval_gate.index import hnsw_settings, table_identity
from retrieval_gate.schema import Option, OptionTable, at_least, between, one_of

__all__ = ["OPTIONS", "table_name"]

_PREFIX = "rg_"


def _milliseconds(doc: str, default: float) -> Option:
    # Sent to the server in whole milliseconds, where 0 means no limit at all: a value that
    # would round to 0 ms is refused rather than silently lifting the limit.
    return Option(
        (int, float),
        default,
        doc,
        check=lambda v: v >= 0.001 and math.isfinite(v),
        rule=">= 0.001 (1 ms; PostgreSQL reads 0 ms as no limit)",
    )


OPTIONS: OptionTable = {
    "dsn": Option(
        str,
        None,
        "libpq connection string or postgresql:// URI (a cluster's primary, a replica or a "
        "pooler alike); prefer `dsn_env` for credentials",
        secret=True,
    ),
    "dsn_env": Option(
        str,
        None,
        "name of the environment variable holding the DSN (read when the system opens)",
        secret_env=True,
    ),
    "table": Option(
        str,
        None,
        "a team's existing table (`name` or `schema.name`), searched read-only and never "
        "written; unset: the gate's own table, named from the system's identity",
    ),
    "id_column": Option(str, "id", "column of `table` holding the document ids"),
    "vector_column": Option(str, "embedding", "pgvector column of `table` holding the vectors"),
    "ann_index": Option(
        str,
        "none",
        "none: exact search (a sequential scan, reproducible); hnsw or ivfflat: search that "
        "ANN index (built on the gate's own table; a team's table uses its own), its recall "
        "measured against exact",
        check=one_of("none", "hnsw", "ivfflat"),
        rule="none, hnsw, ivfflat",
    ),
    "hnsw_ef_construction": Option(
        int,
        None,
        "HNSW candidate list while building (pgvector: 64, 4 to 1000)",
        **between(4, 1000),
    ),
    "hnsw_ef_search": Option(
        int,
        None,
        "HNSW candidate list while searching (pgvector: 40, at most 1000)",
        **between(1, 1000),
    ),
    "hnsw_max_neighbors": Option(
        int,
        None,
        "HNSW links per node, pgvector's m (pgvector: 16, 2 to 100)",
        **between(2, 100),
    ),
    "ivfflat_lists": Option(
        int,
        None,
        "IVFFlat lists (default: rows / 1000, at least 1, as pgvector advises; at most 32768)",
        **between(1, 32768),
    ),
    "ivfflat_probes": Option(
        int, None, "IVFFlat lists searched per query (pgvector: 1)", check=at_least(1), rule=">= 1"
    ),
    "build_memory": Option(
        str,
        None,
        'maintenance_work_mem while the gate builds its ANN index, e.g. "1GB" (pgvector builds '
        "HNSW far faster when the graph fits; unset: the server's setting; not in the identity)",
        check=lambda v: bool(re.fullmatch(r"\d+\s*(kB|MB|GB|TB)", v)),
        rule="a size such as 512MB or 2GB",
    ),
    "connect_timeout": Option(
        int,
        10,
        "seconds to wait for the server to accept a connection and answer the gate's extension "
        "lookup (not in the identity)",
        check=at_least(1),
        rule=">= 1",
    ),
    "statement_timeout": _milliseconds(
        "seconds a search or catalogue statement may run on the server (not in the identity)", 60
    ),
    "build_timeout": _milliseconds(
        "seconds loading the gate's table and building its ANN index may take (not in the "
        "identity)",
        3600,
    ),
}


# -- settings ---------------------------------------------------------------------------------


_identity = functools.partial(table_identity, parameters=("ivfflat_lists", "ivfflat_probes"))


def table_name(key: str, options: Mapping[str, Any]) -> str:
    """The gate's own table for ``key``: ``rg_`` and 32 hex digits of the key and the settings
    that shape a build (an ANN index's kind and parameters)."""
    build = {**_identity(options), **hnsw_settings(options)}
    digest = hashlib.sha256(json.dumps([key, build], sort_keys=True).encode()).hexdigest()
    return _PREFIX + digest[:32]


def _check_options(options: Mapping[str, Any]) -> None:
    m, ef = options.get("hnsw_max_neighbors"), options.get("hnsw_ef_construction")
    if m is not None and ef is not None and ef < 2 * m:
        raise ConfigError(
            f"pgvector needs hnsw_ef_construction ({ef}) >= 2 x hnsw_max_neighbors ({m})"
        )

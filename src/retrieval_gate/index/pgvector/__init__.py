"""PostgreSQL with pgvector: the gate's own table, or a team's existing one read as it is.

Imported with the index registry (its option table), while psycopg is imported only when a
pgvector system opens. A cluster is the same SQL over another DSN: ``dsn`` (or ``dsn_env``, the
environment variable holding it) may name a primary, a replica for a team's read-only table, or
a pooler.

The gate's own table is ``rg_<hash>`` (the hash of the system's index key: embedder identity,
corpus digest, chunking, fields and the build settings), ``(id text primary key, embedding
vector(dim))``, written whole in one transaction under an advisory lock: created, filled by a
binary COPY, its ANN index built, and a comment recording what it holds (the ids' digest, the
dimension, a build id). A killed run rolls back and leaves nothing half written; a warm run finds
the comment matching and writes nothing. Only tables carrying the gate's comment are ever
replaced. A team's table (``table``) is only ever read.

Search is exact by default (``ann_index = "none"``): a sequential scan ordered by cosine
distance, then by id descending, so the cut at k keeps the documents trec_eval ranks first.
``hnsw`` and ``ivfflat`` search the ANN index instead (its recall is measured against the exact
scan). Queries go in batches, one statement per batch (a LATERAL top-k per query vector).
Every statement runs under ``statement_timeout`` (loading and index builds under
``build_timeout``) and a connection waits at most ``connect_timeout``, which also bounds the
extension lookup made when the table is opened.

The package: ``options`` (the option table, the table's name), ``connection`` (DSN, connecting,
the extension), ``index`` (``PgvectorIndex``: writing and searching a table); here, opening
one and the registry's ``BACKEND``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retrieval_gate.errors import ConfigError
from retrieval_gate.index import IndexBackend, table_mode, team_table
from retrieval_gate.index.pgvector.connection import (
    _ensure_extension,
    connect,
    describe,
    resolve_dsn,
)
from retrieval_gate.index.pgvector.index import _BUILDS, PgvectorError, PgvectorIndex, _Table
from retrieval_gate.index.pgvector.options import (
    _PREFIX,
    OPTIONS,
    _check_options,
    _identity,
    table_name,
)

__all__ = [
    "BACKEND",
    "OPTIONS",
    "PgvectorError",
    "PgvectorIndex",
    "connect",
    "describe",
    "read_build",
    "resolve_dsn",
    "table_name",
]


def _open(key: str, options: Mapping[str, Any], *, temporary: bool) -> PgvectorIndex:
    dsn = resolve_dsn(options)
    where = describe(dsn)
    owned = options.get("table") is None
    if owned:
        name = table_name(key, options)
        table = _Table(None, ("rg_scratch_" + name[len(_PREFIX) :])[:63] if temporary else name)
    else:
        if not re.fullmatch(r"[^.]+(\.[^.]+)?", str(options["table"])):
            raise ConfigError(f"invalid 'table': {options['table']!r}; give name or schema.name")
        table = _Table.parse(str(options["table"]))
    conn = connect(dsn, options)
    try:
        if owned:
            _ensure_extension(conn, where, options)
        return PgvectorIndex(
            conn,
            table,
            where=where,
            options=options,
            owned=owned,
            build_key=where,
            temporary=temporary,
        )
    except BaseException:
        conn.close()
        raise


def open_index(cache_dir: Path, key: str, options: Mapping[str, Any]) -> PgvectorIndex:
    """The system's table: the gate's own (``rg_<hash>``) or the team's ``table``."""
    return _open(key, options, temporary=False)


def open_scratch(cache_dir: Path, key: str, options: Mapping[str, Any]) -> PgvectorIndex:
    """A temporary table of its own connection, for a second build (the stability figures):
    nothing is left on the server once it is closed."""
    return _open(key, options, temporary=True)


def read_build(cache_dir: Path, key: str, options: Mapping[str, Any]) -> str | None:
    """The build id of the gate's table for ``key`` (from its comment), asked of the server
    once per process; None for a team's table (it may change under us), or when it cannot be
    read (the run then opens the table and says why)."""
    if options.get("table") is not None:
        return None
    try:
        dsn = resolve_dsn(options)
    except ConfigError:
        return None
    where = describe(dsn)
    name = table_name(key, options)
    memo = _BUILDS.get((where, name))
    if memo is not None:
        return memo
    try:
        conn = connect(dsn, options)
    except Exception:
        return None
    try:
        index = PgvectorIndex(
            conn, _Table(None, name), where=where, options=options, owned=True, build_key=where
        )
        build = index.build_id()
    except Exception:
        return None
    finally:
        conn.close()
    if build is not None:
        _BUILDS[(where, name)] = build
    return build


def _open_checked(cache_dir: Path, key: str, options: Mapping[str, Any]) -> PgvectorIndex:
    _check_options(options)
    return open_index(cache_dir, key, options)


ORDER = 40
BACKEND = IndexBackend(
    name="pgvector",
    options=OPTIONS,
    open=_open_checked,
    summary="a PostgreSQL table with pgvector (the gate's own, or a team's read-only), exact "
    "by default",
    built=read_build,
    mode=table_mode,
    identity=_identity,
    scratch=open_scratch,
    stored=team_table,
    # An ANN index, the team's or the gate's own: a build after DROP TABLE draws HNSW levels and
    # the IVFFlat k-means start from PostgreSQL's random generator, which SQL cannot seed
    # (docs/embedding.md, "Reproducible ANN builds"), so such a system is decided on exact search.
    reproducible=lambda options: not table_mode(options)[0],
    zero_vectors="pgvector's exact scan scores a zero vector 0, as exact search does (an hnsw "
    "or ivfflat index ranks it last)",
)

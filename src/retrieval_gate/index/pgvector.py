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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import struct
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.display import register_secret, register_secrets_in
from retrieval_gate.errors import ConfigError, RunError
from retrieval_gate.index import (
    IndexBackend,
    TableCensus,
    check_census,
    check_ids,
    check_vectors,
    hnsw_settings,
    named_errors,
)
from retrieval_gate.schema import Option, OptionTable, at_least, one_of

__all__ = ["BACKEND", "OPTIONS", "PgvectorError", "PgvectorIndex", "table_name"]

#: Marks a table's comment as the gate's: only such tables are ever replaced.
MARK = "retrieval-gate"
_COMMENT_VERSION = 1
# Query vectors per search statement: one round trip each.
_QUERY_BATCH = 256
# Rows per COPY message.
_COPY_ROWS = 8192
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
        "HNSW candidate list while building (pgvector: 64)",
        check=at_least(1),
        rule=">= 1",
    ),
    "hnsw_ef_search": Option(
        int,
        None,
        "HNSW candidate list while searching (pgvector: 40, at most 1000)",
        check=lambda v: 1 <= v <= 1000,
        rule="1 to 1000",
    ),
    "hnsw_max_neighbors": Option(
        int,
        None,
        "HNSW links per node, pgvector's m (pgvector: 16)",
        check=at_least(2),
        rule=">= 2",
    ),
    "ivfflat_lists": Option(
        int,
        None,
        "IVFFlat lists (default: rows / 1000, at least 1, as pgvector advises)",
        check=at_least(1),
        rule=">= 1",
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


class PgvectorError(RunError):
    """PostgreSQL failed while the gate loaded or searched a table: a one-line run error."""


# -- settings ---------------------------------------------------------------------------------


def _mode(options: Mapping[str, Any]) -> tuple[bool, bool]:
    approximate = options.get("ann_index", "none") != "none"
    # A team's table and its index are theirs: never built a second time.
    return approximate, approximate and options.get("table") is None


def _identity(options: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if options.get("ann_index", "none") != "none":
        out["ann_index"] = options["ann_index"]
    for name in ("ivfflat_lists", "ivfflat_probes"):
        if options.get(name) is not None:
            out[name] = options[name]
    if options.get("table") is not None:
        out |= {key: options[key] for key in ("table", "id_column", "vector_column")}
    return out


def _stored(options: Mapping[str, Any]) -> bool:
    return options.get("table") is not None


def resolve_dsn(options: Mapping[str, Any]) -> str:
    """The DSN from ``dsn_env`` (when given) or ``dsn``; neither is a ``ConfigError``."""
    # libpq takes the password from PGPASSWORD when the DSN has none: a secret all the same.
    register_secret(os.environ.get("PGPASSWORD", ""))
    env = options.get("dsn_env")
    if env:
        value = os.environ.get(env, "").strip()
        if not value:
            raise ConfigError(f"index 'pgvector': environment variable {env} (dsn_env) is not set")
        # Read now, perhaps changed since the settings were: masked in every message from here.
        register_secret(value)
        register_secrets_in(value)
        return value
    dsn = options.get("dsn")
    if not dsn:
        raise ConfigError(
            "index 'pgvector' needs 'dsn' (a postgresql:// URI) or 'dsn_env' (the environment "
            "variable holding it)"
        )
    return str(dsn)


def describe(dsn: str) -> str:
    """``user@host:port/dbname`` for messages: never the password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:
        return "the configured server"
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    user = parts.get("user")
    db = parts.get("dbname")
    where = f"{host}:{port}"
    if user:
        where = f"{user}@{where}"
    if db:
        where += f"/{db}"
    return f"PostgreSQL at {where}"


def table_name(key: str, options: Mapping[str, Any]) -> str:
    """The gate's own table for ``key``: ``rg_`` and 32 hex digits of the key and the settings
    that shape a build (an ANN index's kind and parameters)."""
    build = {**_identity(options), **hnsw_settings(options)}
    digest = hashlib.sha256(json.dumps([key, build], sort_keys=True).encode()).hexdigest()
    return _PREFIX + digest[:32]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


_CREDENTIAL_WORDS = (
    "password authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
    "does not exist",  # role or database
    "authentication failed",
    "permission denied",
)


def _connect_seconds(options: Mapping[str, Any]) -> int:
    """``connect_timeout``: how long opening waits for the server (connecting, the extension
    lookup)."""
    return int(options.get("connect_timeout") or OPTIONS["connect_timeout"].default)


def connect(dsn: str, options: Mapping[str, Any]) -> Any:
    """A psycopg connection with the timeouts set; a one-line ``ConfigError`` when the server
    cannot be reached, does not answer in time or refuses the credentials."""
    from retrieval_gate.embed import import_optional

    psycopg = import_optional("psycopg", package="psycopg", extra="pgvector")
    where = describe(dsn)
    timeout = _connect_seconds(options)
    try:
        # Autocommit: each `transaction()` block is a real transaction. Statement timeouts are
        # set per transaction (SET LOCAL), not as startup options, which poolers may refuse.
        return psycopg.connect(
            dsn,
            connect_timeout=timeout,
            autocommit=True,
            application_name="pytest-retrieval-gate",
        )
    except psycopg.ProgrammingError as exc:  # a malformed DSN
        raise ConfigError(f"invalid pgvector dsn: {_first_line(exc)}") from None
    except psycopg.Error as exc:
        text = _first_line(exc)
        lower = str(exc).lower()
        if "timeout" in lower:
            raise ConfigError(
                f"{where} did not answer within {timeout} s (connect_timeout): {text}"
            ) from None
        if any(word in lower for word in _CREDENTIAL_WORDS):
            raise ConfigError(
                f"{where} refused the connection: {text}; check the DSN's user, "
                "password and database"
            ) from None
        raise ConfigError(f"{where} is not reachable: {text}") from None


@dataclass(frozen=True)
class _Table:
    """A table reference: optional schema and name, quoted only through psycopg.sql."""

    schema: str | None
    name: str

    @classmethod
    def parse(cls, text: str) -> _Table:
        schema, dot, name = text.partition(".")
        if not dot:
            return cls(None, text)
        return cls(schema, name)

    def sql(self) -> Any:
        from psycopg import sql

        if self.schema is None:
            return sql.Identifier(self.name)
        return sql.Identifier(self.schema, self.name)

    @property
    def regclass(self) -> str:
        """The name as ``to_regclass`` reads it (quoted identifiers)."""

        def quote(part: str) -> str:
            return '"' + part.replace('"', '""') + '"'

        return (
            quote(self.name) if self.schema is None else f"{quote(self.schema)}.{quote(self.name)}"
        )

    def __str__(self) -> str:
        return self.name if self.schema is None else f"{self.schema}.{self.name}"


# Build ids read or written this process, by server and table: a run asks once per table, not
# once per search (the result cache asks before every search).
_BUILDS: dict[tuple[str, str], str] = {}


def _ids_digest(ids: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for doc_id in sorted(ids):
        digest.update(doc_id.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def _parse_comment(text: str | None) -> dict[str, Any] | None:
    """The gate's record in a table comment, None when the comment is not the gate's."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get(MARK) != _COMMENT_VERSION:
        return None
    return data


def _copy_payload(ids: Sequence[str], vectors: np.ndarray) -> Iterator[bytes]:
    """PostgreSQL binary COPY rows ``(text, vector)``: pgvector's binary form is int16 dim,
    int16 unused, then big-endian float32s (vector_recv)."""
    dim = vectors.shape[1]
    yield b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
    big = vectors.astype(">f4", copy=False)
    prefix = struct.pack("!ihh", 4 + 4 * dim, dim, 0)
    for start in range(0, len(ids), _COPY_ROWS):
        parts = []
        for i in range(start, min(start + _COPY_ROWS, len(ids))):
            raw = ids[i].encode("utf-8")
            parts.append(struct.pack("!hi", 2, len(raw)) + raw + prefix + big[i].tobytes())
        yield b"".join(parts)
    yield struct.pack("!h", -1)


def _vector_literal(row: np.ndarray) -> str:
    # 9 significant digits read back as the same float32.
    return "[" + ",".join(f"{x:.9g}" for x in row.tolist()) + "]"


def _array_literal(rows: np.ndarray) -> str:
    return "{" + ",".join(f'"{_vector_literal(row)}"' for row in rows) + "}"


def _best_first(pairs: list[tuple[str, float]]) -> list[tuple[str, float]]:
    from retrieval_gate.metrics import rank_scored

    scores = dict(pairs)
    return [(doc_id, scores[doc_id]) for doc_id in rank_scored(scores)]


class PgvectorIndex:
    """One pgvector table searched by cosine distance; scores are ``1 - distance``.

    ``owned``: the gate's own table (written by `add`, replaced only if its comment is the
    gate's); otherwise a team's table, which `add` never writes. ``temporary``: a scratch table
    of this connection (a second build for the stability figures), dropped with it.
    """

    #: ``(settings file, entry)`` its errors name, set by `make_index`.
    errors_named: tuple[str | None, str | None] = (None, None)

    def __init__(
        self,
        conn: Any,
        table: _Table,
        *,
        where: str,
        options: Mapping[str, Any],
        owned: bool,
        build_key: str,
        temporary: bool = False,
        exact: bool | None = None,
    ) -> None:
        self._conn = conn
        self.table = table
        self.where = where
        self.options = dict(options)
        self.owned = owned
        self.temporary = temporary
        self._build_key = build_key
        self.ann = "none" if exact else str(options.get("ann_index", "none"))
        self.id_column = "id" if owned else str(options["id_column"])
        self.vector_column = "embedding" if owned else str(options["vector_column"])
        self._dim: int | None = None
        self._statement_ms = int(float(options["statement_timeout"]) * 1000)
        self._build_ms = int(float(options["build_timeout"]) * 1000)
        self._shared = exact is not None  # an exact twin shares its parent's connection

    def __repr__(self) -> str:
        return f"PgvectorIndex({str(self.table)!r} at {self.where})"

    # -- errors ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _one_line(self, what: str) -> Iterator[None]:
        """A database error inside becomes :meth:`_failed`'s one line about ``what``; the
        gate's own ConfigErrors (a missing table) and anything else pass through."""
        try:
            yield
        except ConfigError:
            raise
        except Exception as exc:
            if _is_database_error(exc):
                raise self._failed(what, exc) from exc
            raise

    def _failed(self, what: str, exc: BaseException) -> PgvectorError:
        import psycopg

        if isinstance(exc, psycopg.errors.QueryCanceled):
            return PgvectorError(
                f"{self.where}: {what} on table {self.table} was cancelled after the "
                f"statement timeout ({_first_line(exc)}); raise 'statement_timeout' or "
                "'build_timeout'"
            )
        return PgvectorError(
            f"{self.where}: {what} on table {self.table} failed: {_first_line(exc)}"
        )

    # -- catalogue ------------------------------------------------------------------------

    def _set_timeout(self, cur: Any, ms: int) -> None:
        cur.execute(f"SET LOCAL statement_timeout = {int(ms)}")

    def _column_dim(self, cur: Any) -> int | None:
        """The vector column's dimension (None for a column of unfixed dimension that is
        empty); a missing table or column is a ``ConfigError``."""
        from psycopg import sql

        cur.execute("SELECT to_regclass(%s)::oid", (self.table.regclass,))
        row = cur.fetchone()
        if row is None or row[0] is None:
            raise ConfigError(f"{self.where}: table {self.table} does not exist")
        oid = row[0]
        cur.execute(
            "SELECT attname, format_type(atttypid, atttypmod), atttypmod FROM pg_attribute "
            "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
            (oid,),
        )
        columns = {name: (kind, mod) for name, kind, mod in cur.fetchall()}
        for column in (self.id_column, self.vector_column):
            if column not in columns:
                raise ConfigError(
                    f"{self.where}: table {self.table} has no column {column!r} "
                    f"(its columns: {', '.join(sorted(columns))})"
                )
        kind, mod = columns[self.vector_column]
        if not str(kind).startswith("vector"):
            raise ConfigError(
                f"{self.where}: column {self.vector_column!r} of table {self.table} is "
                f"{kind}, not a pgvector vector"
            )
        if mod is not None and mod > 0:
            return int(mod)
        cur.execute(
            sql.SQL("SELECT vector_dims({}) FROM {} LIMIT 1").format(
                sql.Identifier(self.vector_column), self.table.sql()
            )
        )
        found = cur.fetchone()
        return None if found is None else int(found[0])

    def _check_dim(self, dim: int) -> None:
        if self._dim is None:
            with (
                self._one_line("reading the columns"),
                self._conn.transaction(),
                self._conn.cursor() as cur,
            ):
                self._set_timeout(cur, self._statement_ms)
                self._dim = self._column_dim(cur)
        if self._dim is not None and self._dim != dim:
            raise ConfigError(
                f"{self.where}: table {self.table} holds {self._dim}-dimensional vectors in "
                f"{self.vector_column!r}; the model gives {dim}-dimensional ones"
            )

    @named_errors
    def check_table(self, ids: Sequence[str]) -> list[str]:
        """A team's table against the corpus ids (index/__init__.py's `check_census`): a
        one-line ``ConfigError`` when it cannot be measured, else lines to warn with."""
        from psycopg import sql

        names = {
            "id": sql.Identifier(self.id_column),
            "vec": sql.Identifier(self.vector_column),
            "table": self.table.sql(),
        }
        with (
            self._one_line("reading the table"),
            self._conn.transaction(),
            self._conn.cursor() as cur,
        ):
            self._set_timeout(cur, self._statement_ms)
            self._column_dim(cur)  # a missing table or column first, as a search says it
            cur.execute(
                sql.SQL(
                    "SELECT count(*), count(*) FILTER (WHERE {vec} IS NULL), "
                    "count(*) FILTER (WHERE {id}::text = ANY(%s)), min({id}::text) FROM {table}"
                ).format(**names),
                (list(ids),),
            )
            rows, nulls, matched, example = cur.fetchone()
            has_index = True
            if self.ann != "none":
                # Searched by cosine distance: only an index of that kind with the cosine
                # operator class on the vector column serves it.
                cur.execute(
                    "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "JOIN pg_am a ON a.oid = c.relam JOIN pg_attribute t "
                    "ON t.attrelid = i.indrelid AND t.attnum = ANY(i.indkey) "
                    "JOIN pg_opclass o ON o.oid = ANY(i.indclass) "
                    "WHERE i.indrelid = to_regclass(%s) AND a.amname = %s AND t.attname = %s "
                    "AND o.opcname = 'vector_cosine_ops'",
                    (self.table.regclass, self.ann, self.vector_column),
                )
                found = cur.fetchone()
                has_index = found is not None and int(found[0]) > 0
        census = TableCensus(int(rows), int(nulls), int(matched), example, has_index)
        return check_census(
            census,
            ids,
            where=f"{self.where}: table {self.table}",
            id_column=self.id_column,
            vector_column=self.vector_column,
            ann=self.ann,
            ann_hint="USING " + self.ann + " with vector_cosine_ops",
        )

    def _comment(self, cur: Any) -> tuple[bool, dict[str, Any] | None]:
        """Whether the table exists, and the gate's record in its comment."""
        cur.execute(
            "SELECT c.oid, obj_description(c.oid, 'pg_class') FROM pg_class c "
            "WHERE c.oid = to_regclass(%s)",
            (self.table.regclass,),
        )
        row = cur.fetchone()
        if row is None:
            return False, None
        return True, _parse_comment(row[1])

    def build_id(self) -> str | None:
        """The id of the table's current build (its comment), None when there is none."""
        with self._conn.transaction(), self._conn.cursor() as cur:
            self._set_timeout(cur, self._statement_ms)
            _, record = self._comment(cur)
        return None if record is None else str(record.get("build"))

    @named_errors
    def __len__(self) -> int:
        from psycopg import sql

        try:
            with self._conn.transaction(), self._conn.cursor() as cur:
                self._set_timeout(cur, self._statement_ms)
                exists, _ = self._comment(cur) if not self.temporary else (True, None)
                if not exists:
                    return 0
                cur.execute(sql.SQL("SELECT count(*) FROM {}").format(self.table.sql()))
                row = cur.fetchone()
        except Exception as exc:
            raise self._failed("counting rows", exc) from exc
        return 0 if row is None else int(row[0])

    # -- writing --------------------------------------------------------------------------

    @named_errors
    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Put the vectors into the gate's table (ids it holds are skipped); on a team's table,
        only check that its vectors have the model's dimension."""
        id_list = check_ids(ids)
        array = check_vectors(vectors, rows=len(id_list))
        if not self.owned:
            if array.shape[0]:
                self._check_dim(array.shape[1])
            return
        if not id_list:
            return
        try:
            build = self._fill(id_list, array)
        except (ConfigError, PgvectorError):
            raise
        except Exception as exc:
            raise self._failed("loading vectors", exc) from exc
        self._dim = array.shape[1]
        if build is not None and not self.temporary:
            _BUILDS[(self._build_key, str(self.table))] = build

    def _fill(self, ids: list[str], array: np.ndarray) -> str | None:
        """Write what the table lacks, in one transaction; the build id after it."""
        from psycopg import sql

        dim = array.shape[1]
        digest = _ids_digest(ids)
        with self._conn.transaction(), self._conn.cursor() as cur:
            self._set_timeout(cur, self._build_ms)
            if not self.temporary:
                # Two processes (xdist workers, parallel jobs) filling the same table take turns;
                # the second finds it complete.
                cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (str(self.table),))
                exists, record = self._comment(cur)
                if exists and record is None:
                    raise ConfigError(
                        f"{self.where}: table {self.table} exists and was not written by the "
                        "gate; it is left alone (drop it, or read it with 'table')"
                    )
                if (
                    record is not None
                    and record.get("ids") == digest
                    and record.get("dim") == dim
                    and self._has_index(cur)
                ):
                    return str(record["build"])
                if record is not None and record.get("dim") != dim:
                    cur.execute(sql.SQL("DROP TABLE {}").format(self.table.sql()))
                    exists = False
            else:
                exists = False
            present: set[str] = set()
            if exists:
                cur.execute(sql.SQL("SELECT id FROM {}").format(self.table.sql()))
                present = {row[0] for row in cur.fetchall()}
            else:
                temp = sql.SQL("TEMPORARY ") if self.temporary else sql.SQL("")
                cur.execute(
                    sql.SQL(
                        "CREATE {}TABLE {} (id text PRIMARY KEY, embedding vector({}) NOT NULL)"
                    ).format(temp, self.table.sql(), sql.Literal(dim))
                )
            new = [i for i, doc_id in enumerate(ids) if doc_id not in present]
            if new:
                rows = array if len(new) == len(ids) else array[new]
                new_ids = ids if len(new) == len(ids) else [ids[i] for i in new]
                with cur.copy(
                    sql.SQL("COPY {} (id, embedding) FROM STDIN WITH (FORMAT BINARY)").format(
                        self.table.sql()
                    )
                ) as copy:
                    for block in _copy_payload(new_ids, rows):
                        copy.write(block)
            indexed = self._build_index(cur, len(present) + len(new))
            if not new and not indexed and exists:
                # Nothing changed: the table keeps its build (and its cached results).
                _, record = self._comment(cur)
                if record is not None:
                    return str(record["build"])
            if self.temporary:
                return None
            build = uuid.uuid4().hex
            total = sorted(present.union(ids))
            record = {
                MARK: _COMMENT_VERSION,
                "build": build,
                "ids": _ids_digest(total),
                "rows": len(total),
                "dim": dim,
                "ann_index": self.ann,
            }
            cur.execute(
                sql.SQL("COMMENT ON TABLE {} IS {}").format(
                    self.table.sql(), sql.Literal(json.dumps(record, sort_keys=True))
                )
            )
        return build

    def _index_name(self) -> str:
        return f"{self.table.name}_{self.ann}"

    def _has_index(self, cur: Any) -> bool:
        if self.ann == "none":
            return True
        cur.execute("SELECT to_regclass(%s)", (self._qualified(self._index_name()),))
        row = cur.fetchone()
        return row is not None and row[0] is not None

    def _qualified(self, name: str) -> str:
        quoted = '"' + name.replace('"', '""') + '"'
        if self.table.schema is None:
            return quoted
        return '"' + self.table.schema.replace('"', '""') + '".' + quoted

    def _build_index(self, cur: Any, rows: int) -> bool:
        """Create the ANN index the settings ask for if the table lacks it; whether it did."""
        from psycopg import sql

        if self.ann == "none" or self._has_index(cur):
            return False
        opts = self.options
        if opts.get("build_memory"):
            cur.execute(
                sql.SQL("SET LOCAL maintenance_work_mem = {}").format(
                    sql.Literal(str(opts["build_memory"]))
                )
            )
        if self.ann == "hnsw":
            params = {
                "m": opts.get("hnsw_max_neighbors"),
                "ef_construction": opts.get("hnsw_ef_construction"),
            }
            method = sql.SQL("hnsw")
        else:
            lists = opts.get("ivfflat_lists") or max(1, rows // 1000)
            params = {"lists": lists}
            method = sql.SQL("ivfflat")
        given = [(name, value) for name, value in params.items() if value is not None]
        with_clause: Any = sql.SQL("")
        if given:
            with_clause = sql.SQL(" WITH ({})").format(
                sql.SQL(", ").join(
                    sql.SQL("{} = {}").format(sql.SQL(name), sql.Literal(int(value)))
                    for name, value in given
                )
            )
        cur.execute(
            sql.SQL("CREATE INDEX {} ON {} USING {} (embedding vector_cosine_ops){}").format(
                sql.Identifier(self._index_name()), self.table.sql(), method, with_clause
            )
        )
        return True

    # -- searching ------------------------------------------------------------------------

    def exact(self) -> PgvectorIndex:
        """The same table searched exactly (a sequential scan), on the same connection: what a
        team's table's ANN recall is measured against."""
        return PgvectorIndex(
            self._conn,
            self.table,
            where=self.where,
            options=self.options,
            owned=self.owned,
            build_key=self._build_key,
            temporary=self.temporary,
            exact=True,
        )

    def _search_sql(self) -> Any:
        from psycopg import sql

        names = {
            "id": sql.Identifier(self.id_column),
            "vec": sql.Identifier(self.vector_column),
            "table": self.table.sql(),
        }
        if self.ann == "none":
            # Exact search breaks distance ties by id descending (trec_eval's order) inside the
            # scan, so the cut at k is decided by it. A zero vector's cosine distance is NaN,
            # which sorts after every number: read as distance 1 (cosine 0), where exact
            # search puts it. Rows with a NULL vector cannot be scored and are left out.
            return sql.SQL(
                "SELECT q.ord, h.id, h.d FROM unnest(%s::vector[]) WITH ORDINALITY AS q(v, ord) "
                "CROSS JOIN LATERAL (SELECT {id}::text AS id, "
                "coalesce(nullif({vec} <=> q.v, 'NaN'::float8), 1) AS d FROM {table} "
                "WHERE {vec} IS NOT NULL ORDER BY 2, {id} DESC LIMIT %s) h"
            ).format(**names)
        # An ANN index scan orders by distance alone, in the form its index serves.
        return sql.SQL(
            "SELECT q.ord, h.id, h.d FROM unnest(%s::vector[]) WITH ORDINALITY AS q(v, ord) "
            "CROSS JOIN LATERAL (SELECT {id}::text AS id, {vec} <=> q.v AS d FROM {table} "
            "ORDER BY {vec} <=> q.v LIMIT %s) h"
        ).format(**names)

    def _search_settings(self, cur: Any) -> None:
        self._set_timeout(cur, self._statement_ms)
        opts = self.options
        if self.ann == "none":
            # Never an index: a team's table may have one, and exact search must not use it.
            cur.execute("SET LOCAL enable_indexscan = off")
            cur.execute("SET LOCAL enable_bitmapscan = off")
        elif self.ann == "hnsw" and opts.get("hnsw_ef_search") is not None:
            cur.execute(f"SET LOCAL hnsw.ef_search = {int(opts['hnsw_ef_search'])}")
        elif self.ann == "ivfflat" and opts.get("ivfflat_probes") is not None:
            cur.execute(f"SET LOCAL ivfflat.probes = {int(opts['ivfflat_probes'])}")

    @named_errors
    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        q = check_vectors(queries, what="queries")
        if q.shape[0] == 0:
            return []
        self._check_dim(q.shape[1])
        statement = self._search_sql()
        results: list[list[tuple[str, float]]] = []
        with self._one_line("a search"):
            for start in range(0, q.shape[0], _QUERY_BATCH):
                block = q[start : start + _QUERY_BATCH]
                found: list[list[tuple[str, float]]] = [[] for _ in range(block.shape[0])]
                with self._conn.transaction(), self._conn.cursor() as cur:
                    self._search_settings(cur)
                    cur.execute(statement, (_array_literal(block), k))
                    for ordinal, doc_id, distance in cur.fetchall():
                        if distance is None:
                            continue  # a NULL vector (an ANN scan lists them last): unscored
                        score = 1.0 - float(distance)
                        # NaN: a zero vector, cosine 0 as exact search scores it.
                        found[int(ordinal) - 1].append(
                            (str(doc_id), 0.0 if math.isnan(score) else score)
                        )
                results.extend(_best_first(pairs) for pairs in found)
        return results

    def close(self) -> None:
        if self._shared:
            return
        if self.temporary and not self._conn.closed:
            from psycopg import sql

            # Dropped now: the server drops a connection's temporary tables only once it has
            # noticed the connection is gone, after close() returns.
            with contextlib.suppress(Exception), self._conn.cursor() as cur:
                cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self.table.sql()))
        self._conn.close()


def _is_database_error(exc: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - an index exists only with psycopg
        return False
    return isinstance(exc, psycopg.Error)


# -- the backend ---------------------------------------------------------------------------


def _ensure_extension(conn: Any, where: str, options: Mapping[str, Any]) -> None:
    # Part of opening the connection, so bounded by connect_timeout: a statement_timeout tuned
    # for searches (milliseconds, on a fast server) must not cancel this catalogue read.
    import psycopg

    seconds = _connect_seconds(options)
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(f"SET LOCAL statement_timeout = {seconds * 1000}")
            cur.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            if cur.fetchone() is not None:
                return
    except psycopg.errors.QueryCanceled as exc:
        raise ConfigError(
            f"{where} did not answer the pgvector extension lookup within {seconds} s "
            f"(connect_timeout): {_first_line(exc)}"
        ) from None
    except psycopg.Error as exc:
        raise ConfigError(
            f"{where}: looking up the pgvector extension failed: {_first_line(exc)}"
        ) from None
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except Exception as exc:
        raise ConfigError(
            f"{where}: the pgvector extension is not installed in this database and could not "
            f"be created ({_first_line(exc)}); run CREATE EXTENSION vector as its owner"
        ) from None


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


def _check_options(options: Mapping[str, Any]) -> None:
    m, ef = options.get("hnsw_max_neighbors"), options.get("hnsw_ef_construction")
    if m is not None and ef is not None and ef < 2 * m:
        raise ConfigError(
            f"pgvector needs hnsw_ef_construction ({ef}) >= 2 x hnsw_max_neighbors ({m})"
        )


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
    mode=_mode,
    identity=_identity,
    scratch=open_scratch,
    stored=_stored,
    reproducible=lambda options: not (_mode(options)[0] and _stored(options)),  # a team's ANN
    zero_vectors="pgvector's exact scan scores a zero vector 0, as exact search does (an hnsw "
    "or ivfflat index ranks it last)",
)

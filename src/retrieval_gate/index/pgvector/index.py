"""``PgvectorIndex``: one table searched by cosine distance, and the writing of the gate's own
table (one transaction under an advisory lock: created, filled by a binary COPY, its ANN index
built, its comment recording what it holds).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import struct
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval_gate.errors import ConfigError, RunError, first_line
from retrieval_gate.index import (
    TableCensus,
    best_first,
    check_census,
    check_ids,
    check_vectors,
    named_errors,
)
from retrieval_gate.index.pgvector.connection import _is_database_error

__all__ = ["MARK", "PgvectorError", "PgvectorIndex"]

#: Marks a table's comment as the gate's: only such tables are ever replaced.
MARK = "retrieval-gate"
_COMMENT_VERSION = 1
# Query vectors per search statement: one round trip each.
_QUERY_BATCH = 256
# Rows per COPY message.
_COPY_ROWS = 8192


class PgvectorError(RunError):
    """PostgreSQL failed while the gate loaded or searched a table: a one-line run error."""


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
                f"statement timeout ({first_line(exc)}); raise 'statement_timeout' or "
                "'build_timeout'"
            )
        return PgvectorError(
            f"{self.where}: {what} on table {self.table} failed: {first_line(exc)}"
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
            # One scan. Ids are compared as the text a search returns (numeric's 2 and 2.0 are
            # one value but two ids to a search). pgvector refuses NaN and infinities in a
            # vector, so there are none to count.
            cur.execute(
                sql.SQL(
                    "SELECT count(*), count(*) FILTER (WHERE {vec} IS NULL), "
                    "count(*) FILTER (WHERE {id}::text = ANY(%s)), min({id}::text), "
                    "count(*) FILTER (WHERE {id} IS NULL), "
                    "count({id}) - count(DISTINCT {id}::text) FROM {table}"
                ).format(**names),
                (list(ids),),
            )
            rows, nulls, matched, example, null_ids, repeated = cur.fetchone()
            repeated_example = None
            if repeated:
                # Only for the message, only when the table is refused.
                cur.execute(
                    sql.SQL(
                        "SELECT {id}::text FROM {table} WHERE {id} IS NOT NULL GROUP BY 1 "
                        "HAVING count(*) > 1 ORDER BY 1 LIMIT 1"
                    ).format(**names)
                )
                found_repeat = cur.fetchone()
                repeated_example = None if found_repeat is None else found_repeat[0]
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
        census = TableCensus(
            int(rows),
            int(nulls),
            int(matched),
            example,
            has_index,
            null_ids=int(null_ids),
            repeated_ids=int(repeated),
            repeated_example=repeated_example,
        )
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
                # An id on two rows of a team's table was refused by its census
                # (`check_table`), once, not per search.
                results.extend(best_first(pairs) for pairs in found)
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

"""Reaching the server: the DSN (``dsn`` or ``dsn_env``, registered as a secret), how messages
name the server (never the password), the connection with its timeouts, and the pgvector
extension the gate's own table needs. psycopg is imported only here and in the index, when a
pgvector system opens.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from retrieval_gate.display import register_secret, register_secrets_in
from retrieval_gate.errors import ConfigError, first_line
from retrieval_gate.index.pgvector.options import OPTIONS

__all__ = ["connect", "describe", "resolve_dsn"]


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


def _dead_peer(dsn: str, seconds: int) -> dict[str, int]:
    """libpq settings that end a connection whose server or network went away mid-statement
    (TCP keepalives, and how long sent data may stay unacknowledged) within a few
    ``connect_timeout``: the statement timeouts are the server's to keep, and a server that is
    gone keeps none, while the client would wait for its answer as long as the kernel's
    keepalive (two hours). A busy server still answers the keepalives: a long build is not cut.
    The DSN's own values of these win."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        given = set(conninfo_to_dict(dsn))
    except Exception:
        given = set()
    wanted = {
        "keepalives": 1,
        "keepalives_idle": seconds,
        "keepalives_interval": max(1, seconds // 3),
        "keepalives_count": 3,
        "tcp_user_timeout": seconds * 3 * 1000,
    }
    return {key: value for key, value in wanted.items() if key not in given}


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
            **_dead_peer(dsn, timeout),
        )
    except psycopg.ProgrammingError as exc:  # a malformed DSN
        raise ConfigError(f"invalid pgvector dsn: {first_line(exc)}") from None
    except psycopg.Error as exc:
        text = first_line(exc)
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


def _is_database_error(exc: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - an index exists only with psycopg
        return False
    return isinstance(exc, psycopg.Error)


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
            f"(connect_timeout): {first_line(exc)}"
        ) from None
    except psycopg.Error as exc:
        raise ConfigError(
            f"{where}: looking up the pgvector extension failed: {first_line(exc)}"
        ) from None
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.UniqueViolation:
        # IF NOT EXISTS does not guard two sessions creating it at once (xdist workers on a
        # fresh database): the one that waited gets a unique violation once the other commits,
        # and the extension is there.
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            if cur.fetchone() is None:
                raise
    except Exception as exc:
        raise ConfigError(
            f"{where}: the pgvector extension is not installed in this database and could not "
            f"be created ({first_line(exc)}); run CREATE EXTENSION vector as its owner"
        ) from None

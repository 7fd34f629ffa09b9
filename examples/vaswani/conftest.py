"""Skip the Vaswani suite, with the reason, when the collection is not next to the repository.

The Vaswani files live in ``../shared/data/vaswani`` (relative to the repository root), outside
the repository, so a fresh clone does not have them. Without this hook the suite would be a
collection *error* (its topics file is missing); with it, the suite becomes one skipped item that
says what is missing, and the run header says so too.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DATA = (HERE / ".." / ".." / ".." / "shared" / "data" / "vaswani").resolve()
SUITE = HERE / "vaswani.retrieval.yaml"
NEEDED = ("query-text.trec", "qrels", "corpus/doc-text.trec")

MISSING = [name for name in NEEDED if not (DATA / name).is_file()]
REASON = (
    f"Vaswani collection not found: {DATA} lacks {', '.join(MISSING)} "
    "(it ships in ../shared/data next to the repository, not in it)"
)


def pytest_report_header(config: pytest.Config) -> str | None:
    if MISSING and config.getoption("retrieval_gate", False):
        return f"vaswani example: {REASON}; the suite is skipped"
    return None


class DataMissing(pytest.Item):
    """Stands in for the suite's items so the run reports a skip, not an error."""

    def setup(self) -> None:
        pytest.skip(REASON)

    def runtest(self) -> None:  # never reached: setup skips
        pytest.skip(REASON)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name}: {REASON}"


class DataMissingFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield DataMissing.from_parent(self, name="data-missing")


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(
    file_path: Path, parent: pytest.Collector
) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
    collected = yield
    # Only when the plugin collects the suite (i.e. with --retrieval-gate) does it need replacing.
    if MISSING and collected and file_path.resolve() == SUITE:
        return [DataMissingFile.from_parent(parent, path=file_path)]
    return collected

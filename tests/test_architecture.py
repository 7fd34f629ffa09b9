"""The package's shape, as docs/architecture.md states it: layers that import only downwards, no
import circles (type-only imports included), a short top level, a thin session, and no branch on
a suite kind's name outside ``suites/``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "retrieval_gate"


def _module_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (lazy and type-only imports included); an
    import between a package and its own descendants is not an edge (a package's ``__init__``
    naming its modules is how packages work)."""
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*kept, *([base] if base else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in modules else base)
        graph[name] = {
            other
            for other in found
            if other in modules
            and other != name
            and not (name.startswith(other + ".") or other.startswith(name + "."))
        }
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles_counting_type_only_imports() -> None:
    assert _cycles(_module_graph()) == []


def test_a_circle_is_found_when_there_is_one() -> None:
    # The detector itself: a circle through three modules, and one edge that closes none.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_layer_contracts_hold() -> None:
    """pyproject.toml's import-linter contracts: each layer imports only the layers below it
    (docs/architecture.md lists them), and no package's modules import each other in a circle."""
    pytest.importorskip("importlinter")
    from importlinter.cli import lint_imports

    status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    assert status == 0, "a contract is broken: run `lint-imports` from the repository root"


def test_the_top_level_is_short_and_the_session_thin() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top
    lines = (PACKAGE / "session.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"session.py has {lines} lines"


_KIND_BRANCH = re.compile(
    r"""kind\s*(==|!=)\s*["'](ranking|ontology|extraction|pairs)["']"""
    r"""|["'](ranking|ontology|extraction|pairs)["']\s*(==|!=)\s*[\w.]*kind"""
)


def test_no_branch_on_a_suite_kind_outside_suites() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in PACKAGE.rglob("*.py")
        if "suites" not in path.relative_to(PACKAGE).parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if _KIND_BRANCH.search(line)
    ]
    assert found == []

"""Report writers against hostile plug-ins, and the completion marker they cannot fool
(report/writing.py).

A plug-in writer is the user's code: whatever its ``write`` does (raises, hangs, answers junk,
writes over another output, changes the records), it fails alone, in one line naming it; the
built-in reports and the other plug-ins still write; and the JSON twin, written last, says
``"complete": false`` with that line. Each row of ``HOSTILE`` is one such writer, registered
beside a well-behaved one (``bar``) that records what it was handed.
"""

from __future__ import annotations

import fnmatch
import json
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.files.outputs import JSON_OUTPUT, OutputOption
from retrieval_gate.records import ItemPayload
from retrieval_gate.report import (
    _WRITERS,
    ReportData,
    Targets,
    Writer,
    _registry,
    markdown,
    register_writer,
    write_reports,
    writing,
)

from .builders import gate, run_record

FOO = OutputOption(name="foo", flag="--rg-foo", help="h", kind="json", ini="retrieval_gate_foo")
BAR = OutputOption(name="bar", flag="--rg-bar", help="h", kind="json", ini="retrieval_gate_bar")
SOURCE = "report writer 'hostile' (register())"
#: Released when a test ends: the writers that hang wait on it.
_RELEASE = threading.Event()


def _data() -> ReportData:
    run = run_record("s", "x", 0.5)
    return ReportData.gathered(ItemPayload(runs=(run,), gates=(gate("s::x::P@1", True),)))


def _targets(tmp_path: Path) -> Targets:
    extra = {"foo": tmp_path / "foo.json", "bar": tmp_path / "bar.json"}
    return Targets(markdown=tmp_path / "r.md", json=tmp_path / "r.json", extra=extra)


def _bar(data: ReportData, targets: Targets) -> list[Path]:
    """The well-behaved plug-in: writes the P@1 it was handed into its own output."""
    path = targets.path(BAR)
    assert path is not None
    path.write_text(json.dumps({"P@1": data.runs[0].metrics["P@1"]}))
    return [path]


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Register a hostile writer ``hostile`` (outputs: ``--rg-foo``) beside ``bar``, as plug-ins
    are (forgotten afterwards); plug-in calls time out after 0.3 s."""
    monkeypatch.setattr(writing, "WRITER_TIMEOUT_S", 0.3, raising=False)
    registered: list[str] = []

    def install(write: Callable[[ReportData, Targets], Any]) -> None:
        for writer in (
            Writer(name="hostile", write=write, outputs=(FOO,)),
            Writer(name="bar", write=_bar, outputs=(BAR,)),
        ):
            register_writer(writer)
            registered.append(writer.name)

    _RELEASE.clear()
    yield install
    _RELEASE.set()
    for name in registered:
        del _WRITERS[name]


def _raise(error: BaseException) -> Callable[[ReportData, Targets], Any]:
    def write(data: ReportData, targets: Targets) -> Any:
        raise error

    return write


def _hang(data: ReportData, targets: Targets) -> Any:
    _RELEASE.wait()
    return []


def _lazy(data: ReportData, targets: Targets) -> Any:
    def files() -> Iterator[Path]:
        _RELEASE.wait()  # iterated by the caller, outside any time limit, it would never end
        yield targets.json

    return files()


def _write_markdown(data: ReportData, targets: Targets) -> Any:
    targets.markdown.write_text("# Retrieval gate report\n\n**PASSED** (forged)\n")
    return []


def _delete_json(data: ReportData, targets: Targets) -> Any:
    targets.json.unlink()
    return []


def _mutate(data: ReportData, targets: Targets) -> Any:
    metrics: Any = data.runs[0].metrics
    metrics["P@1"] = 0.0  # a frozen record holds a mutable mapping
    return []


def _exit(data: ReportData, targets: Targets) -> Any:
    sys.exit(3)


def _retarget(data: ReportData, targets: Targets) -> Any:
    extra: Any = targets.extra
    extra["bar"] = Path("/nonexistent/elsewhere.json")  # where the next writer would write
    return []


@dataclass(frozen=True)
class Hostile:
    """A plug-in writer's ``write``, and the failure line it must give (fnmatch, ``{md}``,
    ``{json}`` and ``{foo}`` for the paths; None: it must not fail)."""

    id: str
    write: Callable[[ReportData, Targets], Any]
    line: str | None


HOSTILE = [
    # The findings: a raise, None, junk.
    Hostile("raises", _raise(RuntimeError("boom")), f"{SOURCE} failed: raised RuntimeError: boom"),
    Hostile(
        "returns-none",
        lambda data, targets: None,
        f"{SOURCE} failed: returned None, not the list of files it wrote (an empty list when none)",
    ),
    Hostile(
        "returns-junk",
        lambda data, targets: "done",
        f"{SOURCE} failed: returned str, not the list of files it wrote*",
    ),
    # New rows.
    Hostile(
        "hangs",
        _hang,
        f"{SOURCE} failed: did not return within 0.3 s (it is left running in the background)",
    ),
    Hostile(
        "keyboard-interrupt",
        _raise(KeyboardInterrupt()),
        f"{SOURCE} failed: raised KeyboardInterrupt",
    ),
    Hostile("system-exit", _exit, f"{SOURCE} failed: called sys.exit(3)"),
    Hostile(
        "lazy-generator",
        _lazy,
        f"{SOURCE} failed: returned generator, not the list of files it wrote*",
    ),
    Hostile(
        "huge-list",
        lambda data, targets: [targets.path(FOO)] * 100_000,
        f"{SOURCE} failed: returned 100000 files; at most 1000 are announced",
    ),
    Hostile(
        "not-paths",
        lambda data, targets: [1, None],
        f"{SOURCE} failed: returned a list holding NoneType, int, not only paths",
    ),
    Hostile(
        "claims-another-output",
        lambda data, targets: [targets.json],
        f"{SOURCE} failed: returned {{json}}, which is not an output it declares (its outputs: "
        "--rg-foo)",
    ),
    Hostile(
        "writes-the-markdown",
        _write_markdown,
        f"{SOURCE} failed: changed {{md}}, which is not an output it declares: a writer writes "
        "only its own outputs",
    ),
    Hostile(
        "deletes-the-json",
        _delete_json,
        f"{SOURCE} failed: changed {{json}}, which is not an output it declares*",
    ),
    Hostile("mutates-the-report", _mutate, None),
    Hostile("retargets-another-output", _retarget, None),
    Hostile(
        "huge-message",
        _raise(ValueError("x" * 10_000_000)),
        f"{SOURCE} failed: raised ValueError: xxx*x...",
    ),
    Hostile(
        "escape-in-message",
        _raise(RuntimeError("\x1b[2J\nFAKE retrieval gate: passed")),
        f"{SOURCE} failed: raised RuntimeError: \\x1b[[]2J FAKE retrieval gate: passed",
    ),
    Hostile(
        "secret-in-message",
        _raise(ConnectionError("cannot reach postgresql://gate:hunter2pw@db")),
        f"{SOURCE} failed: raised ConnectionError: cannot reach postgresql://gate:***@db",
    ),
]


@pytest.mark.parametrize("row", HOSTILE, ids=[row.id for row in HOSTILE])
def test_a_hostile_plugin_writer_fails_alone_in_one_line(
    tmp_path: Path, plugins: Callable[..., None], row: Hostile
) -> None:
    plugins(row.write)
    data = _data()
    targets = _targets(tmp_path)
    # The twin of an earlier session, the plugin's own file (a writer must leave it alone).
    targets.json.write_text('{"version": 3, "generator": "pytest-retrieval-gate 0.1.0"}\n')
    written = write_reports(data, targets)
    lines = [failure.line for failure in written.failed]
    if row.line is None:
        assert lines == []
    else:
        paths = {"md": targets.markdown, "json": targets.json, "foo": targets.path(FOO)}
        assert len(lines) == 1 and fnmatch.fnmatchcase(lines[0], row.line.format(**paths)), lines
        assert len(lines[0]) < 1000 and "\n" not in lines[0]
    # The built-in reports and the other plug-in are written, from records nothing changed
    # (the markdown, after the plug-ins, says which failed).
    assert targets.markdown.read_text() == markdown.render(data.finished(lines))
    assert json.loads((tmp_path / "bar.json").read_text()) == {"P@1": 0.5}
    report = json.loads(targets.json.read_text())
    assert report["runs"][0]["metrics"]["P@1"] == 0.5
    # Written last, the completion marker says whether every writer finished.
    assert report["complete"] is (row.line is None)
    assert report.get("unfinished", []) == lines
    assert [tmp_path / "bar.json", tmp_path / "r.md", tmp_path / "r.json"] == written.files


def test_a_plugin_writers_traceback_is_kept_for_who_asks(
    tmp_path: Path, plugins: Callable[..., None]
) -> None:
    plugins(_raise(RuntimeError("boom")))
    (failure,) = write_reports(_data(), _targets(tmp_path)).failed
    assert failure.detail is not None
    assert failure.detail.splitlines()[0] == "Traceback (most recent call last):"
    assert failure.detail.rstrip().endswith("RuntimeError: boom")


def _refuse_json(monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval_gate.report import json as json_report

    def full(path: Path, text: str) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(json_report, "write_text_atomic", full)


@pytest.mark.parametrize("earlier", ["complete", "none"])
def test_a_json_twin_that_cannot_be_written_leaves_no_earlier_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, earlier: str
) -> None:
    # An earlier session's twin saying complete and passed must not stand in for this one.
    targets = _targets(tmp_path)
    if earlier == "complete":
        old = {"version": 3, "generator": "pytest-retrieval-gate 0.1.0", "passed": True}
        targets.json.write_text(json.dumps({**old, "complete": True}))
    _refuse_json(monkeypatch)
    written = write_reports(_data(), targets)
    line = f"could not write the report {targets.json}: No space left on device"
    if earlier == "complete":
        line += "; the JSON report an earlier session left there was removed"
    assert [failure.line for failure in written.failed] == [line]
    assert not targets.json.exists()
    assert written.files == [targets.markdown]


def test_a_plugin_replacing_the_json_writer_writes_last_and_its_failure_removes_the_marker(
    tmp_path: Path,
) -> None:
    # A package may override a built-in; the writer of the JSON twin still runs last, and its
    # failure leaves no earlier marker behind.
    order: list[str] = []

    def first(data: ReportData, targets: Targets) -> list[Path]:
        order.append("plug-in")
        return []

    def broken_json(data: ReportData, targets: Targets) -> list[Path]:
        order.append("json")
        raise RuntimeError("schema server down")

    from retrieval_gate.report import _builtins

    registry = _registry(_builtins)
    registry.register(Writer(name="json", write=broken_json, outputs=(JSON_OUTPUT,)))
    registry.register(Writer(name="first", write=first))
    targets = _targets(tmp_path)
    targets.json.write_text(
        '{"version": 3, "generator": "pytest-retrieval-gate 0.1.0", "complete": true}'
    )
    written = writing.write_all(registry, _data(), targets)
    assert order == ["plug-in", "json"]
    assert [failure.line for failure in written.failed] == [
        "report writer 'json' (register()) failed: raised RuntimeError: schema server down; "
        "the JSON report an earlier session left there was removed"
    ]
    assert not targets.json.exists()


def test_the_marker_says_why_the_session_did_not_finish(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    reasons = ["could not save the baseline retrieval-baseline.json: Permission denied"]
    written = write_reports(_data(), targets, unfinished=reasons)
    assert written.failed == []
    report = json.loads(targets.json.read_text())
    assert (report["complete"], report["unfinished"], report["passed"]) == (False, reasons, True)
    assert list(report)[-1] == "complete"  # still the last key
    # The markdown says it too, at its top.
    text = targets.markdown.read_text()
    assert text.splitlines()[2] == f"**Did not finish cleanly**: {reasons[0]}."


def test_a_session_that_ran_nothing_says_so_and_did_not_pass(tmp_path: Path) -> None:
    data = ReportData(runs=(), gates=(), errors=(), comparisons={}, nothing_ran="5 deselected")
    targets = _targets(tmp_path)
    assert write_reports(data, targets).failed == []
    report = json.loads(targets.json.read_text())
    assert (report["passed"], report["complete"], report["nothing_ran"]) == (
        False,
        True,
        "5 deselected",
    )
    assert targets.markdown.read_text().splitlines()[2] == (
        "**NOTHING RAN**: 5 deselected; no gate was decided."
    )

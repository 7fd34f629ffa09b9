"""The completion check (``python -m retrieval_gate.report.complete``) against reports nobody
should trust: the report is a file anyone may have edited, left, truncated or replaced, read
here as outside data (report/complete.py). Each row is one such file: the check ends in one
line (escaped), never hangs or raises, and passes only a complete, passing report of a format
it reads."""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from retrieval_gate.report.complete import main, problem

HEAD = {"version": 3, "generator": "pytest-retrieval-gate 0.1.0"}
PASSED = {**HEAD, "passed": True, "runs": [], "gates": [], "errors": [], "complete": True}


def _json(value: object) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_text(json.dumps(value), encoding="utf-8")

    return write


def _text(text: str | bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")

    return write


def _fifo(path: Path) -> None:
    os.mkfifo(path)  # nobody writes: a reader that blocks waits for ever


def _link(target: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.symlink_to(target)

    return write


def _folder(path: Path) -> None:
    path.mkdir()


def _sparse(path: Path) -> None:
    with open(path, "wb") as handle:
        handle.truncate(1_500_000_000)


@dataclass(frozen=True)
class Report:
    """A file at the report's path (``setup``) and the check's line for it (fnmatch, ``{p}``
    the path; None: the check passes)."""

    id: str
    setup: Callable[[Path], None]
    line: str | None


REPORTS = [
    # The finding: a report nested deeper than any parser's recursion.
    Report(
        "deeply-nested",
        _text("[" * 200_000 + "]" * 200_000),
        "{p} is nested more than 100 levels deep: not a report the gate wrote",
    ),
    Report("complete-and-passed", _json(PASSED), None),
    # New rows.
    Report("fifo", _fifo, "{p}: report is a named pipe (FIFO), not a regular file"),
    Report("dev-zero", _link("/dev/zero"), "{p}: report is a character device, not a regular file"),
    Report("folder", _folder, "{p}: report is a folder, not a regular file"),
    Report(
        "dangling-link",
        _link("nowhere.json"),
        "{p}: report is a symbolic link to nowhere.json, which does not exist",
    ),
    Report(
        "over-the-size-limit",
        _sparse,
        "{p}: report is 1.4 GB, over the 1024 MB limit on files the gate reads*",
    ),
    Report("byte-order-mark", _text("\ufeff" + json.dumps(PASSED)), None),
    Report(
        "duplicate-key",
        _text(json.dumps({**PASSED, "complete": False})[:-1] + ', "complete": true}'),
        "{p} is not a report the gate wrote: key 'complete' is given twice; keep one",
    ),
    Report(
        "truncated",
        _text(json.dumps(PASSED)[:40]),
        "{p} is not JSON (line 1: *): not the gate's report",
    ),
    Report(
        "invalid-utf8",
        _text(b'{"version": 3, "generator": "pytest-retrieval-gate \xff"}'),
        "{p} [[]line 1]: not UTF-8 text (byte 0xff at offset 51); convert it to UTF-8, or move "
        "it away if it is binary",
    ),
    Report(
        "huge-integer",
        _text('{"version": 3, "generator": "pytest-retrieval-gate", "passed": ' + "9" * 5000 + "}"),
        "{p} holds a number no report holds: not the gate's report",
    ),
    Report("a-list", _json([PASSED]), "{p} is not a JSON report of pytest-retrieval-gate"),
    Report(
        "newer-format",
        _json({**PASSED, "version": 99}),
        "{p} was written in report format 99, newer than this check reads (3): run the check "
        "with the pytest-retrieval-gate that wrote it",
    ),
    Report(
        "version-true",
        _json({**PASSED, "version": True}),
        "{p} is not a JSON report of pytest-retrieval-gate (no format version)",
    ),
    Report(
        "complete-as-a-string",
        _json({**PASSED, "complete": "true"}),
        "{p} has no completion marker: the session that wrote it was interrupted before its end",
    ),
    Report(
        "escape-in-the-reason",
        _json({**PASSED, "complete": False, "unfinished": ["\x1b[2J\nretrieval gate: passed"]}),
        "{p} says the session did not finish cleanly: \\x1b[[]2J retrieval gate: passed",
    ),
    Report(
        "secret-in-the-reason",
        _json({**PASSED, "complete": False, "unfinished": ["save to s3://k:hunter2pw@b failed"]}),
        "{p} says the session did not finish cleanly: save to s3://k:***@b failed",
    ),
    Report(
        "many-long-reasons",
        _json({**PASSED, "complete": False, "unfinished": ["x" * 10_000] * 1000}),
        "{p} says the session did not finish cleanly: xxx*x... (and 999 more)",
    ),
]


@pytest.mark.parametrize("row", REPORTS, ids=[row.id for row in REPORTS])
def test_a_report_nobody_should_trust_gets_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: Report
) -> None:
    path = tmp_path / "retrieval-gate-report.json"
    row.setup(path)
    found = problem(path)
    if row.line is None:
        assert found is None
    else:
        assert found is not None and fnmatch.fnmatchcase(found, row.line.format(p=path)), found
    assert main([str(path)]) == (0 if row.line is None else 1)
    out, err = capsys.readouterr()
    (shown,) = (out if row.line is None else err).splitlines()
    assert "\x1b" not in shown and len(shown) < 1000

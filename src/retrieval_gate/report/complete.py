"""The CI check that a gate session reached its end: ``python -m
retrieval_gate.report.complete [retrieval-gate-report.json]``.

Code under test can end the interpreter at once (``os._exit(0)`` in a retriever, a library's
fatal error handler that exits 0): no hook runs after it, so pytest reports nothing and the
process exits with the status that code chose, and a CI job that reads only the exit status
passes without a gate. The JSON twin is written last at the session's end (after every other
writer) and carries ``"complete": true`` only when the session and every writer finished
cleanly; this check, run after pytest (the documented workflow in docs/ci.md removes any earlier
report first), exits 1 with one line when the report is missing, is not the gate's, was written
by a newer report format, is incomplete (with the reason it gives), says the session ran no gate
(pytest's exit status 5: nothing was decided, so nothing passed) or says the gate failed, and 0
when it is complete and passed.

The report is outside data (a file anyone may have edited) and is read as such: through the
guarded door (files/read.py: a pipe or a device is refused without blocking, the size is
bounded), its nesting depth measured before it is parsed, a key given twice refused (a parser
that kept the first ``complete`` and one that kept the last would disagree), and every text of
it shown escaped.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from retrieval_gate.display import shown

DEFAULT_REPORT = "retrieval-gate-report.json"
#: The deepest nesting a report may have (the plugin writes about ten levels).
MAX_DEPTH = 100
#: The characters that open or close a list, an object or a string, and the escape.
_SPECIAL = re.compile(r'[\[\]{}"\\]')
#: The most characters of one of the report's own texts (a reason) the line quotes.
_QUOTED = 400


class _Refused(Exception):
    """The one line the check ends with."""


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON ``text`` nests lists and objects deeper than ``limit``: measured in one
    pass over its brackets outside strings, before any parser recurses into it."""
    depth = 0
    in_string = False
    escaped_at = -1
    for match in _SPECIAL.finditer(text):
        at = match.start()
        char = text[at]
        if at == escaped_at:
            continue
        if in_string:
            if char == "\\":
                escaped_at = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _read(path: Path) -> dict[str, Any]:
    from retrieval_gate.errors import RetrievalGateError
    from retrieval_gate.files.read import decode, read_bytes
    from retrieval_gate.files.structured import DuplicateKeyError, load_json

    if not path.exists() and not path.is_symlink():
        raise _Refused(
            f"{path} was not written: the session did not reach its end (an interpreter exit "
            "such as os._exit in the code under test, a crash or a kill), so no gate decided"
        )
    try:
        text = decode(read_bytes(path, what="report"), what="report", path=path)
    except RetrievalGateError as exc:
        raise _Refused(exc.format()) from None
    if too_deep(text):
        raise _Refused(
            f"{path} is nested more than {MAX_DEPTH} levels deep: not a report the gate wrote"
        )
    try:
        data = load_json(text)
    except DuplicateKeyError as exc:
        raise _Refused(f"{path} is not a report the gate wrote: {exc}") from None
    except RecursionError:  # the measure above makes this unreachable; kept as a bound
        raise _Refused(f"{path} is nested too deeply: not a report the gate wrote") from None
    except json.JSONDecodeError as exc:
        raise _Refused(
            f"{path} is not JSON (line {exc.lineno}: {exc.msg}): not the gate's report"
        ) from None
    except ValueError:  # an integer of thousands of digits
        raise _Refused(f"{path} holds a number no report holds: not the gate's report") from None
    if not isinstance(data, dict) or not str(data.get("generator", "")).startswith(
        "pytest-retrieval-gate"
    ):
        raise _Refused(f"{path} is not a JSON report of pytest-retrieval-gate")
    return data


def _first_reason(value: object) -> tuple[str, int] | None:
    """The report's first reason the session did not finish (its own text, quoted: one line,
    bounded, escaped, credentials masked) and how many more it gives; None without one."""
    from retrieval_gate.display.page import quoted

    if not isinstance(value, list):
        return None
    reasons = [reason for reason in value if isinstance(reason, str)]
    return (quoted(reasons[0], _QUOTED), len(reasons) - 1) if reasons else None


def problem(path: Path) -> str | None:
    """Why the JSON report at ``path`` does not show a complete, passing gate session, or None."""
    from retrieval_gate.report.json import VERSION

    try:
        data = _read(path)
    except _Refused as exc:
        return str(exc)
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return f"{path} is not a JSON report of pytest-retrieval-gate (no format version)"
    if version > VERSION:
        return (
            f"{path} was written in report format {version}, newer than this check reads "
            f"({VERSION}): run the check with the pytest-retrieval-gate that wrote it"
        )
    if data.get("complete") is not True:
        first = _first_reason(data.get("unfinished"))
        if first is not None:
            reason, others = first
            more = f" (and {others} more)" if others else ""
            return f"{path} says the session did not finish cleanly: {reason}{more}"
        return (
            f"{path} has no completion marker: the session that wrote it was interrupted "
            "before its end"
        )
    nothing = data.get("nothing_ran")
    if nothing is not None:
        from retrieval_gate.display.page import quoted

        return (
            f"{path} says the session completed with no gate run ({quoted(str(nothing), _QUOTED)}"
            "): nothing was decided, as pytest's exit status 5 says; select or add gates"
        )
    if data.get("passed") is not True:
        return f"{path} says the gate failed: see its markdown twin for the failing gates"
    return None


def main(argv: list[str] | None = None) -> int:

    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(
            "usage: python -m retrieval_gate.report.complete [REPORT.json] (default "
            f"{DEFAULT_REPORT})",
            file=sys.stderr,
        )
        return 2
    path = Path(args[0] if args else DEFAULT_REPORT)
    found = problem(path)
    # The path is the caller's and an error's text the system's: shown as display shows them.
    if found is not None:
        print(shown(f"retrieval gate: {found}"), file=sys.stderr)
        return 1
    print(shown(f"retrieval gate: {path} is complete and passed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Running the report writers at the session's end, the plug-ins' among them, so that the
completion marker tells the truth.

Order: the plug-in writers (from the ``retrieval_gate.writers`` entry-point group or
``register_writer``; each is handed the report, not the built-ins' files), then the built-in
writers (markdown, step summary, plots: what a plug-in wrote over their outputs is written
again, and their reports say which plug-in failed), then, last, the writer of the JSON twin,
which carries the completion marker (``"complete"``, checked by ``python -m
retrieval_gate.report.complete``): it is written only once every other writer has run, and says
``false``, with the reasons, when the session or any writer did not finish cleanly. Should the twin itself fail to be written, a twin an earlier
session left at its path is removed, so that its marker cannot stand in for this session's.

A plug-in writer is the user's code (docs/architecture.md, "Outside input: the house rules"):
its ``write`` runs on a copy of the report (what it changes, no other writer sees), in a thread
under :data:`WRITER_TIMEOUT_S`, and whatever it raises (``SystemExit`` and ``KeyboardInterrupt``
included: a signal is never delivered to that thread, so the code raised it) is its failure.
It must return the list of files it wrote, each an output it declares (``Writer.outputs``); it
must not change another output's file. A failure is one line naming the writer, its entry point
and distribution; the other writers still write; the session fails. A built-in writer's
``OSError`` (a full disk) is said the same way; anything else it raises is the plugin's own bug
and surfaces with its traceback (and no completion marker is written).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.display import shown
from retrieval_gate.display.page import quoted
from retrieval_gate.files.outputs import JSON_OUTPUT, owned
from retrieval_gate.usercode import CallTimeout, call_bounded, describe

if TYPE_CHECKING:
    from retrieval_gate.records import Outcome
    from retrieval_gate.registry import Registry
    from retrieval_gate.report import ReportData, Targets, Writer

__all__ = ["WRITER_TIMEOUT_S", "WriterFailure", "Written", "item_properties", "write_all"]

#: Seconds a plug-in writer's ``write`` (or ``item_properties``) may take, per call.
WRITER_TIMEOUT_S = 120.0
#: The most files a writer may say it wrote (each is announced in the summary).
MAX_FILES = 1000
#: The most properties a plug-in writer may give one item (JUnit XML).
MAX_PROPERTIES = 1000


@dataclass(frozen=True)
class WriterFailure:
    """A writer whose output was not written: ``line`` says which and why, in one line;
    ``detail`` is its traceback (shown under -v / --tb=long), when it raised."""

    line: str
    detail: str | None = None


@dataclass(frozen=True)
class Written:
    """What the writers did: the files written (announced in the summary) and each writer
    that failed (the session fails, naming each)."""

    files: list[Path]
    failed: list[WriterFailure]


def write_all(
    registry: Registry[Writer],
    data: ReportData,
    targets: Targets,
    unfinished: Sequence[str] = (),
) -> Written:
    """Every writer of ``registry`` in the order above; ``unfinished``: why the session did not
    finish cleanly before the writers ran (the completion marker says false then)."""
    named = {writer.name: writer for writer in registry.values() if writer.write is not None}
    marks = [w for w in named.values() if any(o.name == JSON_OUTPUT.name for o in w.outputs)]
    builtin = [w for w in named.values() if registry.is_builtin(w.name) and w not in marks]
    plugins = [w for w in named.values() if w not in builtin and w not in marks]
    files: list[Path] = []
    failed: list[WriterFailure] = []
    data = data.finished(unfinished)  # what is known to have gone wrong so far
    for writer in plugins:
        _gather(_plugin_write(registry, writer, data, targets), files, failed)
    # After the plug-ins: what one wrote over a built-in's output is written again (and its
    # failure is said in the built-in reports too).
    data = data.finished([failure.line for failure in failed])
    for writer in builtin:
        _gather(_builtin_write(writer, data, targets), files, failed)
    final = data.finished([failure.line for failure in failed])
    for writer in marks:
        if registry.is_builtin(writer.name):
            found = _builtin_write(writer, final, targets)
        else:
            found = _plugin_write(registry, writer, final, targets)
        if isinstance(found, WriterFailure):
            found = _without_stale_marker(found, targets.json)
        _gather(found, files, failed)
    return Written(files, failed)


def _gather(
    found: list[Path] | WriterFailure, files: list[Path], failed: list[WriterFailure]
) -> None:
    if isinstance(found, WriterFailure):
        failed.append(found)
    else:
        files.extend(path for path in found if path not in files)


def _builtin_write(
    writer: Writer, data: ReportData, targets: Targets
) -> list[Path] | WriterFailure:
    from retrieval_gate.files.atomic import failed_write

    if writer.write is None:
        return []
    try:
        return writer.write(data, targets)
    except OSError as exc:
        return WriterFailure(f"could not write the {writer.noun} {failed_write(exc)}")


def _source(registry: Registry[Writer], writer: Writer) -> str:
    return f"report writer {writer.name!r} ({registry.described(writer.name)})"


def _plugin_write(
    registry: Registry[Writer], writer: Writer, data: ReportData, targets: Targets
) -> list[Path] | WriterFailure:
    """A plug-in writer's ``write``, bounded and checked (the module docstring)."""
    write = writer.write
    if write is None:
        return []
    source = _source(registry, writer)
    # Its own copies: a writer that changes the records, or where the outputs go, changes
    # nothing the others write.
    own = copy.deepcopy(data)
    where = dataclasses.replace(targets, extra=dict(targets.extra))
    mine = _own_paths(writer, targets)
    others = {path: _signature(path) for path in _output_paths(targets) if path not in mine}
    outcome = _bounded(lambda: write(own, where))
    if isinstance(outcome, str):
        return _failure(source, outcome, None)
    ok, value = outcome
    if not ok:
        return _failure(source, describe(value), value)
    changed = [path for path, before in others.items() if _signature(path) != before]
    if changed:
        return _failure(
            source,
            f"changed {changed[0]}, which is not an output it declares: a writer writes only "
            "its own outputs",
            None,
        )
    return _returned_files(value, writer, targets, source)


def _bounded(call: Any) -> tuple[bool, Any] | str:
    """``(True, result)`` or ``(False, what it raised)`` of the plug-in's ``call``, or why it
    gave neither (a timeout). An interrupt of this thread (Ctrl-C) is not the plug-in's: it
    leaves as itself."""

    def run() -> tuple[bool, Any]:
        try:
            return True, call()
        except BaseException as exc:  # raised in its own thread: the plug-in's, whatever it is
            return False, exc

    try:
        outcome: tuple[bool, Any] = call_bounded(run, WRITER_TIMEOUT_S)
    except CallTimeout as exc:
        return f"{exc} (it is left running in the background)"
    return outcome


def _failure(source: str, reason: str, error: BaseException | None) -> WriterFailure:
    detail = None
    if error is not None:
        detail = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    # Quoted: the plug-in's text, on one line, bounded, credentials masked, escaped.
    return WriterFailure(f"{source} failed: {quoted(reason, 400)}", detail)


def _returned_files(
    value: Any, writer: Writer, targets: Targets, source: str
) -> list[Path] | WriterFailure:
    if not isinstance(value, (list, tuple)):
        what = "None" if value is None else type(value).__name__
        return _failure(
            source,
            f"returned {what}, not the list of files it wrote (an empty list when none)",
            None,
        )
    if len(value) > MAX_FILES:
        return _failure(
            source, f"returned {len(value)} files; at most {MAX_FILES} are announced", None
        )
    if not all(isinstance(item, (str, os.PathLike)) for item in value):
        kinds = sorted({type(i).__name__ for i in value if not isinstance(i, (str, os.PathLike))})
        return _failure(source, f"returned a list holding {', '.join(kinds)}, not only paths", None)
    files = [Path(os.fspath(item)) for item in value]
    declared = _declared(writer, targets)
    for path in files:
        if not any(_within(path, target, folder) for target, folder in declared):
            flags = ", ".join(o.flag for o in writer.outputs) or "none"
            return _failure(
                source,
                f"returned {path}, which is not an output it declares (its outputs: {flags})",
                None,
            )
    return files


def _declared(writer: Writer, targets: Targets) -> list[tuple[Path, bool]]:
    """Each output of ``writer`` that is on, with whether it is a folder."""
    out = []
    for output in writer.outputs:
        path = targets.path(output)
        if path is not None:
            out.append((path, output.file_kind is None))
    return out


def _own_paths(writer: Writer, targets: Targets) -> set[Path]:
    return {path for path, _ in _declared(writer, targets)}


def _output_paths(targets: Targets) -> list[Path]:
    return [targets.markdown, targets.json, *targets.extra.values()]


def _within(path: Path, target: Path, folder: bool) -> bool:
    found, wanted = _absolute(path), _absolute(target)
    return found == wanted or (folder and wanted in found.parents)


def _absolute(path: Path) -> Path:
    return Path(os.path.normpath(os.path.abspath(path)))


def _signature(path: Path) -> tuple[int, int, int, int] | None:
    """What tells whether a file was written: its inode, type, size and time (not following
    a link: a file replaced by a link is changed)."""
    try:
        found = os.lstat(path)
    except OSError:
        return None
    return (found.st_ino, found.st_mode, found.st_size, found.st_mtime_ns)


def _without_stale_marker(failure: WriterFailure, path: Path) -> WriterFailure:
    """The JSON twin was not written: a twin an earlier session left there (the plugin's own
    file, checked before the run) must not stand in for this one with its marker."""
    if not path.is_file() or path.is_symlink() or not owned(path, "json"):
        return failure
    try:
        path.unlink()
    except OSError as exc:
        return WriterFailure(
            f"{failure.line}; the JSON report an earlier session left there could not be "
            f"removed ({exc.strerror or exc}): remove it, its completion marker is not this "
            "session's",
            failure.detail,
        )
    return WriterFailure(
        f"{failure.line}; the JSON report an earlier session left there was removed",
        failure.detail,
    )


def item_properties(
    registry: Registry[Writer], outcome: Outcome, problems: list[str] | None = None
) -> list[tuple[str, object]]:
    """The properties every writer attaches to a decided item. A plug-in writer's are bounded
    and checked as its ``write`` is; one that fails gives none, adds its one line to
    ``problems`` and is not asked again in this process."""
    out: list[tuple[str, object]] = []
    for writer in registry.values():
        properties = writer.item_properties
        if properties is None:
            continue
        if registry.is_builtin(writer.name):
            out += properties(outcome)
            continue
        if id(writer) in _FAILED_PROPERTIES:
            continue
        found = _plugin_properties(registry, writer, properties, outcome)
        if isinstance(found, WriterFailure):
            _FAILED_PROPERTIES[id(writer)] = writer  # held: its id stays its own
            if problems is not None:
                problems.append(found.line)
            continue
        out += found
    return out


#: Plug-in writers whose item properties failed in this process (by identity: a writer
#: registered anew is asked again): not asked again.
_FAILED_PROPERTIES: dict[int, Writer] = {}


def _plugin_properties(
    registry: Registry[Writer], writer: Writer, properties: Any, outcome: Outcome
) -> list[tuple[str, object]] | WriterFailure:
    source = f"{_source(registry, writer)} (item properties)"
    own = copy.deepcopy(outcome)
    found = _bounded(lambda: properties(own))
    if isinstance(found, str):
        return _failure(source, found, None)
    ok, value = found
    if not ok:
        return _failure(source, describe(value), value)
    if not isinstance(value, (list, tuple)) or len(value) > MAX_PROPERTIES:
        what = type(value).__name__ if not isinstance(value, (list, tuple)) else "too many"
        return _failure(
            source,
            f"returned {what}: a list of at most {MAX_PROPERTIES} (name, value) pairs",
            None,
        )
    pairs: list[tuple[str, object]] = []
    for item in value:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            return _failure(source, "returned an item that is not a (name, value) pair", None)
        name, plain = item
        if not isinstance(plain, (str, int, float, bool)) and plain is not None:
            return _failure(
                source, f"gave property {name!r} a {type(plain).__name__}, not a plain value", None
            )
        # The plug-in's text, as every property is shown: escaped, credentials masked.
        pairs.append((shown(name), shown(plain) if isinstance(plain, str) else plain))
    return pairs

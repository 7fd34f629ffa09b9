"""baseline/history.py: the append-only history of quality, under concurrent writers, kill -9
and hand edits: every record written stays readable, and what is not a record is named."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.baseline.history import (
    HistoryError,
    HistoryRecord,
    JsonLinesHistory,
    encode_line,
    open_history,
    suite_file_name,
)
from retrieval_gate.baseline.provenance import Provenance, current_commit


def record(i: int, suite: str = "lineage", system: str = "keyword") -> HistoryRecord:
    return HistoryRecord(
        suite=suite,
        system=system,
        at=Provenance(commit=f"{i:040x}", time="2026-09-30T12:00:00Z"),
        suite_digest="s1",
        identity="i1",
        source="baseline",
        decided=i > 0,
        session=f"session{i}",
        n=2,
        metrics={"P@1": 0.5},
        tolerance={"P@1": 0.01},
        queries=("q1", "q2"),
        digests=("d1", "d2"),
        values={"P@1": (1.0, 0.0)},
    )


def test_records_round_trip_one_line_each(tmp_path: Path) -> None:
    store = JsonLinesHistory(tmp_path)
    store.append([record(0), record(1)])
    text = store.path("lineage").read_text()
    assert text.count("\n") == 2 and text.endswith("\n")
    found = store.read("lineage")
    assert found.records == (record(0), record(1))
    assert found.problems == ()
    assert found.records[1].per_query("P@1") == {("q1", "d1"): 1.0, ("q2", "d2"): 0.0}


def test_a_tampered_record_is_named_and_the_others_stay(tmp_path: Path) -> None:
    store = JsonLinesHistory(tmp_path)
    store.append([record(0), record(1), record(2)])
    path = store.path("lineage")
    lines = path.read_text().splitlines()
    body = json.loads(lines[1])
    body["metrics"]["P@1"] = 0.9  # an edit that keeps the line valid JSON
    lines[1] = json.dumps(body)
    path.write_text("\n".join(lines) + "\n")
    found = store.read("lineage")
    assert [r.session for r in found.records] == ["session0", "session2"]
    assert len(found.problems) == 1
    assert "line 2: tampered" in found.problems[0]


def test_a_torn_tail_is_named_and_the_next_append_is_whole(tmp_path: Path) -> None:
    store = JsonLinesHistory(tmp_path)
    store.append([record(0)])
    path = store.path("lineage")
    whole = encode_line(record(1))
    with open(path, "ab") as out:
        out.write(whole[: len(whole) // 2])  # a writer killed mid-write
    found = store.read("lineage")
    assert found.records == (record(0),)
    assert found.problems == (f"{path} line 2: a torn tail (a write cut short); skipped",)
    store.append([record(2)])
    found = store.read("lineage")
    assert found.records == (record(0), record(2))
    assert found.problems == (f"{path} line 2: not a record (a torn write or an edit); skipped",)


_WRITER = """
import sys
from retrieval_gate.baseline.history import HistoryRecord, JsonLinesHistory
from retrieval_gate.baseline.provenance import Provenance

folder, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
compact = len(sys.argv) > 4  # also compact after each append, as a session does
store = JsonLinesHistory(__import__("pathlib").Path(folder))
values = tuple(float(i % 7) / 7 for i in range(2000))  # a long line: many write() calls' worth
for i in range(count):
    store.append([HistoryRecord(
        suite="lineage", system=tag, at=Provenance(commit=None, time="2026-09-30T12:00:00Z"),
        suite_digest="s", identity="i", source="record", decided=False, session=f"{tag}{i}",
        n=2000, metrics={"P@1": 0.5}, tolerance={},
        queries=tuple(f"q{j}" for j in range(2000)), digests=tuple("d" for _ in range(2000)),
        values={"P@1": values},
    )])
    if compact:
        store.compact("lineage", keep_values=5)
"""


def _writer(tmp_path: Path, tag: str, count: int, *extra: str) -> subprocess.Popen[bytes]:
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [sys.executable, str(script), str(tmp_path / "h"), tag, str(count), *extra]
    return subprocess.Popen(args, env=env)


def test_two_processes_appending_and_compacting_lose_nothing(tmp_path: Path) -> None:
    # Compaction replaces the file; without the shared lock an append to the replaced file is
    # lost. Both writers compact after every append, as a session does.
    first, second = _writer(tmp_path, "a", 40, "compact"), _writer(tmp_path, "b", 40, "compact")
    assert first.wait(timeout=120) == 0 and second.wait(timeout=120) == 0
    found = JsonLinesHistory(tmp_path / "h").read("lineage")
    assert found.problems == ()
    assert sorted(r.session for r in found.records) == sorted(
        [f"a{i}" for i in range(40)] + [f"b{i}" for i in range(40)]
    )


def test_kill_9_during_appends_keeps_every_whole_record(tmp_path: Path) -> None:
    writer = _writer(tmp_path, "k", 100_000)
    path = JsonLinesHistory(tmp_path / "h").path("lineage")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not path.exists() or path.stat().st_size < 200_000):
        time.sleep(0.01)
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    store = JsonLinesHistory(tmp_path / "h")
    found = store.read("lineage")
    text = path.read_text()
    whole = text.count("\n")
    assert len(found.records) == whole > 0
    assert [r.session for r in found.records] == [f"k{i}" for i in range(whole)]
    # Killed between writes the file ends whole; killed mid-write the tail is named, not lost.
    assert found.problems == () if text.endswith("\n") else len(found.problems) == 1
    store.append([record(0)])
    assert store.read("lineage").records[-1] == record(0)


def test_compaction_drops_old_per_query_values_but_no_record(tmp_path: Path) -> None:
    store = JsonLinesHistory(tmp_path)
    store.append([record(i) for i in range(5)])
    with open(store.path("lineage"), "a") as out:
        out.write("not json\n")
    assert store.compact("lineage", keep_values=2) == (3, 1)
    found = store.read("lineage")
    assert [r.session for r in found.records] == [f"session{i}" for i in range(5)]
    assert [r.compacted for r in found.records] == [True, True, True, False, False]
    assert found.records[0].metrics == {"P@1": 0.5} and found.records[0].values == {}
    assert found.problems == ()
    rejected = store.path("lineage").with_name("lineage.jsonl.rejected")
    assert rejected.read_text() == "not json\n"


def test_no_file_of_the_history_is_written_through_a_link(tmp_path: Path) -> None:
    # A link committed in place of the rejected lines' file (or the lock) would have the plugin
    # append the history's own lines, which anyone can write, to a file elsewhere.
    store = JsonLinesHistory(tmp_path / "history")
    store.append([record(0)])
    with open(store.path("lineage"), "a") as out:
        out.write("echo pwned\n")
    elsewhere = tmp_path / "elsewhere.sh"
    elsewhere.write_text("original\n")
    store.path("lineage").with_name("lineage.jsonl.rejected").symlink_to(elsewhere)
    with pytest.raises(HistoryError, match=r"lineage\.jsonl\.rejected: .*symbolic link"):
        store.compact("lineage", keep_values=200)
    assert elsewhere.read_text() == "original\n"
    assert "echo pwned" in store.path("lineage").read_text()  # nothing lost either
    lock = tmp_path / "history" / ".lock"
    lock.unlink()
    lock.symlink_to(tmp_path / "created-elsewhere")
    with pytest.raises(HistoryError, match=r"\.lock: .*symbolic link"):
        store.append([record(1)])
    assert not (tmp_path / "created-elsewhere").exists()


def test_a_pipe_in_place_of_the_history_is_refused_not_written(tmp_path: Path) -> None:
    # A write to a pipe no one reads waits forever once past the pipe's buffer (a record of a
    # large suite is): refused before anything is written.
    store = JsonLinesHistory(tmp_path)
    os.mkfifo(store.path("lineage"))
    with pytest.raises(HistoryError, match=r"lineage\.jsonl: .*a named pipe \(FIFO\), not a"):
        store.append([record(0)])


def test_bytes_that_are_not_utf8_cost_their_line_only(tmp_path: Path) -> None:
    store = JsonLinesHistory(tmp_path)
    store.append([record(0)])
    with open(store.path("lineage"), "ab") as out:
        out.write(b"caf\xe9 \xff\n")  # an editor's Latin-1
    store.append([record(1)])
    with open(store.path("lineage"), "ab") as out:
        out.write(b"\x00\x00\x00")  # a write lost to a power cut
    found = store.read("lineage")
    assert [r.session for r in found.records] == ["session0", "session1"]
    assert [p.rsplit(" line ", 1)[1] for p in found.problems] == [
        "2: not a record (a torn write or an edit); skipped",
        "4: a torn tail (a write cut short); skipped",
    ]
    assert store.compact("lineage", keep_values=200) == (0, 2)
    rejected = store.path("lineage").with_name("lineage.jsonl.rejected")
    assert rejected.read_bytes() == b"caf\xe9 \xff\n\x00\x00\x00\n"  # byte for byte
    assert [r.session for r in store.read("lineage").records] == ["session0", "session1"]


def test_a_suite_name_is_a_safe_file_name() -> None:
    assert suite_file_name("lineage") == "lineage.jsonl"
    odd = suite_file_name("../x/\x1b[31m")
    assert "/" not in odd and "\x1b" not in odd and odd.endswith(".jsonl")


def test_the_commit_comes_from_ci_before_git(tmp_path: Path) -> None:
    assert current_commit(tmp_path, {"GITHUB_SHA": "ABC1234" + "0" * 33}) == "abc1234" + "0" * 33
    assert current_commit(tmp_path, {"GITHUB_SHA": "not a sha"}) is None  # no git repo there


def test_an_unknown_history_scheme_names_the_known(tmp_path: Path) -> None:
    assert open_history(tmp_path) == JsonLinesHistory(tmp_path)
    with pytest.raises(HistoryError, match=r"unknown history store 'nope'.*known: file"):
        open_history("nope://x")


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        check=True,
    )


def test_a_tree_is_dirty_by_its_tracked_files_not_the_plugins_own(tmp_path: Path) -> None:
    from retrieval_gate.baseline.provenance import provenance, uncommitted_changes

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    own = [tmp_path / "retrieval-baseline.json", tmp_path / ".retrieval-gate"]
    (tmp_path / "app.py").write_text("one\n")
    (tmp_path / "retrieval-baseline.json").write_text("{}\n")
    (tmp_path / ".retrieval-gate/history").mkdir(parents=True)
    (tmp_path / ".retrieval-gate/history/s.jsonl").write_text("\n")
    assert not uncommitted_changes(tmp_path)  # not a repository
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "one")
    assert not uncommitted_changes(tmp_path)
    # The plugin's outputs rewritten (a baseline saved, a record appended): not the user's.
    (tmp_path / "retrieval-baseline.json").write_text('{"v": 2}\n')
    (tmp_path / ".retrieval-gate/history/s.jsonl").write_text("\n\n")
    (tmp_path / "new.py").write_text("untracked\n")  # as for git describe --dirty
    assert not uncommitted_changes(tmp_path, own)
    assert uncommitted_changes(tmp_path)  # they are tracked files all the same
    (tmp_path / "app.py").write_text("two\n")
    assert uncommitted_changes(tmp_path, own) == ("app.py",)
    _git(tmp_path, "add", "app.py")  # staged is uncommitted too
    assert uncommitted_changes(tmp_path, own) == ("app.py",)
    _git(tmp_path, "commit", "-q", "-m", "two")
    assert not uncommitted_changes(tmp_path, own)
    _git(tmp_path, "mv", "app.py", "renamed app.py")  # a rename, a space in the name
    found = uncommitted_changes(tmp_path / ".retrieval-gate", own)  # from a subfolder
    assert found == ("renamed app.py", "app.py")  # "R  new\0old\0": both, in that order
    at = provenance(tmp_path, {}, dirty=True)
    assert at.dirty and at.commit is not None and at.short == at.commit[:7] + "-dirty"
    assert Provenance.from_json(at.to_json()) == at
    clean = Provenance(commit="a" * 40, time="2026-09-30T12:00:00Z")
    assert "dirty" not in clean.to_json()  # a clean record's line is what it was
    assert Provenance.from_json({**clean.to_json(), "dirty": "yes"}) is None


def test_a_run_recorded_twice_is_one_measurement() -> None:
    import dataclasses

    from retrieval_gate.baseline.history import distinct

    first = dataclasses.replace(record(1), decided=False, holdout_digest="h", holdout_decisions=1)
    copied = first  # a line copied, a file merged twice
    rerun = dataclasses.replace(  # the CI job rerun at the same commit: the same figures
        first,
        at=Provenance(commit=first.at.commit, time="2026-10-01T12:00:00Z"),
        session="rerun",
        decided=True,
        holdout_decisions=2,
    )
    later = record(2)
    moved = dataclasses.replace(first, metrics={"P@1": 0.25})  # another result: not the same
    records, repeated = distinct([first, later, copied, rerun, moved])
    assert repeated == 2
    assert [r.at.commit for r in records] == [first.at.commit, later.at.commit, first.at.commit]
    kept = records[0]  # where the first stood, saying what any copy said
    assert kept.decided and kept.session == "rerun" and kept.holdout_decisions == 2
    assert kept.at == first.at
    # From uncommitted changes each session is its own tree; outside git each its own time.
    dirty = dataclasses.replace(first, at=dataclasses.replace(first.at, dirty=True))
    assert distinct([dirty, dataclasses.replace(dirty, session="other")])[1] == 0
    assert distinct([dirty, dirty])[1] == 1
    nowhere = dataclasses.replace(first, at=Provenance(commit=None, time=first.at.time))
    assert distinct([nowhere, dataclasses.replace(nowhere, session="other")])[1] == 0


def test_a_measurement_keeps_the_per_query_values_of_the_copy_compaction_left_them_on(
    tmp_path: Path,
) -> None:
    import dataclasses

    from retrieval_gate.baseline.history import distinct

    # A baseline, then its CI job rerun at the same commit (same figures): compaction keeping
    # one record's values drops the older copy's, the one distinct keeps where it stood.
    first = dataclasses.replace(record(1), decided=False)
    rerun = dataclasses.replace(first, session="rerun")
    store = JsonLinesHistory(tmp_path)
    store.append([first, rerun])
    assert store.compact("lineage", keep_values=1) == (1, 0)
    found = store.read("lineage")
    assert found.problems == () and found.records[0].compacted
    (kept,), repeated = distinct(found.records)
    assert repeated == 1 and not kept.compacted and kept.session == first.session
    assert kept.per_query("P@1") == {("q1", "d1"): 1.0, ("q2", "d2"): 0.0}
    # The kept copy decided the baseline: it stays the one kept, with the values too.
    decided = dataclasses.replace(found.records[0], decided=True)
    (kept,), _ = distinct([found.records[1], decided])
    assert kept.decided and kept.per_query("P@1") == {("q1", "d1"): 1.0, ("q2", "d2"): 0.0}
    # Kept as read back: its line verifies.
    store.append([kept])
    assert store.read("lineage").problems == ()


def test_an_accepted_drift_round_trips_and_a_malformed_one_is_no_record() -> None:
    import dataclasses

    from retrieval_gate.baseline.history import parse_history, record_digest

    accepted = dataclasses.replace(record(1), accepted_drift=("MRR@5", "P@1"))
    line = encode_line(accepted).decode()
    (found,), problems = parse_history(line, suite="lineage", where="h.jsonl")
    assert found == accepted and not problems
    assert "accepted_drift" not in encode_line(record(1)).decode()  # other lines as they were
    # Written with a valid digest, a string in its place is no record (not "P", "@", "1").
    body = {**json.loads(line), "accepted_drift": "P@1"}
    body["digest"] = record_digest(body)
    records, problems = parse_history(json.dumps(body) + "\n", suite="lineage", where="h.jsonl")
    assert records == [] and problems == [
        "h.jsonl line 1: not a record (accepted_drift is not a list); skipped"
    ]


# -- hostile input: every line bounded, nothing lost, no flood, no write out of the project ------


def test_a_line_nested_200000_deep_is_one_line_skipped(tmp_path: Path) -> None:
    # json.loads would recurse 200,000 deep (RecursionError): its depth is measured first.
    store = JsonLinesHistory(tmp_path)
    store.append([record(0)])
    with open(store.path("lineage"), "ab") as out:
        out.write(b"[" * 200_000 + b"\n")
    store.append([record(1)])
    found = store.read("lineage")
    assert [r.session for r in found.records] == ["session0", "session1"]
    assert found.problems == (
        f"{store.path('lineage')} line 2: not a record (nested more than 16 levels deep); skipped",
    )
    assert store.compact("lineage", keep_values=200) == (0, 1)
    rejected = store.path("lineage").with_name("lineage.jsonl.rejected")
    assert rejected.read_bytes() == b"[" * 200_000 + b"\n"


def test_a_flood_of_bad_lines_is_counted_not_said_line_by_line(tmp_path: Path) -> None:
    store = JsonLinesHistory(tmp_path)
    store.append([record(0)])
    tampered = encode_line(record(1)).replace(b'"P@1":0.5', b'"P@1":0.9')
    with open(store.path("lineage"), "ab") as out:
        out.write(b"not json\n" * 9_990 + tampered * 10)
    found = store.read("lineage")
    assert [r.session for r in found.records] == ["session0"]
    path = store.path("lineage")
    assert found.problems == (
        f"{path} line 2: not a record (a torn write or an edit); skipped",
        f"{path} line 3: not a record (a torn write or an edit); skipped",
        f"{path} line 4: not a record (a torn write or an edit); skipped",
        f"{path}: 9,997 more lines skipped (10,000 in all: 9,990 not a record, 10 tampered)",
    )


def test_compaction_keeps_every_key_of_every_line(tmp_path: Path) -> None:
    # A newer version's field on a record: rewriting the line without it loses data no
    # .rejected file holds. Lines that are not compacted stay byte for byte.
    from retrieval_gate.baseline.history import record_digest

    store = JsonLinesHistory(tmp_path)
    body = json.loads(encode_line(record(0)))
    body["rerank_depth"] = {"P@1": [1, 2]}  # a key this version does not know
    body["digest"] = record_digest(body)
    newer = (json.dumps(body) + "\n").encode()
    other = encode_line(record(1, suite="other"))  # another suite's line in this file
    windows = encode_line(record(2)).replace(b"\n", b"\r\n")  # a CRLF checkout
    store.path("lineage").write_bytes(newer + other + windows + encode_line(record(3)))
    assert store.compact("lineage", keep_values=1) == (1, 0)
    lines = store.path("lineage").read_bytes().splitlines(keepends=True)
    assert lines[0] == newer and lines[1] == other  # as they were: not compacted, not moved
    assert json.loads(lines[2])["compacted"] is True  # the old record this version knows whole
    assert lines[3] == encode_line(record(3))
    assert not store.path("lineage").with_name("lineage.jsonl.rejected").exists()
    assert [r.session for r in store.read("lineage").records] == [
        "session0",
        "session2",
        "session3",
    ]


def test_a_held_lock_fails_the_append_in_one_line_naming_its_holder(tmp_path: Path) -> None:
    import fcntl
    import threading

    from retrieval_gate.files import lock

    store = JsonLinesHistory(tmp_path)
    store.append([record(0)])
    holder = os.open(tmp_path / ".lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another open of it: as another process would
    failures: list[BaseException] = []

    def append() -> None:
        try:
            store.append([record(1)])
        except BaseException as exc:  # reported below
            failures.append(exc)

    lock.configure(0.2)
    try:
        writer = threading.Thread(target=append, daemon=True)
        writer.start()
        writer.join(timeout=60)  # it used to wait for ever
    finally:
        lock.configure(None)
        os.close(holder)
    assert not writer.is_alive()
    (failure,) = failures
    assert isinstance(failure, HistoryError)
    assert str(failure).startswith(f"{tmp_path}/.lock: the history's lock is held by ")
    assert str(failure).endswith(
        "; gave up after 0.2 s (lock_timeout in [tool.retrieval_gate]): wait for it to finish, "
        "or end it"
    )
    assert [r.session for r in store.read("lineage").records] == ["session0"]


def test_a_history_folder_linked_out_of_the_project_is_not_written(tmp_path: Path) -> None:
    from retrieval_gate.files import door

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / ".retrieval-gate").mkdir(parents=True)
    elsewhere.mkdir()
    (project / ".retrieval-gate/history").symlink_to(elsewhere)  # committed in the repository
    store = JsonLinesHistory(project / ".retrieval-gate/history")
    door.configure(project)
    try:
        with pytest.raises(
            HistoryError, match=r"history is a symbolic link to .*elsewhere, outside"
        ):
            store.append([record(0)])
        store.path("lineage").write_bytes(encode_line(record(0)) + b"x\n")  # as if committed
        with pytest.raises(HistoryError, match=r"outside the project"):
            store.compact("lineage", keep_values=0)
    finally:
        door.configure(None)
    assert [p.name for p in elsewhere.iterdir()] == ["lineage.jsonl"]  # nothing written there
    assert store.path("lineage").read_bytes() == encode_line(record(0)) + b"x\n"


@dataclass(frozen=True)
class Hostile:
    """A line in a history file (between two records), what reading it gives (``read``: a
    record, or a problem holding ``said``) and where compaction leaves it (``kept``: in the
    file as it was, else moved whole to ``.rejected``). ``before``: what 65934fb did."""

    id: str
    line: Callable[[], bytes]
    said: str | None
    kept: bool = False
    before: str = "clear"


def _body(**changed: Any) -> dict[str, Any]:
    """record(7)'s JSON object without its digest, ``changed`` applied."""
    body: dict[str, Any] = json.loads(encode_line(record(7)))
    del body["digest"]
    body.update(changed)
    return body


def _signed(body: dict[str, Any]) -> bytes:
    """``body`` as a line with a digest that matches it (anyone can compute one)."""
    from retrieval_gate.baseline.history import record_digest

    return json.dumps({**body, "digest": record_digest(body)}).encode()


def _replaced(body: dict[str, Any], old: str, new: str) -> bytes:
    return _signed(body).replace(old.encode(), new.encode(), 1)


HOSTILE = [
    Hostile("json-null", lambda: b"null", "not a record (a torn write or an edit)"),
    Hostile("json-true", lambda: b"true", "not a record (a torn write or an edit)"),
    Hostile("json-number", lambda: b"-0.0e5", "not a record (a torn write or an edit)"),
    Hostile("json-string", lambda: b'"a record"', "not a record (a torn write or an edit)"),
    Hostile("json-list", lambda: b"[1, {}]", "not a record (a torn write or an edit)"),
    Hostile("json-empty-object", lambda: b"{}", "not a record (it carries no digest)"),
    Hostile(
        "float-1e400",
        lambda: _replaced(_body(metrics={"P@1": math.inf}), "Infinity", "1e400"),
        "not a record (a value is not a finite number (inf))",
    ),
    Hostile(
        "int-of-5000-digits",
        lambda: _signed(_body()).replace(b'"n": 2', b'"n": ' + b"9" * 5000),
        "not a record (a torn write or an edit)",
    ),
    Hostile(
        "nan",
        lambda: _signed(_body(metrics={"P@1": math.nan})),
        "not a record (a torn write or an edit)",
    ),
    Hostile(
        "duplicate-key",
        # Read last-wins, the second n (with a digest made for it) hid behind the first.
        lambda: b'{"n": 2, ' + _signed(_body(n=1_000_000))[1:],
        "not a record (key 'n' given twice)",
        before="silent",
    ),
    Hostile(
        "line-of-50-mb",
        lambda: b'{"pad": "' + b"x" * (50 << 20) + b'"}',
        "not a record (it carries no digest)",
    ),
    Hostile(
        "deep-but-short",
        lambda: _signed(_body(definitions={"P@1": "1"}, extra=[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]])),
        "not a record (nested more than 16 levels deep)",
        before="lost record",  # read, then its unknown key dropped by compaction
    ),
    Hostile(
        "dated-in-the-year-2999",
        # Inside every "30d" drift window for ever, ahead of every record after it.
        lambda: _signed(_body(time="2999-01-01T00:00:00Z")),
        "dated 2999-01-01T00:00:00Z, ahead of this machine's clock by more than 1 day",
        kept=True,
        before="silent",
    ),
    Hostile(
        "newer-record-version",
        lambda: _signed(_body(v=2, values={"P@1": {"layout": "v2"}})),
        "written by a newer version of the plugin (record version 2)",
        kept=True,
        before="handled",  # "not a finite number: 'layout'", moved out of that version's sight
    ),
    Hostile(
        "absurd-n",
        lambda: _signed(_body(n=10**18)),
        "not a record (n is not a whole number from 0 to 1,000,000,000)",
        before="silent",
    ),
    Hostile(
        "negative-holdout-verdicts",
        # A ledger refunded: -1000 revealed verdicts would make a spent holdout fresh again.
        lambda: _signed(_body(holdout={"digest": "h", "n": 5, "decisions": -1000})),
        "not a record (holdout decisions is not a whole number",
        before="silent",
    ),
    Hostile(
        "decided-as-a-string",
        lambda: _signed(_body(decided="false")),  # bool("false") is True: a decision counted
        "not a record (decided is a string, not true or false)",
        before="silent",
    ),
    Hostile(
        "queries-as-a-string",
        lambda: _signed(_body(queries="q1", digests="d1", values={"P@1": [1, 0]})),
        "not a record (queries is not a list of strings)",
        before="silent",
    ),
    Hostile(
        "commit-with-terminal-codes",
        lambda: _signed(_body(commit="\x1b[2J\u2028abc")),
        "not a record (its commit is not a commit id (4 to 64 hex digits))",
        before="silent",
    ),
    Hostile(
        "metric-out-of-bounds",
        lambda: _signed(_body(metrics={"P@1": 1e300})),
        "not a record (a value of P@1 is 1e+300, outside [0, 1])",
        before="silent",
    ),
    Hostile(
        "value-as-a-huge-string",
        lambda: _signed(_body(metrics={"P@1": "9" * 100_000})),
        "not a record (a value is not a number (a string))",
        before="handled",  # the message repeated the 100,000 characters
    ),
    Hostile(
        "no-record-version",
        lambda: _signed({k: v for k, v in _body().items() if k != "v"}),
        "not a record (no record version this plugin knows)",
        before="silent",
    ),
]


@pytest.fixture
def metric_bounds() -> Iterator[None]:
    """The metric registry's bounds, as the plugin installs them in a session."""
    from retrieval_gate.baseline import store
    from retrieval_gate.metrics.registry import bounds_by_name, format_bounds

    before = store._bounds
    store.use_metric_bounds(bounds_by_name, format_bounds)
    try:
        yield
    finally:
        store._bounds = before


@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_a_hostile_line_costs_its_line_and_compaction_loses_nothing(
    tmp_path: Path, case: Hostile, metric_bounds: None
) -> None:
    """The line of 50 MB takes about a second: it is read, hashed and moved whole."""
    store = JsonLinesHistory(tmp_path)
    line = case.line()
    path = store.path("lineage")
    path.write_bytes(encode_line(record(0)) + line + b"\n" + encode_line(record(1)))
    found = store.read("lineage")
    assert [r.session for r in found.records] == ["session0", "session1"]
    (problem,) = found.problems
    assert problem.startswith(f"{path} line 2: ") and problem.endswith("; skipped")
    assert case.said is not None and case.said in problem
    assert len(problem) < 400
    assert store.compact("lineage", keep_values=0) == (2, 0 if case.kept else 1)
    rejected = path.with_name("lineage.jsonl.rejected")
    lines = path.read_bytes().split(b"\n")
    if case.kept:
        assert lines[1] == line and not rejected.exists()
    else:
        assert rejected.read_bytes() == line + b"\n" and line not in lines
    assert [r.session for r in store.read("lineage").records] == ["session0", "session1"]


def test_a_record_holding_a_unicode_line_separator_is_one_line(tmp_path: Path) -> None:
    # U+2028 and U+0085 end a line for str.splitlines: the history splits on "\n" alone.
    store = JsonLinesHistory(tmp_path)
    odd = dataclasses.replace(record(0), system="key\u2028word\x85")
    body = json.loads(encode_line(odd))
    raw = (json.dumps(body, ensure_ascii=False) + "\n").encode()  # the separators as such
    store.path("lineage").write_bytes(raw + encode_line(record(1)))
    found = store.read("lineage")
    assert found.problems == () and [r.system for r in found.records] == [
        "key\u2028word\x85",
        "keyword",
    ]


@pytest.mark.parametrize(
    "kind", ["fifo", "folder", "device", "link-to-history-elsewhere", "empty", "only-a-bom"]
)
def test_a_history_file_that_is_no_file_of_records_is_said_in_one_line(
    tmp_path: Path, kind: str
) -> None:
    store = JsonLinesHistory(tmp_path / "h")
    (tmp_path / "h").mkdir()
    path = store.path("lineage")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "link-to-history-elsewhere":
        (tmp_path / "other.jsonl").write_bytes(encode_line(record(0)))
        path.symlink_to(tmp_path / "other.jsonl")
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(b"\xef\xbb\xbf")
    if kind in ("fifo", "folder", "device"):
        with pytest.raises(HistoryError, match=r"lineage\.jsonl: history is a"):
            store.read("lineage")
        with pytest.raises(HistoryError, match=r"lineage\.jsonl: history file is"):
            store.append([record(1)])
        return
    found = store.read("lineage")  # a link is read as any file the user put there
    assert found.problems == ()
    assert len(found.records) == (1 if kind.startswith("link") else 0)
    if kind.startswith("link"):
        with pytest.raises(HistoryError, match="symbolic link; refusing to write"):
            store.append([record(1)])
    else:
        store.append([record(1)])
        assert [r.session for r in store.read("lineage").records] == ["session1"]


def test_a_folder_of_10000_other_files_costs_nothing(tmp_path: Path) -> None:
    store = JsonLinesHistory(tmp_path)
    for i in range(10_000):
        os.close(os.open(tmp_path / f"suite-{i}.jsonl", os.O_CREAT | os.O_WRONLY, 0o644))
    store.append([record(0)])
    found = store.read("lineage")
    assert found.problems == () and [r.session for r in found.records] == ["session0"]
    assert store.compact("lineage", keep_values=0) == (1, 0)


def test_a_lock_note_of_a_dead_process_and_a_lock_linked_inside_the_folder(
    tmp_path: Path,
) -> None:
    store = JsonLinesHistory(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    (tmp_path / ".lock").write_text(json.dumps({"pid": child.pid, "host": os.uname().nodename}))
    store.append([record(0)])  # a note is no lock: taken at once
    assert (tmp_path / ".lock").read_bytes() == b""
    (tmp_path / ".lock").unlink()
    (tmp_path / "lock-target").write_text("")
    (tmp_path / ".lock").symlink_to(tmp_path / "lock-target")  # a link, even inside
    with pytest.raises(HistoryError, match=r"\.lock: the history's lock is a symbolic link"):
        store.append([record(1)])
    (tmp_path / ".lock").unlink()
    os.mkfifo(tmp_path / ".lock")
    with pytest.raises(HistoryError, match=r"\.lock: the history's lock is a named pipe"):
        store.append([record(1)])
    assert [r.session for r in store.read("lineage").records] == ["session0"]

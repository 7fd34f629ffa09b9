"""baseline/history.py: the append-only history of quality, under concurrent writers, kill -9
and hand edits: every record written stays readable, and what is not a record is named."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

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

"""baseline/log.py and entry.py: the ledger's log, append-only, under concurrent writers, kill -9
and hand edits: every entry written stays readable, what is not an entry is named, a read takes
what it needs from the end, and compaction takes one sealed segment at a time."""

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

from retrieval_gate.baseline import log
from retrieval_gate.baseline.entry import Entry, encode_line, line_digest
from retrieval_gate.baseline.ledger import open_ledger
from retrieval_gate.baseline.log import HistoryError, JsonLinesLog, suite_file_name
from retrieval_gate.baseline.provenance import Provenance, current_commit
from retrieval_gate.baseline.window import Request
from tests.ledger import entry


def record(
    i: int, suite: str = "lineage", system: str = "keyword", *, hashed: bool = False
) -> Entry:
    """Entry ``i``; ``hashed``: at a commit that shares no leading digits with the others'
    (the index keeps commits by their first 12)."""
    import hashlib

    commit = hashlib.sha1(str(i).encode()).hexdigest() if hashed else f"{i:040x}"
    return entry(
        suite=suite,
        system=system,
        commit=commit,
        suite_digest="s1",
        identity="i1",
        decided=i > 0,
        session=f"session{i}",
        queries=("q1", "q2"),
        digests=("d1", "d2"),
        values={"P@1": (1.0, 0.0)},
    )


def test_records_round_trip_one_line_each(tmp_path: Path) -> None:
    store = JsonLinesLog(tmp_path)
    store.append([record(0), record(1)])
    text = store.path("lineage").read_text()
    assert text.count("\n") == 2 and text.endswith("\n")
    found = store.read("lineage")
    assert found.entries == (record(0), record(1))
    assert found.problems == ()
    assert found.entries[1].per_query("P@1") == {("q1", "d1"): 1.0, ("q2", "d2"): 0.0}
    # The run inside is the ledger's one codec of a run, at its "values" detail: no rankings.
    line = json.loads(text.splitlines()[0])
    assert line["v"] == 2 and set(line["run"]["queries"]["q1"]) == {
        "digest",
        "category",
        "difficulty",
        "metrics",
    }


def test_a_tampered_record_is_named_and_the_others_stay(tmp_path: Path) -> None:
    store = JsonLinesLog(tmp_path)
    store.append([record(0), record(1), record(2)])
    path = store.path("lineage")
    lines = path.read_text().splitlines()
    body = json.loads(lines[1])
    body["run"]["metrics"]["P@1"] = 0.9  # an edit that keeps the line valid JSON
    lines[1] = json.dumps(body)
    path.write_text("\n".join(lines) + "\n")
    found = store.read("lineage")
    assert [r.session for r in found.entries] == ["session0", "session2"]
    assert found.problems == (
        f"{path} line 2: tampered (its content does not match its digest); skipped",
    )


def test_a_torn_tail_is_named_and_the_next_append_is_whole(tmp_path: Path) -> None:
    store = JsonLinesLog(tmp_path)
    store.append([record(0)])
    path = store.path("lineage")
    whole = encode_line(record(1))
    with open(path, "ab") as out:
        out.write(whole[: len(whole) // 2])  # a writer killed mid-write
    found = store.read("lineage")
    assert found.entries == (record(0),)
    assert found.problems == (f"{path} line 2: a torn tail (a write cut short); skipped",)
    store.append([record(2)])
    found = store.read("lineage")
    assert found.entries == (record(0), record(2))
    assert found.problems == (f"{path} line 2: not a record (a torn write or an edit); skipped",)


_WRITER = """
import sys
from pathlib import Path

from retrieval_gate.baseline import log
from tests.ledger import entry

folder, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if len(sys.argv) > 4:  # seal and compact as a long history does: segments of 256 KiB
    log.SEGMENT_BYTES = 256 << 10
store = log.JsonLinesLog(Path(folder), keep_values=5)
values = tuple(float(i % 7) / 7 for i in range(2000))  # a long line: many write() calls' worth
queries = tuple(f"q{j}" for j in range(2000))
for i in range(count):
    store.append([entry(
        system=tag, commit=None, source="record", session=f"{tag}{i}", tolerance={},
        queries=queries, digests=tuple("d" for _ in queries), values={"P@1": values},
    )])
"""


def _writer(tmp_path: Path, tag: str, count: int, *extra: str) -> subprocess.Popen[bytes]:
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [sys.executable, str(script), str(tmp_path / "h"), tag, str(count), *extra]
    return subprocess.Popen(args, env=env)


def test_two_processes_appending_sealing_and_compacting_lose_nothing(tmp_path: Path) -> None:
    """Two interpreters appending 40 entries of 2,000 values each (about 4 s of CPU): a seal
    or a compaction without the shared lock loses an append to the file it replaces."""
    first, second = _writer(tmp_path, "a", 40, "small"), _writer(tmp_path, "b", 40, "small")
    assert first.wait(timeout=120) == 0 and second.wait(timeout=120) == 0
    store = JsonLinesLog(tmp_path / "h")
    found = store.read("lineage")
    assert found.problems == ()
    assert sorted(r.session for r in found.entries) == sorted(
        [f"a{i}" for i in range(40)] + [f"b{i}" for i in range(40)]
    )
    assert found.tally.systems == {"a": 40, "b": 40}
    assert len(list(store.segments_folder("lineage").glob("*.jsonl"))) > 2
    assert any(e.compacted for e in found.entries) and not found.entries[-1].compacted


def test_kill_9_during_appends_keeps_every_whole_record(tmp_path: Path) -> None:
    writer = _writer(tmp_path, "k", 100_000)
    path = JsonLinesLog(tmp_path / "h").path("lineage")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not path.exists() or path.stat().st_size < 200_000):
        time.sleep(0.01)
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    store = JsonLinesLog(tmp_path / "h")
    found = store.read("lineage")
    text = path.read_text()
    whole = text.count("\n")
    assert len(found.entries) == whole > 0
    assert [r.session for r in found.entries] == [f"k{i}" for i in range(whole)]
    # Killed between writes the file ends whole; killed mid-write the tail is named, not lost.
    assert found.problems == () if text.endswith("\n") else len(found.problems) == 1
    store.append([record(0)])
    assert store.read("lineage").entries[-1] == record(0)


def test_a_segment_is_compacted_once_each_system_has_enough_newer_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A segment of a byte: every append seals the live file first.
    monkeypatch.setattr(log, "SEGMENT_BYTES", 1)
    store = JsonLinesLog(tmp_path, keep_values=2)
    for i in range(5):
        store.append([record(i)])
    found = store.read("lineage")
    assert [r.session for r in found.entries] == [f"session{i}" for i in range(5)]
    assert [r.compacted for r in found.entries] == [True, True, True, False, False]
    assert found.entries[0].metrics == {"P@1": 0.5} and found.entries[0].per_query("P@1") == {}
    assert found.problems == ()
    segments = sorted(p.name for p in store.segments_folder("lineage").iterdir())
    assert segments == [
        "000001.jsonl",
        "000002.jsonl",
        "000003.jsonl",
        "000004.jsonl",
        "index.json",
    ]
    # The ledgers' counts over every entry, from the index and the live file's summary.
    assert found.tally.decisions == {"s1": 4} and found.tally.systems == {"keyword": 5}


def test_a_read_takes_only_the_entries_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drift window and the trend points of one system, from the end: the older segments
    are never opened, and an append reads none of the log but its index."""
    from retrieval_gate.files import read

    monkeypatch.setattr(log, "SEGMENT_BYTES", 20_000)
    store = JsonLinesLog(tmp_path, keep_values=0)
    for i in range(300):
        store.append([record(i), record(i, system="other")])
    total = sum(p.stat().st_size for p in tmp_path.rglob("*.jsonl"))
    before = read.bytes_read()
    found = store.read("lineage", Request(systems=frozenset({"keyword"}), records=5, trend=10))
    took = read.bytes_read() - before
    assert [e.session for e in found.entries] == [f"session{i}" for i in range(290, 300)]
    assert found.tally.systems == {"keyword": 300, "other": 300}  # counted over all of it
    assert took < total / 10, (took, total)
    index = (store.segments_folder("lineage") / "index.json").stat().st_size
    before = read.bytes_read()
    store.append([record(300)])
    assert read.bytes_read() - before <= index  # the index, nothing of the entries
    pinned = Request(systems=frozenset({"keyword"}), records=5, pin=_ranks({7: 0}))
    found = store.read("lineage", pinned)  # a pinned entry is looked for back to where it is
    assert "session7" in [e.session for e in found.entries]


def _ranks(ranked: dict[int, int], hashed: bool = False) -> Callable[[str], int | None]:
    """A pin's ``rank`` over the commits of ``record(i)``: {i: its rank among the ancestors}."""
    commits = {record(i, hashed=hashed).at.commit or "": rank for i, rank in ranked.items()}

    def rank(commit: str) -> int | None:
        found = [r for c, r in commits.items() if c.startswith(commit) or commit.startswith(c)]
        return min(found, default=None)

    return rank


def test_a_pin_reads_back_only_while_a_nearer_ancestor_may_be_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a pin, each system's entry at the nearest recorded ancestor: found in a newer
    segment, the older ones are not opened (the index's commits say none is nearer); an older
    ancestor recorded first is still farther, and a nearer one further back is read back to.
    With none, the system's records nearest the pin are kept to be named."""
    from retrieval_gate.files import read

    monkeypatch.setattr(log, "SEGMENT_BYTES", 10_000)
    store = JsonLinesLog(tmp_path, keep_values=0)
    for i in range(120):
        store.append([record(i, hashed=True), record(i, system="other", hashed=True)])
    total = sum(p.stat().st_size for p in tmp_path.rglob("*.jsonl"))
    newest = [f"session{i}" for i in range(110, 120)]

    def pinned(ranked: dict[int, int], **more: Any) -> tuple[log.History, int]:
        before = read.bytes_read()
        request = Request(
            frozenset({"keyword"}), records=5, trend=10, pin=_ranks(ranked, True), **more
        )
        found = store.read("lineage", request)
        return found, read.bytes_read() - before

    found, took = pinned({100: 1, 7: 2})  # 100 nearer: the segments before its are not read
    assert [e.session for e in found.entries] == ["session100", *newest]
    assert found.unread == {"keyword": 9}  # 101 ... 109: passed over, not kept
    assert took < total / 2, (took, total)
    found, took = pinned({100: 2, 7: 1})  # 7 nearer, further back: read back to it
    assert [e.session for e in found.entries] == ["session7", *newest]
    assert found.unread == {"keyword": 102} and found.near == {}
    # No ancestor recorded: read to the end, the nearest (here the oldest) three kept.
    found, _ = pinned({}, near=lambda e: 0.0)
    assert [e.session for e in found.near["keyword"]] == ["session0", "session1", "session2"]
    assert [e.session for e in found.entries] == newest  # nothing more kept


def test_a_log_0x_wrote_is_read_and_sealed_at_its_first_append(tmp_path: Path) -> None:
    """The history file of 65934fb, one record per line (version 1, per-query values in
    columns), read as entries; its first append keeps it whole as the live file, and a later
    seal moves it byte for byte."""
    old = (DATA / "history-v1.jsonl").read_bytes()
    store = JsonLinesLog(tmp_path)
    store.path("lineage").write_bytes(old)
    found = store.read("lineage")
    assert found.problems == ()
    assert [e.at.short for e in found.entries] == [e.at.short for e in found.entries]
    assert len(found.entries) == old.count(b"\n") and found.entries[0].per_query("P@1")
    store.append([record(9)])
    assert store.path("lineage").read_bytes().startswith(old)


DATA = Path(__file__).parents[1] / "data" / "ledger-65934fb"


def test_no_file_of_the_history_is_written_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A link committed in place of the segment folder (or the lock) would have the plugin write
    # the history's own lines, which anyone can write, to a place elsewhere.
    monkeypatch.setattr(log, "SEGMENT_BYTES", 1)
    store = JsonLinesLog(tmp_path / "history")
    store.append([record(0)])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(store.segments_folder("lineage"))
    store.segments_folder("lineage").symlink_to(elsewhere)
    with pytest.raises(HistoryError, match=r"lineage\.d: .*symbolic link; refusing to write"):
        store.append([record(1)])
    assert list(elsewhere.iterdir()) == []
    assert store.read("lineage").entries == (record(0),)  # nothing lost either
    store.segments_folder("lineage").unlink()
    lock = tmp_path / "history" / ".lock"
    lock.unlink()
    lock.symlink_to(tmp_path / "created-elsewhere")
    with pytest.raises(HistoryError, match=r"\.lock: .*symbolic link"):
        store.append([record(1)])
    assert not (tmp_path / "created-elsewhere").exists()


def test_a_pipe_in_place_of_the_history_is_refused_not_written(tmp_path: Path) -> None:
    # A write to a pipe no one reads waits forever once past the pipe's buffer (a record of a
    # large suite is): refused before anything is written.
    store = JsonLinesLog(tmp_path)
    os.mkfifo(store.path("lineage"))
    with pytest.raises(HistoryError, match=r"lineage\.jsonl: .*a named pipe \(FIFO\), not a"):
        store.append([record(0)])


def test_bytes_that_are_not_ascii_cost_their_line_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonLinesLog(tmp_path, keep_values=1)
    store.append([record(0)])
    with open(store.path("lineage"), "ab") as out:
        out.write(b"caf\xe9 \xff\n")  # an editor's Latin-1
    store.append([record(1)])
    with open(store.path("lineage"), "ab") as out:
        out.write(b"\x00\x00\x00")  # a write lost to a power cut
    found = store.read("lineage")
    assert [r.session for r in found.entries] == ["session0", "session1"]
    assert [p.rsplit(" line ", 1)[1] for p in found.problems] == [
        "2: not a record (a torn write or an edit); skipped",
        "4: a torn tail (a write cut short); skipped",
    ]
    # Sealed and compacted, the lines that are no entry stay byte for byte.
    monkeypatch.setattr(log, "SEGMENT_BYTES", 1)
    store.append([record(2)])
    store.append([record(3)])
    segment = (store.segments_folder("lineage") / "000001.jsonl").read_bytes().split(b"\n")
    assert segment[1] == b"caf\xe9 \xff" and segment[3] == b"\x00\x00\x00"
    assert json.loads(segment[0])["compacted"] is True
    assert [r.session for r in store.read("lineage").entries] == [f"session{i}" for i in range(4)]


def test_a_suite_name_is_a_safe_file_name() -> None:
    assert suite_file_name("lineage") == "lineage.jsonl"
    odd = suite_file_name("../x/\x1b[31m")
    assert "/" not in odd and "\x1b" not in odd and odd.endswith(".jsonl")


def test_the_commit_comes_from_ci_before_git(tmp_path: Path) -> None:
    assert current_commit(tmp_path, {"GITHUB_SHA": "ABC1234" + "0" * 33}) == "abc1234" + "0" * 33
    assert current_commit(tmp_path, {"GITHUB_SHA": "not a sha"}) is None  # no git repo there


def test_an_unknown_history_scheme_names_the_known(tmp_path: Path) -> None:
    ledger = open_ledger(tmp_path / "b.json", tmp_path / "h")
    assert ledger.log_location == str(tmp_path / "h")
    with pytest.raises(HistoryError, match=r"unknown history store 'nope'.*known: file"):
        open_ledger(tmp_path / "b.json", "nope://x")


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
    from retrieval_gate.baseline.entry import distinct

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
    moved = dataclasses.replace(  # another result: not the same measurement
        first, run=dataclasses.replace(first.run, metrics={"P@1": 0.25})
    )
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


def test_a_measurement_keeps_the_per_query_values_of_the_copy_that_kept_them() -> None:
    from retrieval_gate.baseline.entry import distinct

    # A baseline, then its CI job rerun at the same commit (same figures), the first copy's
    # segment compacted since: the measurement keeps the values, where the first stood.
    first = dataclasses.replace(record(1), decided=False)
    rerun = dataclasses.replace(first, session="rerun")
    (kept,), repeated = distinct([first.compact(), rerun])
    assert repeated == 1 and not kept.compacted and kept.session == first.session
    assert kept.per_query("P@1") == {("q1", "d1"): 1.0, ("q2", "d2"): 0.0}
    # The compacted copy decided the baseline: it stays the one kept, with the values too.
    decided = dataclasses.replace(first.compact(), decided=True)
    (kept,), _ = distinct([rerun, decided])
    assert kept.decided and kept.per_query("P@1") == {("q1", "d1"): 1.0, ("q2", "d2"): 0.0}


def test_an_accepted_drift_round_trips_and_a_malformed_one_is_no_record() -> None:
    from retrieval_gate.baseline.entry import Line, Skipped, read_line

    accepted = dataclasses.replace(record(1), accepted_drift=("MRR@5", "P@1"))
    found = read_line(encode_line(accepted).rstrip(b"\n"))
    assert isinstance(found, Line) and found.entry == accepted and not found.unknown_keys
    assert b"accepted_drift" not in encode_line(record(1))  # other lines as they were
    # Written with a valid digest, a string in its place is no record (not "P", "@", "1").
    body = {**json.loads(encode_line(accepted)), "accepted_drift": "P@1"}
    body["digest"] = line_digest(body)
    assert read_line(json.dumps(body).encode()) == Skipped(
        "not a record (accepted_drift is not a list)", "not a record"
    )


# -- hostile input: every line bounded, nothing lost, no flood, no write out of the project ------


def test_a_line_nested_200000_deep_is_one_line_skipped(tmp_path: Path) -> None:
    # json.loads would recurse 200,000 deep (RecursionError): its depth is measured first.
    store = JsonLinesLog(tmp_path)
    store.append([record(0)])
    with open(store.path("lineage"), "ab") as out:
        out.write(b"[" * 200_000 + b"\n")
    store.append([record(1)])
    found = store.read("lineage")
    assert [r.session for r in found.entries] == ["session0", "session1"]
    assert found.problems == (
        f"{store.path('lineage')} line 2: not a record (nested more than 16 levels deep); skipped",
    )


def test_a_flood_of_bad_lines_is_counted_not_said_line_by_line(tmp_path: Path) -> None:
    store = JsonLinesLog(tmp_path)
    store.append([record(0)])
    tampered = encode_line(record(1)).replace(b'"P@1":0.5', b'"P@1":0.9')
    with open(store.path("lineage"), "ab") as out:
        out.write(b"not json\n" * 9_990 + tampered * 10)
    found = store.read("lineage")
    assert [r.session for r in found.entries] == ["session0"]
    path = store.path("lineage")
    assert found.problems == (
        f"{path} line 2: not a record (a torn write or an edit); skipped",
        f"{path} line 3: not a record (a torn write or an edit); skipped",
        f"{path} line 4: not a record (a torn write or an edit); skipped",
        f"{path}: 9,997 more lines skipped (10,000 in all: 9,990 not a record, 10 tampered)",
    )


def test_compaction_keeps_every_key_of_every_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A newer version's field on an entry: rewriting the line without it loses data. Lines
    # that are not compacted stay byte for byte.
    store = JsonLinesLog(tmp_path, keep_values=1)
    body = json.loads(encode_line(record(0)))
    body["rerank_depth"] = {"P@1": [1, 2]}  # a key this version does not know
    body["digest"] = line_digest(body)
    newer = (json.dumps(body) + "\n").encode()
    inner = json.loads(encode_line(record(4)))
    inner["run"]["queries"]["q1"]["rerank"] = 3  # one inside a query of the run
    inner["digest"] = line_digest(inner)
    newer_inside = (json.dumps(inner) + "\n").encode()
    other = encode_line(record(1, suite="other"))  # another suite's line in this file
    windows = encode_line(record(2)).replace(b"\n", b"\r\n")  # a CRLF checkout
    store.path("lineage").write_bytes(newer + newer_inside + other + windows)
    monkeypatch.setattr(log, "SEGMENT_BYTES", 1)
    store.append([record(3)])  # seals the file; its segment is due at once (keep_values 1)
    lines = (store.segments_folder("lineage") / "000001.jsonl").read_bytes().splitlines(True)
    assert lines[:3] == [newer, newer_inside, other]  # as they were: not compacted
    assert json.loads(lines[3])["compacted"] is True  # the entry this version knows whole
    assert [r.session for r in store.read("lineage").entries] == [
        "session0",
        "session4",
        "session2",
        "session3",
    ]


def test_a_held_lock_fails_the_append_in_one_line_naming_its_holder(tmp_path: Path) -> None:
    import fcntl
    import threading

    from retrieval_gate.files import lock

    store = JsonLinesLog(tmp_path)
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
    assert [r.session for r in store.read("lineage").entries] == ["session0"]


def test_a_history_folder_linked_out_of_the_project_is_not_written(tmp_path: Path) -> None:
    from retrieval_gate.files import door

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / ".retrieval-gate").mkdir(parents=True)
    elsewhere.mkdir()
    (project / ".retrieval-gate/history").symlink_to(elsewhere)  # committed in the repository
    store = JsonLinesLog(project / ".retrieval-gate/history")
    door.configure(project)
    try:
        with pytest.raises(
            HistoryError, match=r"history is a symbolic link to .*elsewhere, outside"
        ):
            store.append([record(0)])
        store.path("lineage").write_bytes(encode_line(record(0)))  # as if committed
        assert [r.session for r in store.read("lineage").entries] == ["session0"]  # read
        with pytest.raises(HistoryError, match=r"outside the project"):
            store.append([record(1)])
    finally:
        door.configure(None)
    assert [p.name for p in elsewhere.iterdir()] == ["lineage.jsonl"]  # nothing written there
    assert store.path("lineage").read_bytes() == encode_line(record(0))


@dataclass(frozen=True)
class Hostile:
    """A line in a history file (between two entries), and what reading it gives: a problem
    holding ``said``; compaction of its segment leaves it byte for byte. ``before``: what
    65934fb did with the same line (as a record of its version)."""

    id: str
    line: Callable[[], bytes]
    said: str
    before: str = "clear"


def _body(**changed: Any) -> dict[str, Any]:
    """record(7)'s JSON object without its digest, ``changed`` applied (``run`` merged)."""
    body: dict[str, Any] = json.loads(encode_line(record(7)))
    del body["digest"]
    run = changed.pop("run", None)
    body.update(changed)
    if run is not None:
        body["run"] = {**body["run"], **run}
    return body


def _v1_body(**changed: Any) -> dict[str, Any]:
    """record(7) as 0.x wrote a record (version 1: values in columns), ``changed`` applied."""
    body: dict[str, Any] = json.loads((DATA / "history-v1.jsonl").read_bytes().splitlines()[0])
    del body["digest"]
    body.update(changed)
    return body


def _signed(body: dict[str, Any]) -> bytes:
    """``body`` as a line with a digest that matches it (anyone can compute one)."""
    return json.dumps({**body, "digest": line_digest(body)}).encode()


def _replaced(body: dict[str, Any], old: str, new: str) -> bytes:
    return _signed(body).replace(old.encode(), new.encode(), 1)


TORN = "not a record (a torn write or an edit)"
HOSTILE = [
    Hostile("json-null", lambda: b"null", TORN),
    Hostile("json-true", lambda: b"true", TORN),
    Hostile("json-number", lambda: b"-0.0e5", TORN),
    Hostile("json-string", lambda: b'"a record"', TORN),
    Hostile("json-list", lambda: b"[1, {}]", TORN),
    Hostile("json-empty-object", lambda: b"{}", "not a record (it carries no digest)"),
    Hostile(
        "float-1e400",
        lambda: _replaced(_body(run={"metrics": {"P@1": math.inf}}), "Infinity", "1e400"),
        "not a record (P@1 is inf; metric values must be finite)",
    ),
    Hostile(
        "int-of-5000-digits",
        lambda: _signed(_body(tolerance={"P@1": 7777777})).replace(b"7777777", b"9" * 5000),
        TORN,
    ),
    Hostile("nan", lambda: _signed(_body(run={"metrics": {"P@1": math.nan}})), TORN),
    Hostile(
        "duplicate-key",
        # Read last-wins, the second session (with a digest made for it) hid behind the first.
        lambda: b'{"session": "x", ' + _signed(_body(session="y"))[1:],
        "not a record (key 'session' given twice)",
        before="silent",
    ),
    Hostile(
        "line-of-50-mb",
        lambda: b'{"pad": "' + b"x" * (50 << 20) + b'"}',
        "not a record (it carries no digest)",
    ),
    Hostile(
        "deep-but-short",
        lambda: _signed(_body(extra=[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]])),
        "not a record (nested more than 16 levels deep)",
        before="lost record",  # read, then its unknown key dropped by compaction
    ),
    Hostile(
        "dated-in-the-year-2999",
        # Inside every "30d" drift window for ever, ahead of every entry after it.
        lambda: _signed(_body(time="2999-01-01T00:00:00Z")),
        "dated 2999-01-01T00:00:00Z, ahead of this machine's clock by more than 1 day",
        before="silent",
    ),
    Hostile(
        "newer-record-version",
        lambda: _signed(_body(v=3, run={"layout": "v3"})),
        "written by a newer version of the plugin (record version 3)",
        before="handled",  # "not a finite number: 'layout'", moved out of that version's sight
    ),
    Hostile(
        "absurd-n",
        lambda: _signed(_body(compacted=True, run={"queries": None, "n": 10**18})),
        "not a record (run has no 'queries')",
        before="silent",
    ),
    Hostile(
        "absurd-n-of-a-summary",
        lambda: _signed(
            {**_body(compacted=True), "run": {"k": [], "metrics": {"P@1": 0.5}, "n": 10**18}}
        ),
        "not a record (run has no 'n' (a whole number to 1,000,000,000))",
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
        lambda: _signed(_body(run={"queries": "q1"})),
        "not a record (run has no 'queries')",
        before="silent",
    ),
    Hostile(
        "v1-queries-as-a-string",
        lambda: _signed(_v1_body(queries="q1", digests="d1", values={"P@1": [1, 0]})),
        "not a record (queries is not a list of strings)",
        before="silent",
    ),
    Hostile(
        "v1-value-out-of-bounds",
        lambda: _signed(_v1_body(metrics={"P@1": 7.0})),
        "not a record (P@1 of suite 'lineage', system 'keyword' is 7.0, outside its bounds",
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
        lambda: _signed(_body(run={"metrics": {"P@1": 1e300}})),
        "not a record (P@1 of suite 'lineage', system 'keyword' is 1e+300, outside its bounds",
        before="silent",
    ),
    Hostile(
        "value-as-a-huge-string",
        lambda: _signed(_body(run={"metrics": {"P@1": "9" * 100_000}})),
        "not a record (run metric values must be numbers, P@1 is '99999",
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
    from retrieval_gate.baseline import entry as module
    from retrieval_gate.metrics.registry import bounds_by_name, format_bounds

    before = module._bounds
    module.use_metric_bounds(bounds_by_name, format_bounds)
    try:
        yield
    finally:
        module._bounds = before


@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_a_hostile_line_costs_its_line_and_compaction_loses_nothing(
    tmp_path: Path, case: Hostile, metric_bounds: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The line of 50 MB takes about a second: it is read, hashed and kept whole."""
    store = JsonLinesLog(tmp_path, keep_values=1)
    line = case.line()
    path = store.path("lineage")
    path.write_bytes(encode_line(record(0)) + line + b"\n" + encode_line(record(1)))
    found = store.read("lineage")
    assert [r.session for r in found.entries] == ["session0", "session1"]
    (problem,) = found.problems
    assert problem.startswith(f"{path} line 2: ") and problem.endswith("; skipped")
    assert case.said in problem
    assert len(problem) < 400
    monkeypatch.setattr(log, "SEGMENT_BYTES", 1)
    store.append([record(2)])  # sealed and compacted at once (keep_values 1)
    lines = (store.segments_folder("lineage") / "000001.jsonl").read_bytes().split(b"\n")
    assert lines[1] == line and all(json.loads(lines[i])["compacted"] for i in (0, 2))
    assert [r.session for r in store.read("lineage").entries] == [f"session{i}" for i in range(3)]


def test_a_record_holding_a_unicode_line_separator_is_one_line(tmp_path: Path) -> None:
    # U+2028 and U+0085 end a line for str.splitlines: the history splits on "\n" alone.
    store = JsonLinesLog(tmp_path)
    odd = record(0, system="key\u2028word\x85")
    store.path("lineage").write_bytes(encode_line(odd) + encode_line(record(1)))
    found = store.read("lineage")
    assert found.problems == () and [r.system for r in found.entries] == [
        "key\u2028word\x85",
        "keyword",
    ]


@pytest.mark.parametrize(
    "kind", ["fifo", "folder", "device", "link-to-history-elsewhere", "empty", "only-a-bom"]
)
def test_a_history_file_that_is_no_file_of_records_is_said_in_one_line(
    tmp_path: Path, kind: str
) -> None:
    store = JsonLinesLog(tmp_path / "h")
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
        with pytest.raises(HistoryError, match=r"lineage\.jsonl: history (file )?is a"):
            store.append([record(1)])
        return
    found = store.read("lineage")  # a link is read as any file the user put there
    assert found.problems == ()
    assert len(found.entries) == (1 if kind.startswith("link") else 0)
    if kind.startswith("link"):
        with pytest.raises(HistoryError, match="symbolic link; refusing to write"):
            store.append([record(1)])
    else:
        store.append([record(1)])
        assert [r.session for r in store.read("lineage").entries] == ["session1"]


def test_a_folder_of_other_files_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Appending and reading one suite never lists the history folder (other suites' files, as
    # many as a project has), only the suite's own segments folder: so 10,000 of them cost what
    # none do. Asserted by the listings, not by making 10,000 files (3 s of CPU and nothing
    # shown by it: no time is asserted); the listings seen include the segments folder's, so a
    # listing by another function (a glob, a walk) would be seen too.
    for i in range(100):
        os.close(os.open(tmp_path / f"suite-{i}.jsonl", os.O_CREAT | os.O_WRONLY, 0o644))
    listed: list[Path] = []
    scandir, listdir = os.scandir, os.listdir

    def spied_scandir(path: Any = ".") -> Any:
        listed.append(Path(path))
        return scandir(path)

    def spied_listdir(path: Any = ".") -> list[Any]:
        listed.append(Path(path))
        return listdir(path)

    monkeypatch.setattr(os, "scandir", spied_scandir)
    monkeypatch.setattr(os, "listdir", spied_listdir)
    store = JsonLinesLog(tmp_path)
    store.append([record(0)])
    found = store.read("lineage")
    store.append([record(1)])
    monkeypatch.undo()
    assert found.problems == () and [r.session for r in found.entries] == ["session0"]
    # Only the folders under this test's (another thread of the process may list its own).
    ours = {path for path in listed if path == tmp_path or tmp_path in path.parents}
    assert ours == {store.segments_folder("lineage")}


def test_a_lock_note_of_a_dead_process_and_a_lock_linked_inside_the_folder(
    tmp_path: Path,
) -> None:
    store = JsonLinesLog(tmp_path)
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
    assert [r.session for r in store.read("lineage").entries] == ["session0"]


def test_the_shelf_life_ledger_counts_verdicts_and_older_entries_as_they_were(
    tmp_path: Path,
) -> None:
    # Each entry says how many pass/fail verdicts its session revealed on its suite x system
    # (3 items of one system); an entry written before that count was kept counts as it did
    # then, one per decided session. The tally a sealed segment's index keeps carries both, and
    # an index written before ``older`` was kept counted every decision by its session.
    from retrieval_gate.baseline.log import Tally

    store = JsonLinesLog(tmp_path)
    old = [dataclasses.replace(record(i), verdicts=None) for i in range(3)]  # 2 decided
    new = [dataclasses.replace(record(i), verdicts=3) for i in range(3, 6)]
    rerun = dataclasses.replace(new[-1], session="rerun")  # the same measurement: counted once
    store.append([*old, *new, rerun])
    tally = store.read("lineage").tally
    assert tally.decisions == {"s1": 2 + 3 * 3} and tally.older == {"s1": 2}
    assert Tally.from_json(tally.to_json()) == tally
    assert "verdicts" not in old[0].to_json() and new[0].to_json()["verdicts"] == 3
    assert Entry.from_json(new[0].to_json()).verdicts == 3
    assert Entry.from_json(old[0].to_json()).verdicts is None
    written_before = {"decisions": {"s1": 4}, "holdout": {}, "systems": {"keyword": 5}}
    assert Tally.from_json(written_before).older == {"s1": 4}
    with pytest.raises(ValueError, match="verdicts is not a whole number"):
        Entry.from_json({**new[0].to_json(), "verdicts": -1})


def test_the_holdout_ledger_counts_revealed_verdicts_of_each_holdout() -> None:
    """The index's holdout count (log.Counting): the verdicts each version of a holdout (its
    digest) revealed over every recorded session and system; a copy of a measurement counts
    once, and a record from before the suite had a holdout counts in none."""
    counting = log.Counting()
    revealed = [("h1", 0, 0), ("h1", 2, 1), ("h1", 1, 2), ("h2", 1, 3), ("", 0, 4), ("h1", 2, 1)]
    for digest, decisions, i in revealed:  # the last: a copy of the second measurement
        counting.add(
            dataclasses.replace(record(i), holdout_digest=digest, holdout_decisions=decisions)
        )
    assert counting.tally().holdout == {"h1": 3, "h2": 1}

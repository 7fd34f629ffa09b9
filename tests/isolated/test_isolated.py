"""``isolate = true``: the retriever's own process, and everything that crosses to pytest.

The hostile table (tests/isolated/hostile.py) runs every attack on the process boundary through
the retriever system; the codec's own rules (data only, bounded) are tested on their own."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.errors import ConfigError, RunError
from retrieval_gate.isolated import wire
from retrieval_gate.systems.base import OpenContext, RunOptions
from retrieval_gate.systems.config import SystemConfig
from retrieval_gate.systems.retriever import RetrieverSystem

from .hostile import PREAMBLE, ROWS, Hostile

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder holding every row's retriever module, written once."""
    root = tmp_path_factory.mktemp("hostile")
    for number, row in enumerate(ROWS):
        (root / f"{_module(number)}.py").write_text(PREAMBLE + "\n\n" + row.code, "utf-8")
    return root


def _module(number: int) -> str:
    return f"hostile_{number:02d}"


@pytest.fixture
def inheritable(modules: Path) -> Iterator[int]:
    """A descriptor of pytest's open and inheritable while the row runs: no child may have it."""
    fd = os.open(modules / "inheritable-marker", os.O_RDWR | os.O_CREAT)
    os.set_inheritable(fd, True)
    yield fd
    os.close(fd)


def _open_and_ask(row: Hostile, ref: str, root: Path) -> tuple[str | None, dict[str, float]]:
    config = SystemConfig(
        name="hostile",
        kind="retriever",
        options={"retriever": ref, "timeout": row.timeout, "isolate": row.isolate},
    )
    try:
        system = RetrieverSystem(config, OpenContext(options=RunOptions(cache_dir=root), root=root))
    except ConfigError as exc:
        return str(exc), {}
    try:
        (found,) = system.retrieve([("q1", row.query)], 10)
    except RunError as exc:
        return str(exc), {}
    finally:
        system.close()
    return None, dict(found.hits)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _survivors(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + 5
    while True:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


@pytest.mark.parametrize("number", range(len(ROWS)), ids=[row.id for row in ROWS])
def test_hostile_isolated_retriever(
    number: int,
    modules: Path,
    inheritable: int,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    row = ROWS[number]
    ref = f"{_module(number)}:retrieve"
    monkeypatch.setenv("HOSTILE_PARENT", str(os.getpid()))
    if row.frame_limit is not None:
        monkeypatch.setattr("retrieval_gate.isolated.parent.MAX_FRAME_BYTES", row.frame_limit)
    try:
        message, hits = _open_and_ask(row, ref, modules)
    finally:
        pids_file = modules / f"{_module(number)}.pids"
        noted = [int(line) for line in pids_file.read_text().split()] if pids_file.exists() else []
        left = _survivors(noted)
        for pid in left:  # never left behind by the test itself
            os.kill(pid, 9)
    out, err = capfd.readouterr()
    if row.expect:
        assert message is not None, f"expected an error, got hits {hits}"
        assert "\n" not in message
        assert re.search(row.expect, message), message
    else:
        assert message is None, message
        assert hits == row.hits
    assert not (modules / f"{_module(number)}.ran-in-pytest").exists(), "code ran in pytest"
    if sys.platform.startswith("linux") or not row.linux_only_reach:
        assert left == [], f"processes outlived the run: {left}"
    if row.output_at_most is not None:
        assert len(out) <= row.output_at_most and len(err) <= row.output_at_most
        assert "is not shown: over 1 MiB" in out + err


# -- the codec: data only, bounded ------------------------------------------------------------


def _round_trip(value: object) -> Any:
    frame = wire.encode_frame({"ok": wire.encode_result(value)})
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    return wire.decode(wire.decode_frame(frame[:-1])["ok"])


@pytest.mark.parametrize(
    "value",
    [
        [("d1", 1.0), ("d2", 2)],
        [["d1", 1.0], ["d2", -0.0]],
        {"d1": 0.5, "d2": 1},
        {3: 0.5, "d": True},
        ["d1", "d2"],
        [{"id": "d1", "score": 0.5}, {"id": "d2"}],
        [("d1", 1.0, "extra"), None, 3, b"\x00\xff", ["a", ["b", ("c",)]]],
        [("\udc80\n\u2028", float("inf"))],
        [],
        "a string",
        None,
    ],
    ids=lambda value: repr(value)[:30],
)
def test_values_cross_as_they_are(value: object) -> None:
    assert _round_trip(value) == (list(value) if isinstance(value, tuple) else value)


def test_the_types_of_pairs_survive_for_the_messages_that_show_them() -> None:
    assert [type(item) for item in _round_trip([("d1", 1.0), ("d2", 0.5)])] == [tuple, tuple]
    assert [type(item) for item in _round_trip([["d1", 1.0]])] == [list]
    found = _round_trip([("d1", 1.0), ("d2", "x", 3)])
    assert found == [("d1", 1.0), ("d2", "x", 3)]


def test_an_iterator_stays_an_iterator_read_only_so_far() -> None:
    import itertools

    found = wire.decode(
        wire.encode_result(((f"d{i}", 1.0) for i in itertools.count()), read_at_most=3)
    )
    assert not isinstance(found, list)
    assert list(found) == [("d0", 1.0), ("d1", 1.0), ("d2", 1.0)]


def test_other_objects_arrive_as_their_repr_and_number() -> None:
    import fractions

    (found,) = _round_trip([fractions.Fraction(1, 4)])
    assert isinstance(found, wire.Foreign)
    assert (repr(found), wire.type_name(found), float(found)) == (
        "Fraction(1, 4)",
        "Fraction",
        0.25,
    )
    (text,) = _round_trip([object])
    assert repr(text) == "<class 'object'>"
    with pytest.raises(TypeError, match="must be a number, not 'type'"):
        float(text)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"\x80\x04\x95", "not a message of its codec (first bytes b'\\x80\\x04\\x95'"),
        (b"[1]", "not a message of its codec (first bytes b'[1]')"),
        (b"[" * 100_000, "not a message of its codec"),
        (b'{"ok": 1e999999}', None),
    ],
)
def test_a_line_that_is_not_a_message_is_said_so(line: bytes, why: str | None) -> None:
    if why is None:  # JSON's own infinity: a number, refused later as a score is
        assert wire.decode_frame(line) == {"ok": float("inf")}
        return
    with pytest.raises(wire.NotAResult) as raised:
        wire.decode_frame(line)
    assert str(raised.value).startswith(why)


@pytest.mark.parametrize(
    "data",
    [
        {"$t": "obj", "type": "os", "repr": "x", "num": None, "call": "system"},
        {"$t": "py/object", "v": "os.system"},
        {"$t": "pairs", "of": "set", "ids": ["a"], "scores": [1.0]},
        {"$t": "pairs", "of": "tuple", "ids": ["a", 3], "scores": [1.0, 2.0]},
        {"$t": "scores", "ids": ["a"], "scores": [1.0, 2.0]},
        {"$t": "map", "v": [[[1], 2]]},
        {"$t": "bytes", "v": "\u0100"},
        {"plain": "object"},
    ],
    ids=lambda data: str(data)[:40],
)
def test_markers_it_does_not_know_are_refused(data: object) -> None:
    with pytest.raises(wire.NotAResult):
        wire.decode(data)


def test_sizes_and_depths_are_bounded_on_both_sides() -> None:
    deep: list[object] = []
    for _ in range(wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(wire.TooLarge, match="nested deeper than 32 levels"):
        wire.encode_result(deep)
    with pytest.raises(wire.TooLarge, match="more than 4,000,000 values"):
        wire.encode_result([("d", 1.0)] * (wire.MAX_VALUES // 3 + 1))
    with pytest.raises(wire.NotAResult, match="larger or deeper"):
        wire.decode(deep)
    assert wire.short_repr("x" * 5000).endswith("... (3,002 more characters)")


# -- the process group ends with pytest ---------------------------------------------------------

_KILLED_PARENT = """
import sys, time
from pathlib import Path
from retrieval_gate.systems.base import OpenContext, RunOptions
from retrieval_gate.systems.config import SystemConfig
from retrieval_gate.systems.retriever import RetrieverSystem

root = Path(sys.argv[1])
config = SystemConfig(
    name="s", kind="retriever", options={"retriever": "server_app:retrieve", "isolate": True, "timeout": 30}
)
system = RetrieverSystem(config, OpenContext(options=RunOptions(cache_dir=root), root=root))
print(system.retrieve([("q1", "q")], 10)[0].hits, flush=True)
time.sleep(600)
"""


def test_the_retrievers_processes_end_when_pytest_is_killed(tmp_path: Path) -> None:
    """pytest killed (SIGKILL: no hook, no finalizer runs) takes the retriever's process and
    the server it started with it: the child sees its orders' pipe end and ends its group."""
    import signal
    import subprocess

    (tmp_path / "server_app.py").write_text(
        PREAMBLE + '\n\nSERVER = sleeper()\n\n\ndef retrieve(query, k):\n    return ["d1"]\n',
        "utf-8",
    )
    pytest_like = subprocess.Popen(
        [sys.executable, "-c", _KILLED_PARENT, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    try:
        assert pytest_like.stdout is not None
        assert pytest_like.stdout.readline().strip() == "{'d1': 1.0}"
        (server,) = [int(line) for line in (tmp_path / "server_app.pids").read_text().split()]
        assert _alive(server)
        pytest_like.send_signal(signal.SIGKILL)
        pytest_like.wait(10)
        left = _survivors([server])
    finally:
        pytest_like.kill()
        pytest_like.wait(10)
        if pytest_like.stdout is not None:
            pytest_like.stdout.close()
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "the retriever's server outlived pytest"

"""The hostile table of ``isolate = true``: retrievers that attack the process boundary.

Each row is a retriever module (the :data:`PREAMBLE` and the row's own code) and what the
run must say of it: one line matching ``expect`` (a regular expression searched in the error),
or the hits when it must succeed. ``tests/isolated/test_isolated.py`` runs every row through the
retriever system (``systems/retriever.py``) and also checks that every process the retriever
noted (:func:`note`) is gone once the system is closed, and that no marker file the row's
code would write in pytest's process exists.

Out of scope, and so not rows (docs/ci.md): a child that attacks pytest on purpose, such as
``os.kill(os.getppid(), signal.SIGSTOP)``, or that forges well-formed answers on the pipe: the
child runs the team's own code, which could do as much without ``isolate``. What is defended
is every accident (an exit, a crash, stray bytes, a process left behind) and every way data
from the child could make pytest run code.

This module imports nothing of the plugin: rows can be run against any version.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Every row's module starts with this: ``note(pid)`` records a process that must not outlive
#: the run; ``scribble(data)`` writes ``data`` to every pipe and socket among its descriptors
#: above 2 (the one its answers travel on, whichever number it has); ``MARKER`` is a file that
#: code run in pytest's process (not the child's) would write (``HOSTILE_PARENT`` holds pytest's
#: process id).
PREAMBLE = """
import os
import signal
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MARKER = os.path.join(HERE, __name__ + ".ran-in-pytest")


def note(pid):
    with open(os.path.join(HERE, __name__ + ".pids"), "a") as fh:
        fh.write(f"{pid}\\n")


def sleeper():
    found = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    note(found.pid)
    return found


def scribble(data):
    for fd in range(3, 1024):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            try:
                os.write(fd, data)
            except OSError:
                pass
"""

HIT = 'return [("d1", 1.0)]'


@dataclass(frozen=True)
class Hostile:
    """One attack: the retriever's ``code`` (after :data:`PREAMBLE`), and either the error
    ``expect``-ed (a regular expression searched in the one line) or the ``hits``."""

    id: str
    what: str
    code: str
    expect: str = ""
    hits: dict[str, float] | None = None
    timeout: float = 30.0
    query: str = "q"
    isolate: bool = True
    #: A smaller limit on one answer, so that exceeding it costs megabytes, not 128 MiB.
    frame_limit: int | None = None
    #: The most bytes of each output stream pytest may be handed (stdout, stderr).
    output_at_most: int | None = None
    #: Whether the noted processes must be gone (False only where the system cannot reach them).
    linux_only_reach: bool = False
    #: The outcome on 65934fb, before the fix (the issue's classes: clear, handled, hang,
    #: traceback, silent, security), measured by running the row against that version.
    before: str = "clear"


ENDED = r"ended its process \(isolate = true\) with exit status "
TIMED_OUT = r"did not return within 0.5 s \(its process was stopped\)"
NOT_DATA = r"returned bytes that are not a result \(isolate = true\): "

ROWS: tuple[Hostile, ...] = (
    # -- the findings -------------------------------------------------------------------
    Hostile(
        "garbage-on-its-descriptors",
        "writes bytes to every pipe among its descriptors, then answers",
        f'def retrieve(query, k):\n    scribble(b"\\x7f\\xff\\xff\\xffgarbage")\n    {HIT}\n',
        expect=NOT_DATA + r"not a message of its codec \(first bytes b'\\x7f\\xff\\xff\\xffgarbage",
        before="hang",
    ),
    Hostile(
        "result-whose-unpickling-raises",
        "returns an object whose __reduce__ makes unpickling raise",
        "class Evil:\n"
        "    def __reduce__(self):\n"
        '        return (int, ("not a number",))\n'
        "    def __repr__(self):\n"
        '        return "Evil()"\n\n\n'
        "def retrieve(query, k):\n    return [Evil()]\n",
        expect=r"returned Evil\(\) at position 0; expected \(doc_id, score\)",
        before="traceback",
    ),
    Hostile(
        "result-whose-unpickling-runs-code",
        "returns an object whose __reduce__ runs code where it is unpickled",
        "class Evil:\n"
        "    def __reduce__(self):\n"
        "        return (exec, (f\"open({MARKER!r}, 'w').write('ran')\",))\n"
        "    def __repr__(self):\n"
        '        return "Evil()"\n\n\n'
        "def retrieve(query, k):\n    return Evil()\n",
        expect=r"returned Evil, expected a list of \(doc_id, score\)",
        before="security",
    ),
    Hostile(
        "result-whose-unpickling-exits",
        "returns an object whose __reduce__ calls os._exit(0) where it is unpickled",
        "class Evil:\n"
        "    def __reduce__(self):\n"
        "        return (os._exit, (0,))\n"
        "    def __repr__(self):\n"
        '        return "Evil()"\n\n\n'
        "def retrieve(query, k):\n    return [Evil()]\n",
        expect=r"returned Evil\(\) at position 0; expected \(doc_id, score\)",
        before="security",
    ),
    Hostile(
        "result-whose-unpickling-imports-its-module",
        # Before: pickle imported the module in pytest to rebuild Pair (a traceback where pytest
        # could not import it, its module code run in pytest where it could).
        "returns instances of its own class, whose module marks being imported in pytest's process",
        "if os.environ.get('HOSTILE_PARENT') == str(os.getpid()):\n"
        "    open(MARKER, 'w').write('imported in pytest')\n\n\n"
        "class Pair(tuple):\n"
        "    pass\n\n\n"
        "def retrieve(query, k):\n"
        '    return [Pair(("d1", 1.0))]\n',
        hits={"d1": 1.0},
        before="security",
    ),
    Hostile(
        "grandchild-holds-the-pipe-as-the-child-exits",
        "forks a process that keeps the answer pipe open, then exits",
        "def retrieve(query, k):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        time.sleep(600)\n"
        "        os._exit(0)\n"
        "    note(pid)\n"
        "    os._exit(0)\n",
        expect=ENDED + r"0: an interpreter exit",
        before="silent",
    ),
    Hostile(
        "subprocess-started-at-import-outlives-the-run",
        "starts a server process at import and leaves it running",
        f"SERVER = sleeper()\n\n\ndef retrieve(query, k):\n    {HIT}\n",
        hits={"d1": 1.0},
        before="silent",
    ),
    Hostile(
        "call-past-its-limit-leaves-a-subprocess",
        "starts a process, then runs past its time limit",
        "def retrieve(query, k):\n    sleeper()\n    time.sleep(600)\n",
        expect=TIMED_OUT,
        timeout=0.5,
        before="silent",
    ),
    Hostile(
        "daemon-that-leaves-the-process-group",
        "double-forks a daemon that calls setsid, the way a service daemonizes",
        "def retrieve(query, k):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.setsid()\n"
        "        inner = os.fork()\n"
        "        if inner == 0:\n"
        "            time.sleep(600)\n"
        "            os._exit(0)\n"
        "        note(inner)\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        f"    {HIT}\n",
        hits={"d1": 1.0},
        linux_only_reach=True,
        before="silent",
    ),
    # -- new rows -------------------------------------------------------------------------------
    Hostile(
        "partial-message-then-exit",
        "writes the start of a message where its answer goes, then exits",
        'def retrieve(query, k):\n    scribble(b"\\x00\\x00\\x00\\x10{\\"ok")\n    os._exit(0)\n',
        expect=ENDED + "0",
    ),
    Hostile(
        "partial-message-then-sleep",
        "writes the start of a message where its answer goes, then never finishes it",
        'def retrieve(query, k):\n    scribble(b"\\x00\\x00\\x00\\x10{\\"ok")\n'
        "    time.sleep(600)\n",
        expect=TIMED_OUT,
        timeout=0.5,
        before="hang",
    ),
    Hostile(
        "floods-the-answer-pipe",
        "writes megabytes without an end of message where its answer goes",
        f'def retrieve(query, k):\n    scribble(b"x" * (4 << 20))\n    {HIT}\n',
        expect=r"sent more than 1 MiB in one answer \(isolate = true\); its process was stopped",
        frame_limit=2**20,
        before="hang",
    ),
    Hostile(
        "message-of-the-wrong-shape",
        "writes a line of valid JSON that is not a message, then answers",
        f'def retrieve(query, k):\n    scribble(b"[1, 2, 3]\\n")\n    {HIT}\n',
        expect=NOT_DATA + r"not a message of its codec \(first bytes b'\[1, 2, 3\]'\)",
        before="hang",
    ),
    Hostile(
        "deeply-nested-json-on-the-pipe",
        "writes a line of 100,000 nested JSON arrays where its answer goes",
        f'def retrieve(query, k):\n    scribble(b"[" * 100000 + b"\\n")\n    {HIT}\n',
        expect=NOT_DATA + r"not a message of its codec",
        before="hang",
    ),
    Hostile(
        "exits-0-without-answering",
        "calls os._exit(0) in the call",
        "def retrieve(query, k):\n    os._exit(0)\n",
        expect=ENDED + r"0: an interpreter exit such as os._exit, or a crash, in the code; it "
        r"would have ended pytest",
    ),
    Hostile(
        "segfaults",
        "reads address 0 through ctypes",
        "def retrieve(query, k):\n    import ctypes\n    ctypes.string_at(0)\n",
        expect=ENDED + r"-11 \(SIGSEGV\)",
    ),
    Hostile(
        "kills-itself",
        "sends itself SIGKILL",
        "def retrieve(query, k):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
        expect=ENDED + r"-9 \(SIGKILL\)",
    ),
    Hostile(
        "ignores-sigterm-and-sleeps",
        "ignores SIGTERM and runs past its limit",
        "def retrieve(query, k):\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    time.sleep(600)\n",
        expect=TIMED_OUT,
        timeout=0.5,
    ),
    Hostile(
        "stops-itself",
        "sends itself SIGSTOP",
        "def retrieve(query, k):\n    os.kill(os.getpid(), signal.SIGSTOP)\n",
        expect=TIMED_OUT,
        timeout=0.5,
    ),
    Hostile(
        "closes-stdin-and-stdout",
        "closes descriptors 0 and 1, then answers",
        f"def retrieve(query, k):\n    os.close(0)\n    os.close(1)\n    {HIT}\n",
        hits={"d1": 1.0},
    ),
    Hostile(
        "closes-every-descriptor",
        "closes every descriptor above 2, its pipes among them, then answers",
        f"def retrieve(query, k):\n    os.closerange(3, 4096)\n    {HIT}\n",
        expect=ENDED,
    ),
    Hostile(
        "floods-stdout",
        "writes 100 MiB to its stdout, then answers",
        "def retrieve(query, k):\n"
        '    block = b"y" * (1 << 20)\n'
        "    for _ in range(100):\n"
        "        os.write(1, block)\n"
        f"    {HIT}\n",
        hits={"d1": 1.0},
        output_at_most=(1 << 20) + 200,
        before="handled",
    ),
    Hostile(
        "floods-stderr",
        "writes 100 MiB to its stderr, then answers",
        "def retrieve(query, k):\n"
        '    block = b"z" * (1 << 20)\n'
        "    for _ in range(100):\n"
        "        os.write(2, block)\n"
        f"    {HIT}\n",
        hits={"d1": 1.0},
        output_at_most=(1 << 20) + 200,
        before="handled",
    ),
    Hostile(
        "ten-million-hits",
        "returns ten million hits",
        'def retrieve(query, k):\n    return [("d1", 0.5)] * 10_000_000\n',
        expect=r"returned a result its process cannot hand over \(isolate = true\): more than "
        r"4,000,000 values; return the top k",
        before="handled",
    ),
    Hostile(
        "endless-generator",
        "returns a generator that never ends",
        "def retrieve(query, k):\n"
        "    import itertools\n"
        '    return ((f"d{i}", 1.0) for i in itertools.count())\n',
        expect=r"returned an iterator of more than 100000 results",
        before="silent",
    ),
    Hostile(
        "deeply-nested-result",
        "returns a list nested 100,000 deep",
        "def retrieve(query, k):\n"
        "    found = []\n"
        "    for _ in range(100_000):\n"
        "        found = [found]\n"
        "    return found\n",
        expect=r"returned a result its process cannot hand over \(isolate = true\): a value "
        r"nested deeper than 32 levels",
    ),
    Hostile(
        "nan-and-infinite-scores",
        "returns a NaN score",
        'def retrieve(query, k):\n    return [("d1", float("nan")), ("d2", float("inf"))]\n',
        expect=r"returned score nan for 'd1'; scores must be finite numbers",
    ),
    Hostile(
        "non-string-ids",
        "returns a float as a document id",
        "def retrieve(query, k):\n    return [(3.5, 1.0)]\n",
        expect=r"returned doc id 3.5 at position 0; ids are strings",
    ),
    Hostile(
        "numpy-scalars",
        "returns numpy strings and floats, as a vector search does",
        "def retrieve(query, k):\n"
        "    import numpy as np\n"
        '    return [(np.str_("d1"), np.float32(0.5)), ("d2", np.float64(0.25))]\n',
        hits={"d1": 0.5, "d2": 0.25},
    ),
    Hostile(
        "numpy-integer-id",
        "returns a numpy integer as a document id",
        "def retrieve(query, k):\n    import numpy as np\n    return [(np.int64(3), 1.0)]\n",
        expect=r"returned doc id np.int64\(3\) at position 0; ids are strings",
    ),
    Hostile(
        "repr-raises",
        "returns an object whose __repr__ raises",
        "class Weird:\n"
        "    def __repr__(self):\n"
        '        raise RuntimeError("no")\n\n\n'
        "def retrieve(query, k):\n    return [Weird()]\n",
        expect=r"returned <Weird object> at position 0; expected \(doc_id, score\)",
        before="traceback",
    ),
    Hostile(
        "function-in-the-result",
        "returns a lambda among its hits",
        "def retrieve(query, k):\n    return [lambda: 0]\n",
        expect=r"returned <function retrieve.<locals>.<lambda> at 0x[0-9a-f]+> at position 0; "
        r"expected "
        r"\(doc_id, score\)",
    ),
    Hostile(
        "bytes-as-a-hit",
        "returns b'ab' as a hit (bytes are a sequence of two numbers)",
        'def retrieve(query, k):\n    return [b"ab"]\n',
        expect=r"returned b'ab' at position 0; expected \(doc_id, score\)",
        before="silent",
    ),
    Hostile(
        "exception-whose-str-raises",
        "raises an exception whose __str__ raises",
        "class Bad(Exception):\n"
        "    def __str__(self):\n"
        '        raise RuntimeError("no")\n\n\n'
        "def retrieve(query, k):\n    raise Bad()\n",
        expect=r"raised Bad: <str\(\) of Bad raised RuntimeError>$",
        before="handled",
    ),
    Hostile(
        "exception-of-50-mb",
        "raises an exception whose message is 50 MB",
        'def retrieve(query, k):\n    raise ValueError("x" * 50_000_000)\n',
        expect=r"raised ValueError: x{2000}\.\.\. \(49,998,000 more characters\)$",
        before="handled",
    ),
    Hostile(
        "control-and-surrogate-ids",
        "returns ids holding an escape sequence and a lone surrogate",
        'def retrieve(query, k):\n    return [("\\udc80\\x1b[31m", 1.0), ("d\\u202e", 0.5)]\n',
        hits={"\udc80\x1b[31m": 1.0, "d\u202e": 0.5},
    ),
    Hostile(
        "query-text-crosses-intact",
        "returns its query, holding a newline, a NUL and a lone surrogate, as its one id",
        "def retrieve(query, k):\n    return [(query, 1.0)]\n",
        query="a\nb\x00\u2028\udc80",
        hits={"a\nb\x00\u2028\udc80": 1.0},
    ),
    Hostile(
        "inherits-no-descriptor",
        "returns the targets of its descriptors above 2: none may be pytest's",
        "def retrieve(query, k):\n"
        "    found = []\n"
        "    for name in os.listdir('/proc/self/fd'):\n"
        "        try:\n"
        "            found.append(os.readlink(f'/proc/self/fd/{name}'))\n"
        "        except OSError:\n"
        "            pass\n"
        "    return [(link, 1.0) for link in found if 'inheritable-marker' in link]\n",
        hits={},
    ),
    Hostile(
        "import-writes-garbage",
        "writes bytes to its descriptors while it is imported",
        f'scribble(b"\\x7f\\xff\\xff\\xffgarbage")\n\n\ndef retrieve(query, k):\n    {HIT}\n',
        expect=r"cannot import retriever '[a-z_0-9]+:retrieve': " + NOT_DATA,
        before="hang",
    ),
    Hostile(
        "import-forks-and-exits",
        "forks a process that keeps its pipes open while it is imported, then exits",
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(600)\n"
        "    os._exit(0)\n"
        "note(pid)\n"
        "os._exit(0)\n",
        expect=r"cannot import retriever '[a-z_0-9]+:retrieve': " + ENDED + "0",
        timeout=20.0,
        before="silent",
    ),
    Hostile(
        "import-sleeps-past-its-limit",
        "sleeps while it is imported",
        "time.sleep(600)\n",
        expect=r"cannot import retriever '[a-z_0-9]+:retrieve': " + TIMED_OUT,
        timeout=0.5,
    ),
    # -- the same path without isolate: what the child hands over, the parent must word --------
    Hostile(
        "in-process-deeply-nested-hit",
        "isolate = false: returns one hit nested 100,000 deep",
        "def retrieve(query, k):\n"
        "    found = []\n"
        "    for _ in range(100_000):\n"
        "        found = [found]\n"
        "    return [found]\n",
        expect=r"returned <list object> at position 0; expected \(doc_id, score\)",
        isolate=False,
        before="traceback",
    ),
    Hostile(
        "in-process-exception-whose-str-raises",
        "isolate = false: raises an exception whose __str__ raises",
        "class Bad(Exception):\n"
        "    def __str__(self):\n"
        '        raise RuntimeError("no")\n\n\n'
        "def retrieve(query, k):\n    raise Bad()\n",
        expect=r"raised Bad: <str\(\) of Bad raised RuntimeError>$",
        isolate=False,
        before="traceback",
    ),
    Hostile(
        "in-process-id-of-5000-digits",
        "isolate = false: returns an integer id of 5,000 digits",
        "def retrieve(query, k):\n    return [(10**5000, 1.0)]\n",
        expect=r"returned doc id <int object> at position 0; ids are strings",
        isolate=False,
        before="traceback",
    ),
)

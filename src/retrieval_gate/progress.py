"""Progress of long steps (embedding, querying) that a user sees live, in a terminal or a CI log.

pytest captures output while an item runs, and the expensive part of a gate runs inside the
first item of each suite x system, so a plain progress bar on stderr is swallowed. The session
installs a :class:`ProgressSink` whose ``write`` goes around capture (through pytest's terminal
reporter); the steps report to :func:`task`. In a terminal one line is rewritten in place; in a
log (not a terminal) a line is written at every 10 % or every ``interval`` seconds, whichever
comes first, so a CI log shows steady signs of life without flooding. A step that finishes within
``QUIET_SECONDS`` prints nothing at all: a small suite's output stays as it was.

Steps run inside :func:`about` (the session names each suite x system), so a line says whose
step it is: ``retrieval gate: pkg-search x minilm: embedding documents 1024/8197 (12%)``.

What third-party libraries print while a gate runs (a model's load report, their own progress
bars, colour codes) is captured by pytest with the item; :func:`clean_captured` keeps it out of
the item's failure text.

Without a sink (the Python API, the ``retrieval_system`` fixture outside a gate session, xdist
workers whose output the controller does not show live) tasks report nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from retrieval_gate.display import shown

__all__ = [
    "QUIET_SECONDS",
    "ProgressSink",
    "Task",
    "about",
    "clean_captured",
    "install",
    "say",
    "task",
]

#: Steps shorter than this stay silent; longer ones report from then on.
QUIET_SECONDS = 2.0


@dataclass
class ProgressSink:
    """Where progress lines go. ``write(line, final)``: ``final`` is False for an in-place
    update in a terminal (the next write replaces it) and True for a line that stays."""

    write: Callable[[str, bool], None]
    interactive: bool
    interval: float = 5.0
    clock: Callable[[], float] = time.monotonic
    quiet: float | None = None  # seconds before the first line; None: QUIET_SECONDS


@dataclass
class Task:
    """One step with a known amount of work; update as work is done, close when finished."""

    desc: str
    total: int
    sink: ProgressSink | None
    done: int = 0
    about: str | None = None  # whose step: "suite x system"
    _started: float = field(default=0.0)
    _last_line: float = field(default=0.0)
    _last_tenth: int = field(default=0)
    _spoke: bool = field(default=False)

    def __post_init__(self) -> None:
        if self.sink is not None:
            self._started = self._last_line = self.sink.clock()

    def update(self, n: int) -> None:
        self.done = min(self.total, self.done + n)
        sink = self.sink
        if sink is None or self.total <= 0:
            return
        now = sink.clock()
        tenth = self.done * 10 // self.total
        quiet = QUIET_SECONDS if sink.quiet is None else sink.quiet
        if now - self._started < quiet:
            pass
        elif sink.interactive:
            sink.write(self._line(now), False)
            self._spoke = True
        elif tenth > self._last_tenth or now - self._last_line >= sink.interval or not self._spoke:
            sink.write(self._line(now), True)
            self._last_line = now
            self._spoke = True
        self._last_tenth = tenth

    def close(self) -> None:
        sink = self.sink
        if sink is None or self.total <= 0:
            return
        if not self._spoke:
            return  # a quick step: nothing was said, nothing to finish
        now = sink.clock()
        # A log already has the 100 % line when the last update crossed it.
        if sink.interactive or self._last_tenth < 10 or self.done < self.total:
            sink.write(self._line(now), True)

    def _line(self, now: float) -> str:
        elapsed = now - self._started
        percent = 100 * self.done // self.total
        whose = f"{self.about}: " if self.about else ""
        text = (
            f"retrieval gate: {whose}{self.desc} {self.done}/{self.total} ({percent}%), "
            f"{elapsed:.0f} s"
        )
        if 0 < self.done < self.total and elapsed > 0:
            left = elapsed * (self.total - self.done) / self.done
            text += f", about {left:.0f} s left"
        return shown(text)  # a suite's or system's name is the user's


_SINK: list[ProgressSink | None] = [None]


def install(sink: ProgressSink | None) -> None:
    """Make ``sink`` receive every task's progress (None: report nothing)."""
    _SINK[0] = sink


_ABOUT: list[str | None] = [None]


@contextmanager
def about(what: str) -> Iterator[None]:
    """Name the steps run inside: their lines say ``what`` (``suite x system``)."""
    previous = _ABOUT[0]
    _ABOUT[0] = what
    try:
        yield
    finally:
        _ABOUT[0] = previous


def task(desc: str, total: int) -> Task:
    """A task reporting to the installed sink, named by the enclosing :func:`about`."""
    return Task(desc=desc, total=total, sink=_SINK[0], about=_ABOUT[0])


def say(text: str) -> None:
    """Say ``text`` once, as a line that stays, where progress goes (nothing without a sink),
    named by the enclosing :func:`about`: for a step that waits on something outside (an
    embedding service rate limiting the run), which no count of work done would show."""
    sink = _SINK[0]
    if sink is None:
        return
    whose = f"{_ABOUT[0]}: " if _ABOUT[0] else ""
    sink.write(shown(f"retrieval gate: {whose}{text}"), True)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# A tqdm bar as it lands in a captured stream: "Batches: 100%|#####| 3/3 [00:00<00:00, ...]".
_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d+")


def clean_captured(text: str) -> str:
    """What a third-party library printed during a gate's run, as a failure shows it: colour
    codes removed, a line rewritten with carriage returns shown as its last state, progress bars
    and transformers' model "LOAD REPORT" block (table and notes, through the blank line after
    its notes) dropped. The rest, such as a user's retriever's own prints, is kept."""
    out: list[str] = []
    in_report = notes = False
    for raw in _ANSI.sub("", text).split("\n"):
        line = raw.rstrip("\r").rsplit("\r", 1)[-1]
        if "LOAD REPORT" in line:
            in_report, notes = True, False
            continue
        if in_report:
            if line.strip().startswith("Notes:"):
                notes = True
            elif notes and not line.strip():
                in_report = False
            elif not notes and line.strip() and not _table_line(line):
                in_report = False
                out.append(line)
            continue
        if _BAR.search(line):
            continue
        out.append(line)
    return "\n".join(out)


def _table_line(line: str) -> bool:
    return "|" in line or set(line.strip()) <= set("-+") or line.strip().startswith("Key")

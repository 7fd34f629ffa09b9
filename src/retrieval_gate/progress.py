"""Progress of long steps (embedding, querying) that a user sees live, in a terminal or a CI log.

pytest captures output while an item runs, and the expensive part of a gate runs inside the
first item of each suite x system, so a plain progress bar on stderr is swallowed. The session
installs a :class:`ProgressSink` whose ``write`` goes around capture (through pytest's terminal
reporter); the steps report to :func:`task`. In a terminal one line is rewritten in place; in a
log (not a terminal) a line is written at every 10 % or every ``interval`` seconds, whichever
comes first, so a CI log shows steady signs of life without flooding. A step that finishes within
``QUIET_SECONDS`` prints nothing at all: a small suite's output stays as it was.

Without a sink (the Python API, the ``retrieval_system`` fixture outside a gate session, xdist
workers whose output the controller does not show live) tasks report nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from retrieval_gate.display import shown

__all__ = ["QUIET_SECONDS", "ProgressSink", "Task", "install", "task"]

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
        text = f"retrieval gate: {self.desc} {self.done}/{self.total} ({percent}%), {elapsed:.0f} s"
        if 0 < self.done < self.total and elapsed > 0:
            left = elapsed * (self.total - self.done) / self.done
            text += f", about {left:.0f} s left"
        return shown(text)  # a suite's or system's name is the user's


_SINK: list[ProgressSink | None] = [None]


def install(sink: ProgressSink | None) -> None:
    """Make ``sink`` receive every task's progress (None: report nothing)."""
    _SINK[0] = sink


def task(desc: str, total: int) -> Task:
    """A task reporting to the installed sink."""
    return Task(desc=desc, total=total, sink=_SINK[0])

"""Progress lines: every tenth or every interval in a log, in place in a terminal."""

from __future__ import annotations

from retrieval_gate.progress import ProgressSink, Task


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _sink(interactive: bool, clock: Clock) -> tuple[ProgressSink, list[tuple[str, bool]]]:
    lines: list[tuple[str, bool]] = []
    sink = ProgressSink(
        write=lambda line, final: lines.append((line, final)),
        interactive=interactive,
        interval=5.0,
        clock=clock,
        quiet=0.0,
    )
    return sink, lines


def test_a_log_gets_a_line_per_tenth_and_per_interval() -> None:
    clock = Clock()
    sink, lines = _sink(False, clock)
    task = Task("embedding documents", 1000, sink)
    clock.now += 2
    task.update(50)  # the first update speaks (no quiet time here): 5 %, 2 s, 38 s left
    clock.now += 2
    task.update(10)  # 6 %: neither a new tenth nor 5 s since the last line
    clock.now += 4
    task.update(30)  # 9 %, 8 s: 6 s since the last line, past the 5 s interval
    clock.now += 1
    task.update(10)  # 10 %: a new tenth; 9 s elapsed, 900 left at 100 per 9 s = 81 s
    clock.now += 81
    task.update(900)
    task.close()  # the 100 % line is already there
    assert [line for line, _ in lines] == [
        "retrieval gate: embedding documents 50/1000 (5%), 2 s, about 38 s left",
        "retrieval gate: embedding documents 90/1000 (9%), 8 s, about 81 s left",
        "retrieval gate: embedding documents 100/1000 (10%), 9 s, about 81 s left",
        "retrieval gate: embedding documents 1000/1000 (100%), 90 s",
    ]
    assert all(final for _, final in lines)


def test_a_terminal_rewrites_one_line_and_keeps_the_last() -> None:
    clock = Clock()
    sink, lines = _sink(True, clock)
    task = Task("querying", 4, sink)
    for _ in range(4):
        clock.now += 1
        task.update(1)
    task.close()
    assert [final for _, final in lines] == [False, False, False, False, True]
    assert lines[-1][0] == "retrieval gate: querying 4/4 (100%), 4 s"


def test_without_a_sink_nothing_is_reported() -> None:
    task = Task("querying", 3, None)
    task.update(3)
    task.close()
    assert task.done == 3


def test_a_quick_step_says_nothing_and_a_long_one_speaks_after_the_quiet_time() -> None:
    clock = Clock()
    lines: list[tuple[str, bool]] = []
    sink = ProgressSink(
        write=lambda line, final: lines.append((line, final)),
        interactive=False,
        clock=clock,
        quiet=2.0,
    )
    quick = Task("querying", 10, sink)
    clock.now += 1
    quick.update(10)
    quick.close()
    assert lines == []
    slow = Task("embedding", 10, sink)
    clock.now += 1
    slow.update(5)  # 1 s: still quiet, though half done
    clock.now += 2
    slow.update(1)  # 3 s: the first line, whatever the tenth
    assert [line for line, _ in lines] == [
        "retrieval gate: embedding 6/10 (60%), 3 s, about 2 s left"
    ]


def test_a_step_inside_about_names_its_suite_and_system() -> None:
    from retrieval_gate import progress

    clock = Clock()
    sink, lines = _sink(False, clock)
    progress.install(sink)
    try:
        with progress.about("pkg-search x minilm"):
            task = progress.task("embedding documents", 2)
        outside = progress.task("querying", 2)
    finally:
        progress.install(None)
    clock.now += 1
    task.update(2)
    outside.update(2)
    assert [line for line, _ in lines] == [
        "retrieval gate: pkg-search x minilm: embedding documents 2/2 (100%), 1 s",
        "retrieval gate: querying 2/2 (100%), 1 s",
    ]


# What transformers' logger writes when a checkpoint has keys the model does not use (colour
# codes included), a tqdm bar rewritten with carriage returns, and a user's own print.
LOAD_REPORT = (
    "\x1b[1mBertModel LOAD REPORT\x1b[0m from: /models/minilm\n"
    "Key                     | Status     |  | \n"
    "------------------------+------------+--+-\n"
    "embeddings.position_ids | \x1b[38;5;208mUNEXPECTED\x1b[0m |  | \n"
    "\n"
    "\x1b[3mNotes:\n"
    "- UNEXPECTED\x1b[3m\t:can be ignored when loading from different task/architecture; not ok "
    "if you expect identical arch.\x1b[0m\n"
    "\n"
)


def test_captured_output_keeps_the_users_lines_and_drops_library_noise() -> None:
    from retrieval_gate.progress import clean_captured

    bar = "Batches:   0%|          | 0/3 [00:00<?, ?it/s]\rBatches: 100%|##########| 3/3 [00:00]\n"
    text = "retriever: warming up\n" + LOAD_REPORT + bar + "\x1b[31mindex ready\x1b[0m\n"
    assert clean_captured(text) == "retriever: warming up\nindex ready\n"
    # Nothing but noise: nothing left to show.
    assert clean_captured(LOAD_REPORT + bar).strip() == ""

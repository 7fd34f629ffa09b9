"""usercode.Worker: a system's bounded calls on one reused thread, with call_bounded's rules (the
time limit, exceptions and the context handed to the caller, a stuck call abandoned)."""

from __future__ import annotations

import contextvars
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from retrieval_gate.usercode import (
    CallTimeout,
    UserCodeFailure,
    Worker,
    call_user_code,
    describe,
)


def test_calls_run_one_after_another_on_one_thread() -> None:
    worker = Worker()
    threads = [worker.call(threading.current_thread, 5) for _ in range(20)]
    assert len(set(threads)) == 1
    assert threads[0] is not threading.current_thread()
    assert threads[0].daemon
    worker.close()
    threads[0].join(5)
    assert not threads[0].is_alive()  # closed: its thread ended


def test_a_call_past_its_limit_is_abandoned_and_the_next_gets_a_new_thread() -> None:
    worker = Worker()
    release = threading.Event()
    first = worker.call(threading.current_thread, 5)
    with pytest.raises(CallTimeout):
        worker.call(release.wait, 0.2)
    after = worker.call(threading.current_thread, 5)
    assert after is not first and first.is_alive()  # the stuck call still holds the first
    release.set()
    first.join(5)
    assert not first.is_alive()  # and ends once its call returns
    worker.close()


def test_what_the_call_raises_is_raised_in_the_caller_and_the_worker_goes_on() -> None:
    worker = Worker()

    def leave() -> None:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        worker.call(leave, 5)
    with pytest.raises(UserCodeFailure, match=r"called sys.exit\(3\)"):
        call_user_code(leave, 5, worker=worker)
    assert worker.call(lambda: 42, 5) == 42
    worker.close()


def test_a_call_from_inside_a_call_runs_in_a_thread_of_its_own_under_its_own_limit() -> None:
    worker = Worker()
    stuck = threading.Event()

    def outer() -> str:
        with pytest.raises(CallTimeout):
            worker.call(stuck.wait, 0.2)  # not waiting for itself: no deadlock
        return "done"

    assert worker.call(outer, 5) == "done"
    stuck.set()
    worker.close()


def test_the_callers_context_goes_with_the_call() -> None:
    variable: contextvars.ContextVar[str] = contextvars.ContextVar("variable", default="unset")
    worker = Worker()
    token = variable.set("the caller's")
    try:
        assert worker.call(variable.get, 5) == "the caller's"
    finally:
        variable.reset(token)
    assert worker.call(variable.get, 5) == "unset"
    worker.close()


def test_a_call_past_its_limit_is_not_held_up_by_a_call_made_from_inside_it() -> None:
    # The call made while the worker is busy runs in a thread of its own: waiting for it must
    # not keep the outer call from ending at its own limit.
    worker = Worker()
    stuck = threading.Event()
    outcome: list[BaseException] = []

    def outer() -> None:
        worker.call(stuck.wait, None)  # no limit of its own: waits until released

    def caller() -> None:
        try:
            worker.call(outer, 0.3)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=caller, daemon=True)
    thread.start()
    thread.join(10)
    finished = not thread.is_alive()
    stuck.set()
    worker.close()
    assert finished, "the outer call waited for the inner one past its own limit"
    assert len(outcome) == 1 and isinstance(outcome[0], CallTimeout)


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


class _Unrepresentable:
    def __repr__(self) -> str:
        raise RuntimeError("no")


def test_what_describes_the_users_failure_never_raises_and_stays_one_short_line() -> None:
    # Raised while describing a failure, this was the plugin's own traceback, blaming nobody.
    assert (
        describe(_Unprintable())
        == "raised _Unprintable: <str() of _Unprintable raised RuntimeError>"
    )
    assert describe(SystemExit(_Unrepresentable())) == (
        "called sys.exit(<repr() of _Unrepresentable raised RuntimeError>)"
    )
    assert UserCodeFailure("r", error=_Unprintable()).brief == (
        "_Unprintable: <str() of _Unprintable raised RuntimeError>"
    )
    found = describe(ValueError("line\nbreak " * 1000))
    assert "\n" not in found
    assert found.endswith("... (8,999 more characters)") and len(found) < 2100


class Interrupted(BaseException):
    """What a signal handler raises in the waiting caller (pytest-timeout's ``Failed`` is a
    BaseException; a service's SIGTERM handler raises what it likes)."""


def _interrupting(call: Callable[[Callable[[], None]], object], release: threading.Event) -> object:
    """What ``call(stuck)`` raised, where ``stuck`` signals the main thread, whose handler
    raises :class:`Interrupted` in the wait, then blocks until ``release``. The signal is sent
    again until the handler has run: one landing just before the wait blocks is handled only
    when the wait ends, its whole limit later."""
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread().ident == main
    fired = threading.Event()
    quiet = threading.Event()  # no more signals: the default handler (which ends) may return

    def interrupt(signum: int, frame: object) -> None:
        if not fired.is_set():
            fired.set()
            raise Interrupted("Timeout >30.0s")

    def stuck() -> None:
        try:
            while True:
                signal.pthread_kill(main, signal.SIGUSR1)
                if fired.wait(0.05):
                    break
        finally:
            quiet.set()
        release.wait()

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        call(stuck)
    except (Interrupted, Exception) as exc:
        return exc
    finally:
        assert quiet.wait(10)
        signal.signal(signal.SIGUSR1, previous)
    raise AssertionError("the wait was not interrupted")


def _isolated(check: Callable[..., None], *args: object) -> None:
    """Run ``check(*args)`` in a fresh interpreter and fail with its traceback if it fails.

    The signal tests run apart: in a process where OpenVINO compiled a model earlier
    (tests/embed/test_onnx.py, before this file in a serial run), a signal delivered to the
    main thread while it waits on a lock ended the whole test process with SIGSEGV. That is
    between OpenVINO and signals, not what these tests check; a plain script that compiles
    the same model and takes the same signal did not crash, so its cause is not settled."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(child, check, args))
    process.start()
    child.close()
    process.join(120)
    if process.is_alive():
        process.kill()
        pytest.fail("the isolated check did not end within 120 s")
    failure = parent.recv() if parent.poll() else f"ended with exit code {process.exitcode}"
    if failure:
        pytest.fail(failure, pytrace=False)


def _child(conn: Any, check: Callable[..., None], args: tuple[object, ...]) -> None:
    import traceback

    try:
        check(*args)
    except BaseException:
        conn.send(traceback.format_exc())
    else:
        conn.send("")
    finally:
        conn.close()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
def test_a_call_whose_wait_was_interrupted_is_abandoned_and_the_next_gets_a_new_thread() -> None:
    # A signal handler raising in the caller (pytest-timeout's, a service's SIGTERM) ends the
    # wait; the call left running must not stand in the way of the next, which would wait out
    # its whole limit behind it (or for ever, with no limit) and be called a timeout.
    _isolated(_interrupted_wait_is_abandoned)


def _interrupted_wait_is_abandoned() -> None:
    worker = Worker()
    release = threading.Event()
    try:
        raised = _interrupting(lambda stuck: worker.call(stuck, 30), release)
        assert isinstance(raised, Interrupted)
        assert worker.call(lambda: 42, 10) == 42
    finally:
        release.set()
        worker.close()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
@pytest.mark.parametrize("on_worker", [True, False], ids=["worker", "own-thread"])
def test_the_callers_interruption_during_the_wait_is_not_the_users_code_failing(
    on_worker: bool,
) -> None:
    # pytest-timeout's Failed raised by its signal handler in the waiting thread leaves as
    # itself, not as "retriever X raised Failed", which blamed the team's code.
    _isolated(_callers_interruption_is_its_own, on_worker)


def _callers_interruption_is_its_own(on_worker: bool) -> None:
    worker = Worker() if on_worker else None
    release = threading.Event()
    try:
        raised = _interrupting(lambda stuck: call_user_code(stuck, 30, worker=worker), release)
        assert isinstance(raised, Interrupted), raised

        # The same exception raised by the user's code is theirs, said in one line.
        def theirs() -> None:
            raise Interrupted("mine")

        with pytest.raises(UserCodeFailure, match=r"^raised Interrupted: mine$"):
            call_user_code(theirs, 10, worker=worker)
    finally:
        release.set()
        if worker is not None:
            worker.close()

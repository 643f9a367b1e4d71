"""util/parallel.py: calls side by side in threads, an iterator in a forked process; the
same results as one after the other, every error raised in order, nothing left running."""
from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from robot_ident.util import parallel


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)


def test_run_all_waits_for_every_call_and_raises_the_first_error_in_order(two_cpus):
    finished = threading.Event()

    def late_failure():
        time.sleep(0.05)
        raise ValueError("the first call fails")

    def slow():
        time.sleep(0.2)
        finished.set()
        return "slow"

    def early_failure():
        raise KeyError("the third call fails first")

    with parallel.thread_pool(3) as pool:
        assert pool is not None
        assert parallel.run_all(pool, [lambda: 1, slow, lambda: 3]) == [1, "slow", 3]
        finished.clear()
        with pytest.raises(ValueError, match="the first call fails"):
            parallel.run_all(pool, [late_failure, slow, early_failure])
        assert finished.is_set()            # nothing still runs when the error is raised
    assert not [t for t in threading.enumerate() if t.name.startswith("robot_ident")]     # ended with the pool


def test_one_processor_runs_the_calls_here(monkeypatch):
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 1)
    with parallel.thread_pool(9) as pool:
        assert pool is None
        me = threading.get_ident()
        assert parallel.run_all(pool, [threading.get_ident, threading.get_ident]) == [me, me]


def _pids(n):
    for _ in range(n):
        yield os.getpid()


def _fails_after(n):
    yield from range(n)
    raise ValueError(f"item {n} cannot be made")


def _dies_after(n):
    yield from range(n)
    os._exit(4)


def test_forked_items_come_from_another_process_in_order(two_cpus, monkeypatch):
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    got = list(parallel.forked_items(lambda: _pids(3), "testing"))
    assert len(got) == 3 and len(set(got)) == 1 and got[0] != os.getpid()
    assert list(parallel.forked_items(lambda: iter(range(5)), "testing")) == list(range(5))
    seen = []
    with pytest.raises(ValueError, match="item 2 cannot be made"):
        for x in parallel.forked_items(lambda: _fails_after(2), "testing"):
            seen.append(x)
    assert seen == [0, 1]
    with pytest.raises(RuntimeError, match=r"the process reading test items ended without an answer \(exit code 4\)"):
        list(parallel.forked_items(lambda: _dies_after(1), "reading test items"))
    it = parallel.forked_items(lambda: iter(range(10 ** 6)), "testing")    # the caller stops early
    assert next(it) == 0
    it.close()
    assert multiprocessing.active_children() == []


def test_no_fork_beside_another_thread_or_ros_and_none_to_be_had(two_cpus, monkeypatch):
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not parallel.can_fork()
        assert list(parallel.forked_items(lambda: _pids(2), "testing")) == [os.getpid()] * 2
    finally:
        stop.set()
        other.join()
    with monkeypatch.context() as m:
        m.setitem(__import__("sys").modules, "rclpy", object())
        assert not parallel.can_fork()
    monkeypatch.setattr(parallel, "can_fork", lambda: True)

    def no_process(self):
        raise OSError("fork: out of memory")
    monkeypatch.setattr(multiprocessing.get_context("fork").Process, "start", no_process)
    assert list(parallel.forked_items(lambda: _pids(2), "testing")) == [os.getpid()] * 2


def _fails():
    raise ValueError("the call fails")


def test_forked_call_gives_its_value_or_error_and_ends_with_close(two_cpus, monkeypatch):
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    assert parallel.ForkedCall(os.getpid, "testing").result() != os.getpid()
    with pytest.raises(ValueError, match="the call fails"):
        parallel.ForkedCall(_fails, "testing").result()
    slow = parallel.ForkedCall(lambda: time.sleep(30), "testing")     # closed before it answers
    assert multiprocessing.active_children() != []
    slow.close()
    assert multiprocessing.active_children() == []
    monkeypatch.setattr(parallel, "can_fork", lambda: False)          # here, at once
    calls = []
    here = parallel.ForkedCall(lambda: calls.append(os.getpid()) or "done", "testing")
    assert calls == [os.getpid()] and here.result() == "done"


class _TwoArguments(Exception):
    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")


def _fails_oddly():
    raise _TwoArguments("a record too long", "byte 12")


def test_an_error_that_does_not_cross_the_pipe_is_named_and_a_helper_forks_nothing(two_cpus, monkeypatch):
    """An exception whose constructor takes other arguments than its message cannot be rebuilt
    in the caller: it arrives as a RuntimeError with its type and text, not as a TypeError of
    the unpickling. A helper process (daemonic) forks nothing itself."""
    real = parallel.can_fork
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    with pytest.raises(RuntimeError, match=r"_TwoArguments: a record too long at byte 12"):
        parallel.ForkedCall(_fails_oddly, "testing").result()
    assert parallel.ForkedCall(real, "testing").result() is False      # asked inside the helper


def _counted_megabytes(made, n):
    for k in range(n):
        with made.get_lock():
            made.value += 1
        yield bytes([k]) * 2 ** 20          # larger than a pipe's buffer


def _wait_for(predicate, limit_s=30.0):
    end = time.monotonic() + limit_s
    while not predicate() and time.monotonic() < end:
        time.sleep(0.01)
    return predicate()


def test_forked_items_made_ahead_are_bounded_and_the_same(two_cpus, monkeypatch):
    """With `ahead`, the helper makes up to `ahead` items more than the pipe holds before
    the caller takes the first, and no more; the items, errors and ends are as without."""
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    made = multiprocessing.get_context("fork").Value("i", 0)
    it = parallel.forked_items(lambda: _counted_megabytes(made, 20), "testing", ahead=3)
    first = next(it)
    # 3 waiting, 1 in the pipe, 1 taken, 1 made and held back
    assert _wait_for(lambda: made.value >= 6)
    time.sleep(0.3)
    assert made.value == 6
    rest = list(it)
    assert [x[0] for x in [first] + rest] == list(range(20)) and made.value == 20
    assert list(parallel.forked_items(lambda: iter(range(5)), "testing", ahead=2)) == list(range(5))
    seen = []
    with pytest.raises(ValueError, match="item 2 cannot be made"):
        for x in parallel.forked_items(lambda: _fails_after(2), "testing", ahead=4):
            seen.append(x)
    assert seen == [0, 1]
    with pytest.raises(RuntimeError, match=r"ended without an answer \(exit code 4\)"):
        list(parallel.forked_items(lambda: _dies_after(1), "testing", ahead=4))
    with pytest.raises(TypeError, match="cannot pickle"):       # an item that cannot be pickled: its error
        list(parallel.forked_items(lambda: iter([1, threading.Lock()]), "testing", ahead=4))
    it = parallel.forked_items(lambda: iter(range(10 ** 6)), "testing", ahead=4)    # the caller stops early
    assert next(it) == 0
    it.close()
    assert multiprocessing.active_children() == []


_KILLED_CALLER = """
import multiprocessing, sys, time
from robot_ident.util import parallel
parallel.usable_cpus = lambda: 2
def megabytes():
    while True:
        yield bytes(2 ** 20)
it = parallel.forked_items(megabytes, "testing", ahead=int(sys.argv[1]))
next(it)
reader = multiprocessing.active_children()[0].pid
if sys.argv[2] == "later":      # a helper forked later, still busy when the caller dies
    later = parallel.ForkedCall(lambda: time.sleep(60), "testing")
print(reader, flush=True)
time.sleep(60)
"""


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"    # a zombie no init reaps here
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
@pytest.mark.parametrize("ahead, later", [(0, "alone"), (3, "alone"), (3, "later")])
def test_a_helper_ends_when_its_caller_is_killed(ahead, later):
    """No helper holds the caller's end of a helper's pipe (its own, or an earlier helper's
    when it was forked later): when the caller dies (SIGKILL, the OOM killer), the helper's
    next send fails and it ends instead of waiting forever, or for the later helper."""
    import select
    import signal
    import subprocess
    import sys
    caller = subprocess.Popen([sys.executable, "-c", _KILLED_CALLER, str(ahead), later], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        assert select.select([caller.stdout], [], [], 60)[0], "the caller did not start its helper"
        helper = int(caller.stdout.readline())
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        caller.stdout.close()
    try:
        assert _wait_for(lambda: _ended(helper), 20.0)
    finally:
        try:
            os.killpg(caller.pid, signal.SIGKILL)    # whatever is left of its group (the later helper)
        except ProcessLookupError:
            pass


def _exits_after(n, code):
    for k in range(n):
        yield bytes([k]) * 2 ** 20
    raise SystemExit(code)


def _dies_in_a_send(n):
    for k in range(n):
        yield bytes([k]) * 4 * 2 ** 20      # the helper's sender is in the middle of one when it dies
    time.sleep(0.2)
    os._exit(4)


def test_a_helper_that_stops_ahead_is_named_after_the_items_it_made(two_cpus, monkeypatch):
    """With `ahead`: a helper whose making ends without an error to send (SystemExit) sends
    the items made first, as without; one that dies in the middle of sending an item is
    named with its exit code, not reported as a broken message."""
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    for ahead in (0, 4):
        seen = []
        with pytest.raises(RuntimeError, match=r"ended without an answer \(exit code 5\)"):
            for x in parallel.forked_items(lambda: _exits_after(3, 5), "testing", ahead=ahead):
                seen.append(x[0])
        assert seen == [0, 1, 2]
    seen = []
    with pytest.raises(RuntimeError, match=r"the process testing ended without an answer \(exit code 4\)"):
        for x in parallel.forked_items(lambda: _dies_in_a_send(3), "testing", ahead=4):
            time.sleep(0.3)
            seen.append(x[0])
    assert seen == list(range(len(seen)))

"""Work side by side on the processors this process may use, with the same result as
one after the other.

- `usable_cpus`: the processors this process may run on (``taskset`` limits them).
- `thread_pool` / `run_all`: independent calls (the filter pipelines of a piece) in
  threads; scipy's IIR filter and numpy's array loops release the interpreter lock, so
  nine filters take about 0.65 of their time alone on two processors. Every call is
  waited for before `run_all` returns or raises, so no thread still writes when the
  caller cleans up after an error. The threads end with the pool.
- `can_fork` / `forked_items` / `ForkedCall`: an iterator or a call run in a forked
  process (the bag's batches read and decoded while this process filters the ones
  before; the gain check while this one estimates). Pinocchio and the CDR
  decoding hold the interpreter lock, so only a process runs them beside this one. A
  fork copies one thread of a process: none is forked beside another thread or ROS.
  The cutoff's candidates are scored in `ForkedCall`s too (estimation/auto_cutoff.py).
"""
from __future__ import annotations

import os
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Sequence

MAX_THREADS = 4


def usable_cpus() -> int:
    """Processors this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@contextmanager
def thread_pool(n_tasks: int):
    """A pool of one thread per usable processor (at most `n_tasks` and `MAX_THREADS`),
    or None when that is one: the calls then run in the caller's thread."""
    n = min(usable_cpus(), int(n_tasks), MAX_THREADS)
    if n < 2:
        yield None
        return
    pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="robot_ident")
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_all(pool, calls: Sequence[Callable[[], object]]) -> list:
    """[call() for call in calls], side by side in `pool` (None: in order here). Every call
    runs to its end; the first one's error in the calls' order is then raised."""
    if pool is None or len(calls) < 2:
        return [call() for call in calls]
    futures = [pool.submit(call) for call in calls]
    try:
        wait(futures)
    except BaseException:           # Ctrl-C while waiting: the calls not begun are dropped, the others end
        for f in futures:
            f.cancel()
        wait(futures)
        raise
    return [f.result() for f in futures]


def can_fork() -> bool:
    """A process may be forked here: no other thread runs (a fork copies one thread: a lock
    another one holds would never be released), ROS is not loaded, and this is no helper
    process itself (a daemonic process may not have children)."""
    import multiprocessing
    return (hasattr(os, "fork") and threading.active_count() == 1 and "rclpy" not in sys.modules
            and not multiprocessing.current_process().daemon)


def _child_signals() -> None:
    """In a forked helper process: Ctrl-C is left to the command, which ends its helpers,
    and SIGTERM ends it without a word (it inherited the command's handlers)."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _error_message(exc: BaseException) -> tuple:
    """("error", `exc`) as it is when it comes back from pickling as itself, else as a
    RuntimeError with its type, text and traceback (an exception whose constructor takes
    other arguments than its message cannot be rebuilt on the other side of a pipe)."""
    import pickle
    try:
        again = pickle.loads(pickle.dumps(exc))
        if type(again) is not type(exc) or again.args != exc.args:
            raise TypeError("not rebuilt as itself")
    except Exception:
        import traceback
        text = "".join(traceback.format_exception(exc)).rstrip()
        exc = RuntimeError(f"{type(exc).__name__}: {exc}\n(in a helper process)\n{text}")
    return "error", exc


def _produce(make, send, ahead: int) -> None:
    for end in list(_CALLER_ENDS):    # the caller's ends of every helper's pipe, this one's included: when
        end.close()                   # the caller dies, a send here fails and this process ends
    _child_signals()
    if ahead > 0:
        _produce_ahead(make, send, ahead)
        return
    try:
        for item in make():
            send.send(("item", item))
        send.send(("end", None))
    except Exception as exc:
        try:
            send.send(_error_message(exc))
        except OSError:         # the caller is gone
            pass
    send.close()


def _produce_ahead(make, send, ahead: int) -> None:
    """`_produce` with up to `ahead` items made before the caller takes them: a thread of
    the helper sends them while it makes the next. When a send fails (the caller has
    stopped reading, or an item cannot be pickled: that error is sent), the helper stops;
    when the making stops otherwise (SystemExit), the items made go first."""
    import queue
    made: queue.Queue = queue.Queue(ahead)
    broken = threading.Event()

    def sender() -> None:
        try:
            while True:
                message = made.get()
                if message[0] == "stop":
                    return
                send.send(message)
                if message[0] != "item":
                    return
        except Exception as exc:
            broken.set()
            try:
                send.send(_error_message(exc))
            except Exception:
                pass

    def put(message) -> bool:
        while not broken.is_set():
            try:
                made.put(message, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    last = False            # the sender has its last message
    try:
        for item in make():
            if not put(("item", item)):
                break
        else:
            last = put(("end", None))
    except Exception as exc:
        last = put(_error_message(exc))
    finally:
        if not last:
            put(("stop", None))
        thread.join()
    send.close()


_CALLER_ENDS: "weakref.WeakSet" = weakref.WeakSet()     # this process's ends of its helpers' pipes


class _Child:
    """A forked process producing ``make()``'s items through a pipe."""

    def __init__(self, proc, recv, what: str):
        self.proc, self.recv, self.what = proc, recv, what

    @classmethod
    def start(cls, make, what: str, ahead: int = 0):
        """The child, or None when none may be forked (`can_fork`), none can be started
        (memory, limits), or one processor is usable. `ahead`: see `forked_items`."""
        if usable_cpus() < 2 or not can_fork():
            return None
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        _CALLER_ENDS.add(recv)
        proc = ctx.Process(target=_produce, args=(make, send, ahead), daemon=True)
        try:
            proc.start()
        except OSError:
            recv.close()
            send.close()
            return None
        send.close()
        return cls(proc, recv, what)

    def items(self) -> Iterator:
        """Its items in order, its error raised in its place; it ends with this generator."""
        try:
            while True:
                try:
                    kind, item = self.recv.recv()
                except (EOFError, OSError):      # OSError: it died in the middle of a message
                    self.proc.join()
                    raise RuntimeError(f"the process {self.what} ended without an answer "
                                       f"(exit code {self.proc.exitcode})") from None
                if kind == "error":
                    raise item
                if kind == "end":
                    return
                yield item
        finally:
            self.end()

    def end(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()
        self.recv.close()


def forked_items(make: Callable[[], Iterable], what: str, ahead: int = 0) -> Iterator:
    """The items of ``make()``, made in a forked process while the caller works on the
    ones before. The process is held back when the caller lags: besides the item being
    made, at most the pipe's 64 KiB and one item being sent wait for the caller, and
    `ahead` more items (so `ahead` items' memory in the process). Its error is raised here,
    in order; a process that dies is named (`what`: what it was doing) with its exit
    code; it ends with this generator, however that ends. In this process instead when
    none may be forked."""
    child = _Child.start(make, what, ahead)
    if child is None:
        yield from make()
        return
    yield from child.items()


class ForkedCall:
    """``call()`` in a forked process while the caller goes on: `result()` waits for its
    value or raises its error (as `forked_items`); `close()` ends the process, which
    `result()` does too. In this process, at once, when none may be forked."""

    def __init__(self, call: Callable[[], object], what: str):
        self._child = _Child.start(lambda: iter([call()]), what)
        self._value, self._error = None, None
        if self._child is None:
            try:
                self._value = call()
            except Exception as exc:
                self._error = exc

    def result(self):
        if self._child is not None:
            items = self._child.items()
            try:
                self._value = next(items)
            except Exception as exc:
                self._error = exc
            finally:
                items.close()
                self._child = None
        if self._error is not None:
            raise self._error
        return self._value

    def close(self) -> None:
        if self._child is not None:
            self._child.end()
            self._child = None

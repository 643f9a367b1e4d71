"""Stopping a node process (robot_ident.online.shutdown), without ROS: the safe stop
runs before the shutdown on every path -- a signal (SIGINT, SIGTERM: Ctrl-C, kill,
launch shutdown), an exception in a callback, a KeyboardInterrupt -- and not at all
when the context was shut down from outside (nothing can be sent then)."""
import os
import signal

import pytest

from robot_ident.online.shutdown import StopRequest, install_signal_handlers, run_until_stopped


class Process:
    """A fake node process: records the order of stop, flush and shutdown."""

    def __init__(self, spins_before=3, raise_in_spin=None, signal_at=None, request=None):
        self.calls = []
        self.context_ok = True
        self.spins = 0
        self.spins_before = spins_before
        self.raise_in_spin = raise_in_spin
        self.signal_at = signal_at
        self.request = request or StopRequest()

    def spin_once(self):
        self.spins += 1
        if self.signal_at is not None and self.spins == self.signal_at:
            os.kill(os.getpid(), self.signal_at_signum)
        if self.raise_in_spin is not None and self.spins == self.spins_before:
            raise self.raise_in_spin
        if self.spins > 100:
            raise AssertionError("the loop did not stop")

    def ok(self):
        return self.context_ok

    def stop(self, reason):
        assert self.context_ok, "stop after shutdown"
        self.calls.append(("stop", reason))

    def flush(self):
        assert self.context_ok, "flush after shutdown"
        self.calls.append(("flush",))

    def shutdown(self):
        self.context_ok = False
        self.calls.append(("shutdown",))

    def run(self, **kw):
        return run_until_stopped(self.spin_once, self.ok, self.request, self.stop, self.flush, self.shutdown,
                                 **kw)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_first_and_shuts_down_after(signum):
    p = Process()
    restore = install_signal_handlers(p.request)
    try:
        p.signal_at, p.signal_at_signum = 2, signum
        out = p.run()
    finally:
        restore()
    name = signal.Signals(signum).name
    assert p.calls == [("stop", f"{name} received"), ("flush",), ("shutdown",)]
    assert out.error is None and out.reason == f"{name} received"
    assert p.spins == 2                      # left the loop right after the signal
    assert signal.getsignal(signum) is not p.request.on_signal   # handlers restored


def test_the_handlers_replace_the_default_keyboard_interrupt():
    before = signal.getsignal(signal.SIGINT)     # default_int_handler, or SIG_IGN in a background job
    req = StopRequest()
    restore = install_signal_handlers(req)
    try:
        os.kill(os.getpid(), signal.SIGINT)      # would raise KeyboardInterrupt with the default handler
        assert req.requested and req.signals == ["SIGINT"]
        os.kill(os.getpid(), signal.SIGINT)      # a second Ctrl-C: counted, the first reason stays
        assert req.signals == ["SIGINT", "SIGINT"] and req.reason == "SIGINT received"
    finally:
        restore()
    assert signal.getsignal(signal.SIGINT) is before


def test_an_exception_in_a_callback_stops_safely_and_is_handed_back():
    boom = RuntimeError("bad message")
    p = Process(raise_in_spin=boom)
    out = p.run()
    assert [c[0] for c in p.calls] == ["stop", "flush", "shutdown"]
    assert "exception in a callback" in p.calls[0][1] and "bad message" in p.calls[0][1]
    assert out.error is boom


def test_keyboard_interrupt_stops_safely():
    p = Process(raise_in_spin=KeyboardInterrupt())
    out = p.run()
    assert [c[0] for c in p.calls] == ["stop", "flush", "shutdown"]
    assert out.error is None and out.reason == "KeyboardInterrupt"


def test_external_shutdown_does_not_try_to_send():
    p = Process()
    orig = p.spin_once

    def spin():
        orig()
        if p.spins == 2:
            p.context_ok = False             # someone else shut the context down
    p.spin_once = spin
    out = p.run()
    assert p.calls == [("shutdown",)]
    assert "from outside" in out.reason


def test_a_failing_stop_still_shuts_down():
    p = Process(raise_in_spin=KeyboardInterrupt())
    logged = []

    def stop(reason):
        raise ValueError("publisher gone")
    out = run_until_stopped(p.spin_once, p.ok, p.request, stop, p.flush, p.shutdown, log_error=logged.append)
    assert p.calls == [("shutdown",)]
    assert isinstance(out.stop_error, ValueError) and "publisher gone" in logged[0]


def test_an_exception_raised_by_the_shutdown_under_way_is_no_error():
    p = Process()
    orig = p.spin_once

    def spin():
        orig()
        p.request.request("SIGINT received")
        raise RuntimeError("wait set invalid")     # what a spin can raise while stopping
    p.spin_once = spin
    out = p.run()
    assert out.error is None and [c[0] for c in p.calls] == ["stop", "flush", "shutdown"]


def test_startup_errors_are_one_line_and_name_the_parameter():
    from robot_ident.errors import ConfigError
    from robot_ident.online.shutdown import require_file_parameter, startup_error
    with pytest.raises(ConfigError) as e:
        require_file_parameter("torque_node", "config_file", "", "the robot_ident parameter YAML")
    line = startup_error("torque_node", e.value)
    assert line.startswith("torque_node: cannot start: parameter config_file is not set")
    assert "\n" not in line
    assert require_file_parameter("torque_node", "config_file", "/a.yaml", "x") == "/a.yaml"
    multi = startup_error("sim_arm_node", ValueError("bad\nvalue"))
    assert multi == "sim_arm_node: cannot start: bad value"
    assert startup_error("x", ZeroDivisionError("defect")) is None       # a bug keeps its traceback

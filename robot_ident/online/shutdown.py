"""Stopping a node process safely, without ROS: stop first, shut down after.

rclpy's own SIGINT handler shuts the context down at once, and the context's
on-shutdown callbacks run after that, when no publisher, client or action client can
send anything any more: a node that must tell a controller to hold (or cancel its
goal) on Ctrl-C is too late there. A node process therefore starts rclpy without its
signal handlers and runs `run_until_stopped`:

* `StopRequest` is what the signal handlers (SIGINT, SIGTERM: Ctrl-C, `kill`, launch
  shutdown) set; it does nothing else (a signal handler must not publish);
* the spin loop spins in short slices and leaves as soon as a stop is requested, the
  context is no longer ok (external shutdown) or a callback raised;
* then it calls `stop(reason)` -- the node's safe stop: hold / cancel, publish
  ``aborted`` -- and `flush()` (let what was sent go out) while the context still
  works, and only then `shutdown()`.

A second signal while stopping does not interrupt the stop (it is counted); the
stop is bounded by its own timeouts.
"""
from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Callable

SIGNALS = ("SIGINT", "SIGTERM")


@dataclass
class StopRequest:
    """Set by signal handlers; read by the spin loop."""

    reason: str | None = None
    signals: list = field(default_factory=list)

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def on_signal(self, signum, frame=None) -> None:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        self.signals.append(name)
        self.request(f"{name} received")


def install_signal_handlers(request: StopRequest, names=SIGNALS, signal_module=signal) -> Callable[[], None]:
    """Route SIGINT and SIGTERM to `request`; returns a function that restores the
    previous handlers. Only from the main thread (Python's rule for signal handlers)."""
    previous = {}
    for name in names:
        num = getattr(signal_module, name, None)
        if num is None:
            continue
        previous[num] = signal_module.signal(num, request.on_signal)

    def restore() -> None:
        for num, handler in previous.items():
            signal_module.signal(num, handler)
    return restore


@dataclass
class StopOutcome:
    reason: str
    error: BaseException | None = None       # what a callback raised, re-raised by the caller
    stop_error: BaseException | None = None  # what the safe stop itself raised


def run_until_stopped(spin_once: Callable[[], None], ok: Callable[[], bool], request: StopRequest,
                      stop: Callable[[str], None], flush: Callable[[], None] = lambda: None,
                      shutdown: Callable[[], None] = lambda: None, log_error=print) -> StopOutcome:
    """Spin until a stop is requested, the context ends or a callback raises; then stop,
    flush, and shut down -- in that order, each exactly once, shutdown even when the
    stop fails."""
    error = None
    reason = None
    try:
        while not request.requested:
            if not ok():
                reason = "the context was shut down from outside"
                break
            spin_once()
    except KeyboardInterrupt:
        reason = "KeyboardInterrupt"
    except Exception as exc:               # an exception in a callback: stop safely, then report
        if request.requested or not ok():  # raised by the shutdown under way, not a failure
            pass
        else:
            error = exc
            reason = f"exception in a callback: {type(exc).__name__}: {exc}"
    reason = request.reason or reason or "stopped"
    outcome = StopOutcome(reason, error)
    try:
        try:
            if ok():
                stop(reason)
                flush()
        except Exception as exc:
            outcome.stop_error = exc
            log_error(f"safe stop failed: {type(exc).__name__}: {exc}")
    finally:
        shutdown()
    return outcome


def startup_error(node: str, exc: BaseException) -> str | None:
    """The one line a node prints when it cannot start because of its parameters or
    files (a missing config_file, an unreadable URDF, a bad value), None for anything
    else (a defect: let the traceback show)."""
    from ..errors import RobotIdentError
    if isinstance(exc, (RobotIdentError, ValueError, OSError, KeyError)) or \
            type(exc).__name__ in ("ParameterException", "InvalidParameterValueException",
                                   "ParameterNotDeclaredException", "InvalidParameterTypeException"):
        text = " ".join(str(exc).split()) or type(exc).__name__
        return f"{node}: cannot start: {text}"
    return None


def require_file_parameter(node: str, name: str, value: str, what: str) -> str:
    """`value` of the file parameter `name`, or a ConfigError naming the node and the
    parameter when it is empty (a node started without its parameters)."""
    from ..errors import ConfigError
    if not value or not str(value).strip():
        raise ConfigError(f"parameter {name} is not set: {what} "
                          f"(e.g. ros2 run robot_ident {node} --ros-args -p {name}:=/path/...)")
    return str(value)

"""Helpers shared by the nodes: QoS profiles, parameter declaration with descriptors,
message classes for `msg_build`, clock access and shutdown. Imports rclpy."""
from __future__ import annotations

import array

import numpy as np
import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

# Joint states and currents arrive at up to 1 kHz; a second of them fits in the queue so a
# busy executor loses nothing (recording nodes).
SENSOR_DEPTH = 1000
# A node that acts on the arm's latest state (the excitation node's watchdogs, tracking check
# and abort hold) keeps only the newest few: with a second-deep queue a Python node that
# falls behind a 1 kHz broadcaster works on states hundreds of milliseconds old (measured on
# the real controller: a hold computed from a 0.35 s old position drove the arm back at
# 6 rad/s). Older states are worth nothing there.
LATEST_DEPTH = 5


def sensor_qos(depth: int = SENSOR_DEPTH) -> QoSProfile:
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def latched_qos(depth: int = 1) -> QoSProfile:
    """Transient local: late subscribers get the last message(s)."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


def declare(node, name: str, default, description: str, *, read_only: bool = False, low=None, high=None,
            step=None):
    """Declare a parameter with a descriptor (description, range, read-only) and return its value."""
    d = ParameterDescriptor(description=description, read_only=read_only)
    if low is not None or high is not None:
        if isinstance(default, bool):
            raise TypeError(f"parameter {name}: a range on a bool")
        if isinstance(default, int):
            d.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=int(step or 0))]
        else:
            d.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high),
                                                         step=float(step or 0.0))]
    return node.declare_parameter(name, default, d).value


def float_array(x) -> array.array:
    """rclpy wants array.array('d') (or lists) for float64[] fields, not numpy arrays."""
    return array.array("d", np.ascontiguousarray(x, dtype=np.float64).tobytes())


def now_ns(node) -> int:
    return int(node.get_clock().now().nanoseconds)


def message_types():
    """`msg_build.MessageTypes` filled with the rclpy message classes."""
    from builtin_interfaces.msg import Duration, Time
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Float64MultiArray, Header, MultiArrayDimension, MultiArrayLayout, String
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from ..online.msg_build import MessageTypes
    return MessageTypes(Header, Time, Duration, JointTrajectory, JointTrajectoryPoint, Float64MultiArray,
                        MultiArrayLayout, MultiArrayDimension, DiagnosticArray, DiagnosticStatus, KeyValue,
                        Clock, String, array=float_array)


def robot_description(node) -> str:
    """The URDF text: the robot_description parameter if set, else the urdf_file parameter (a
    path); ros2_control / gazebo blocks removed (`robot_ident.model.description.kinematic_urdf`)."""
    from ..model.description import description_or_path
    text = node.get_parameter("robot_description").value
    if text and text.strip():
        return description_or_path(text)
    path = node.get_parameter("urdf_file").value
    if not path:
        raise ValueError("set robot_description (URDF text) or urdf_file (a path)")
    return description_or_path(path)


def declare_robot_description(node) -> None:
    declare(node, "robot_description", "", "URDF text (takes precedence over urdf_file)", read_only=True)
    declare(node, "urdf_file", "", "path of the URDF (or xacro output) when robot_description is empty",
            read_only=True)


try:                                       # rclpy >= 3.x (Humble and later)
    from rclpy.executors import ExternalShutdownException
except ImportError:  # pragma: no cover
    class ExternalShutdownException(Exception):
        pass

# How long a stopping node may spin to get its last messages out (a cancel request's
# answer, a goal response still on its way); the stop itself goes out at once.
FLUSH_TIMEOUT = 1.0


def shutdown() -> None:
    """rclpy.try_shutdown where it exists, else shutdown if still running."""
    try_shutdown = getattr(rclpy, "try_shutdown", None)
    if try_shutdown is not None:
        try_shutdown()
    elif rclpy.ok():
        rclpy.shutdown()


def wait_for_acks(*publishers, timeout: float = 0.5) -> None:
    """Let what the publishers sent reach their (reliable) subscribers before the node goes."""
    from rclpy.duration import Duration
    for pub in filter(None, publishers):
        try:
            pub.wait_for_all_acked(Duration(seconds=timeout))
        except Exception:                  # not every rmw implements it
            pass


def _init(args) -> None:
    """rclpy.init without rclpy's signal handlers (Humble, Jazzy): ours stop the node
    first and shut the context down after (`online.shutdown`)."""
    try:
        from rclpy.signals import SignalHandlerOptions
    except ImportError:  # pragma: no cover - Foxy: rclpy's handlers stay; the stop runs if spin returns
        rclpy.init(args=args)
        return
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)


def run_node(make_node, args=None, multi_threaded: bool = False) -> int:
    """The life of a node process: init, spin until SIGINT/SIGTERM (Ctrl-C, kill, launch
    shutdown), an external shutdown or an exception in a callback; then the node's
    `safe_stop(reason)` (hold / cancel, publish the state) and a short flush while the
    context still works; then `close()`, destroy, and shut down. A node that cannot
    start because of its parameters prints one line and exits 1."""
    import os
    import sys
    import time

    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    from ..online.shutdown import StopRequest, install_signal_handlers, run_until_stopped, startup_error

    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "robot_ident node"
    request = StopRequest()
    restore = install_signal_handlers(request)
    _init(args)
    node = None
    outcome = None
    try:
        try:
            node = make_node()
        except Exception as exc:
            line = startup_error(prog, exc)
            if line is None:
                raise
            print(line, file=sys.stderr)
            return 1
        executor = MultiThreadedExecutor() if multi_threaded else SingleThreadedExecutor()
        executor.add_node(node)

        def stop(reason: str) -> None:
            safe_stop = getattr(node, "safe_stop", None)
            if callable(safe_stop):
                safe_stop(reason)

        def flush() -> None:
            pending = getattr(node, "stop_pending", None)
            if not callable(pending):
                return
            end = time.monotonic() + FLUSH_TIMEOUT
            while pending() and time.monotonic() < end and rclpy.ok():
                executor.spin_once(timeout_sec=0.01)
            done = getattr(node, "stop_flushed", None)
            if callable(done):
                done()

        def spin_once() -> None:
            try:
                executor.spin_once(timeout_sec=0.05)
            except ExternalShutdownException:
                pass                       # ok() is false now: the loop ends

        outcome = run_until_stopped(spin_once, rclpy.ok, request, stop, flush,
                                    log_error=lambda m: node.get_logger().error(m))
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if callable(close):
                close()
            node.destroy_node()
        shutdown()
        restore()
    if outcome is not None and outcome.error is not None:
        raise outcome.error
    return 0

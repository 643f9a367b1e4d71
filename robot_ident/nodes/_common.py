"""Helpers shared by the nodes: QoS profiles, parameter declaration with descriptors,
message classes for `msg_build`, clock access and shutdown. Imports rclpy."""
from __future__ import annotations

import array

import numpy as np
import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

# Joint states and currents arrive at up to 1 kHz; a second of them fits in the queue so a
# busy executor loses nothing.
SENSOR_DEPTH = 1000


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


def shutdown() -> None:
    """rclpy.try_shutdown where it exists, else shutdown if still running."""
    try_shutdown = getattr(rclpy, "try_shutdown", None)
    if try_shutdown is not None:
        try_shutdown()
    elif rclpy.ok():
        rclpy.shutdown()


def run_node(make_node, args=None, multi_threaded: bool = False) -> None:
    """The life of a node process, as in ros2/demos: init, spin until Ctrl-C or an
    external shutdown, then close (when the node has `close()`), destroy and shut down."""
    from rclpy.executors import MultiThreadedExecutor

    rclpy.init(args=args)
    node = None
    try:
        node = make_node()
        if multi_threaded:
            executor = MultiThreadedExecutor()
            executor.add_node(node)
            executor.spin()
        else:
            rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # SIGINT shuts the context down from another thread while the executor may be
        # taking a message; what that raises is part of shutting down, not a failure.
        if rclpy.ok():
            raise
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if callable(close):
                close()
            node.destroy_node()
        shutdown()

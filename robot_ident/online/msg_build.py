"""Build and read the nodes' other messages from plain data, without importing ROS.

Like `msgs.py`, the message classes are passed in (`MessageTypes`), so the same code
builds rclpy messages in the nodes and rosbags messages in the tests; fields are
read by attribute name.

* trajectory_msgs/JointTrajectory <-> the plain dict of
  `excitation.trajectory_points` (``joint_names``, ``points`` with positions,
  velocities, accelerations, time_from_start {sec, nanosec});
* std_msgs/Float64MultiArray with one labelled dimension;
* diagnostic_msgs/DiagnosticArray of one status with key-values;
* rosgraph_msgs/Clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..data.msgs import stamp_fields
from ..errors import SignalError

_NS = 1_000_000_000


@dataclass(frozen=True)
class MessageTypes:
    """The message classes the builders need; any may be None if unused."""

    Header: Any = None
    Time: Any = None
    Duration: Any = None
    JointTrajectory: Any = None
    JointTrajectoryPoint: Any = None
    Float64MultiArray: Any = None
    MultiArrayLayout: Any = None
    MultiArrayDimension: Any = None
    DiagnosticArray: Any = None
    DiagnosticStatus: Any = None
    KeyValue: Any = None
    Clock: Any = None
    String: Any = None
    array: Callable = np.asarray       # float arrays as the message library wants them

    @classmethod
    def from_rosbags(cls, typestore) -> "MessageTypes":
        T = typestore.types
        return cls(T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"], T["builtin_interfaces/msg/Duration"],
                   T["trajectory_msgs/msg/JointTrajectory"], T["trajectory_msgs/msg/JointTrajectoryPoint"],
                   T["std_msgs/msg/Float64MultiArray"], T["std_msgs/msg/MultiArrayLayout"],
                   T["std_msgs/msg/MultiArrayDimension"], T["diagnostic_msgs/msg/DiagnosticArray"],
                   T["diagnostic_msgs/msg/DiagnosticStatus"], T["diagnostic_msgs/msg/KeyValue"],
                   T["rosgraph_msgs/msg/Clock"], T["std_msgs/msg/String"])


def _floats(types: MessageTypes, x) -> Any:
    return types.array(np.asarray(x, dtype=np.float64))


def _header(types: MessageTypes, stamp_ns: int, frame_id: str = ""):
    sec, nanosec = stamp_fields(stamp_ns)
    return types.Header(stamp=types.Time(sec=sec, nanosec=nanosec), frame_id=frame_id)


def duration_seconds(d) -> float:
    return int(d.sec) + int(d.nanosec) * 1e-9


def controller_state_fields(msg) -> tuple | None:
    """(joint names, seconds since the running trajectory's start, header stamp in seconds) of a
    control_msgs/JointTrajectoryControllerState (``reference``; Humble's older releases only fill
    ``desired``), None without either."""
    ref = getattr(msg, "reference", None) or getattr(msg, "desired", None)
    if ref is None:
        return None
    return list(msg.joint_names), duration_seconds(ref.time_from_start), duration_seconds(msg.header.stamp)


# ---------------------------------------------------------------- JointTrajectory
def joint_trajectory_message(types: MessageTypes, points: dict, stamp_ns: int = 0):
    """trajectory_msgs/JointTrajectory from `trajectory_points`' dict. ``stamp_ns`` (else the
    dict's own ``stamp_ns``) 0 means "start when received" for the joint_trajectory_controller."""
    stamp_ns = stamp_ns or int(points.get("stamp_ns", 0))
    pts = []
    for p in points["points"]:
        tfs = p["time_from_start"]
        empty = np.zeros(0)
        pts.append(types.JointTrajectoryPoint(
            positions=_floats(types, p["positions"]), velocities=_floats(types, p.get("velocities", empty)),
            accelerations=_floats(types, p.get("accelerations", empty)), effort=_floats(types, empty),
            time_from_start=types.Duration(sec=int(tfs["sec"]), nanosec=int(tfs["nanosec"]))))
    return types.JointTrajectory(header=_header(types, stamp_ns), joint_names=list(points["joint_names"]),
                                 points=pts)


@dataclass(frozen=True)
class TrajectoryArrays:
    joint_names: tuple[str, ...]
    stamp_ns: int
    t: np.ndarray                 # (K,) time from start [s]
    positions: np.ndarray         # (K, n)
    velocities: np.ndarray | None
    accelerations: np.ndarray | None


def joint_trajectory_arrays(msg) -> TrajectoryArrays:
    """A JointTrajectory as arrays; velocities / accelerations None unless every point has them."""
    names = tuple(msg.joint_names)
    n = len(names)
    if len(set(names)) != n:
        raise SignalError(f"trajectory lists a joint twice: {names}")
    pts = list(msg.points)
    t = np.array([duration_seconds(p.time_from_start) for p in pts], dtype=float)
    if t.size and (np.diff(t) <= 0).any():
        raise SignalError("trajectory times_from_start are not strictly increasing")

    def field(name):
        rows = [np.asarray(getattr(p, name), dtype=float) for p in pts]
        if not rows or any(r.size == 0 for r in rows):
            return None
        for k, r in enumerate(rows):
            if r.size != n:
                raise SignalError(f"trajectory point {k}: {name} has {r.size} values for {n} joints")
        return np.vstack(rows)

    pos = field("positions")
    if pos is None and pts:
        raise SignalError("trajectory point without positions")
    if pos is not None and not np.isfinite(pos).all():
        raise SignalError("trajectory positions are not finite")
    from ..data.msgs import stamp_ns
    return TrajectoryArrays(names, stamp_ns(msg), t, pos if pos is not None else np.zeros((0, n)),
                            field("velocities"), field("accelerations"))


# ------------------------------------------------------------------ std_msgs / diag
def labelled_array(types: MessageTypes, label: str, values: Sequence[float]):
    """Float64MultiArray with one dimension labelled `label` (size = stride = len(values))."""
    v = np.asarray(values, dtype=np.float64).ravel()
    dim = types.MultiArrayDimension(label=label, size=int(v.size), stride=int(v.size))
    return types.Float64MultiArray(layout=types.MultiArrayLayout(dim=[dim], data_offset=0),
                                   data=_floats(types, v))


def diagnostic_array(types: MessageTypes, stamp_ns: int, name: str, message: str,
                     key_values: Sequence[tuple[str, str]], level: int = 0, hardware_id: str = ""):
    """DiagnosticArray with one DiagnosticStatus (level 0 OK, 1 WARN, 2 ERROR)."""
    # `byte` fields are bytes of length 1 in rclpy (DiagnosticStatus.OK == b'\x00'), ints in rosbags.
    lvl = level.to_bytes(1, "little") if isinstance(getattr(types.DiagnosticStatus, "OK", 0), bytes) else level
    status = types.DiagnosticStatus(level=lvl, name=name, message=message, hardware_id=hardware_id,
                                    values=[types.KeyValue(key=str(k), value=str(v)) for k, v in key_values])
    return types.DiagnosticArray(header=_header(types, stamp_ns), status=[status])


def clock_message(types: MessageTypes, stamp_ns: int):
    sec, nanosec = stamp_fields(stamp_ns)
    return types.Clock(clock=types.Time(sec=sec, nanosec=nanosec))

"""ROS message <-> arrays, duck-typed.

Attributes are read by name, so the same functions accept rclpy messages, rosbags'
deserialised messages, or any object with the same fields; nothing here imports
ROS. Message *construction* takes the message classes as arguments for the same
reason (`joint_state_message`).

* sensor_msgs/msg/JointState: ``header.stamp.{sec,nanosec}``, ``name[]``,
  ``position[]``, ``velocity[]``, ``effort[]`` (empty arrays mean "not published").
* control_msgs/msg/DynamicJointState: ``header``, ``joint_names[]``,
  ``interface_values[i].interface_names[]`` / ``.values[]``.

`JointStreamCollector` accumulates messages of one topic into a `sync.JointStream`;
the bag reader and the ROS nodes both use it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..errors import SignalError
from .joint_stream import JointStream

_NS = 1_000_000_000
_EMPTY = np.zeros(0)


def _attr(msg, name: str, what: str):
    try:
        return getattr(msg, name)
    except AttributeError:
        raise SignalError(f"{what} has no field {name!r} (got a {type(msg).__name__})") from None


def stamp_ns(msg) -> int:
    """Header stamp of a message (or a stamp / Time object itself) in integer nanoseconds."""
    stamp = getattr(msg, "header", msg)
    stamp = getattr(stamp, "stamp", stamp)
    try:
        return int(stamp.sec) * _NS + int(stamp.nanosec)
    except AttributeError:
        raise SignalError(f"message of type {type(msg).__name__} has no header.stamp.sec/nanosec") from None


def stamp_fields(ns: int) -> tuple[int, int]:
    """(sec, nanosec) of integer nanoseconds (nanosec in [0, 1e9) also for negative times)."""
    sec, nanosec = divmod(int(ns), _NS)
    return int(sec), int(nanosec)


def _floats(values) -> np.ndarray:
    if values is None:
        return _EMPTY
    if isinstance(values, np.ndarray) and values.dtype == np.float64:
        return values
    return np.asarray(values, dtype=float)


@dataclass(frozen=True)
class JointStateArrays:
    stamp_ns: int
    names: tuple[str, ...]
    position: np.ndarray     # empty when not published
    velocity: np.ndarray
    effort: np.ndarray


def joint_state_arrays(msg) -> JointStateArrays:
    """A sensor_msgs/JointState as arrays."""
    what = "JointState message"
    return JointStateArrays(stamp_ns(msg), tuple(_attr(msg, "name", what)),
                            _floats(_attr(msg, "position", what)), _floats(_attr(msg, "velocity", what)),
                            _floats(_attr(msg, "effort", what)))


def dynamic_joint_state_values(msg, interface: str) -> tuple[int, tuple[str, ...], np.ndarray]:
    """(stamp_ns, joint names, values of `interface` per joint) of a control_msgs/DynamicJointState;
    NaN for a joint that lacks the interface."""
    what = "DynamicJointState message"
    names = tuple(_attr(msg, "joint_names", what))
    ivs = _attr(msg, "interface_values", what)
    if len(ivs) != len(names):
        raise SignalError(f"DynamicJointState message has {len(names)} joint names but "
                          f"{len(ivs)} interface_values entries")
    out = np.full(len(names), np.nan)
    for k, iv in enumerate(ivs):
        inames = iv.interface_names
        try:
            i = list(inames).index(interface)
        except ValueError:
            continue
        vals = iv.values
        if i < len(vals):
            out[k] = float(vals[i])
    return stamp_ns(msg), names, out


class JointStreamCollector:
    """Accumulates messages of one topic into a `JointStream`.

    ``kind`` is ``'joint_state'`` (fields ``position``, ``velocity``, ``effort``) or
    ``'dynamic_joint_state'`` (a field named after ``interface``, and ``position`` too: the
    positions let `sync.synchronise` measure the lag between the topics; NaN where a
    joint has no position interface)."""

    def __init__(self, topic: str, kind: str, interface: str | None = None):
        if kind not in ("joint_state", "dynamic_joint_state"):
            raise ValueError(f"unknown stream kind {kind!r}")
        if kind == "dynamic_joint_state" and not interface:
            raise ValueError("a dynamic_joint_state stream needs the interface name")
        self.topic, self.kind, self.interface = topic, kind, interface
        self._stamps: list[int] = []
        self._received: list[int] = []
        self._names: list[tuple[str, ...]] = []
        self._interned: dict[tuple[str, ...], tuple[str, ...]] = {}
        if kind == "joint_state":
            self._fields = {"position": [], "velocity": [], "effort": []}
        else:
            self._fields = {interface: []}
            if interface != "position":
                self._fields["position"] = []

    def __len__(self) -> int:
        return len(self._stamps)

    def _intern(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return self._interned.setdefault(names, names)

    def add(self, msg, received_ns: int | None = None) -> None:
        """Append a message; `received_ns` is its receive (bag log) time, if known."""
        if received_ns is not None:
            self._received.append(int(received_ns))
        if self.kind == "joint_state":
            a = joint_state_arrays(msg)
            self._stamps.append(a.stamp_ns)
            self._names.append(self._intern(a.names))
            self._fields["position"].append(a.position)
            self._fields["velocity"].append(a.velocity)
            self._fields["effort"].append(a.effort)
        else:
            s, names, values = dynamic_joint_state_values(msg, self.interface)
            self._stamps.append(s)
            self._names.append(self._intern(names))
            self._fields[self.interface].append(values)
            if "position" in self._fields and self.interface != "position":
                self._fields["position"].append(dynamic_joint_state_values(msg, "position")[2])

    def stream(self) -> JointStream:
        stamps = np.asarray(self._stamps, dtype=np.int64)
        received = (np.asarray(self._received, dtype=np.int64)
                    if self._received and len(self._received) == len(self._stamps) else None)
        if len(self._interned) == 1 and all(
                all(len(v) == len(self._names[0]) for v in vals) for vals in self._fields.values()):
            # every message lists the same joints with full arrays: use matrices
            names = self._names[0]
            fields = {}
            for f, vals in self._fields.items():
                fields[f] = np.vstack(vals) if vals else np.zeros((0, len(names)))
            return JointStream(self.topic, stamps, names, fields, received)
        fields = {f: [v for v in vals] for f, vals in self._fields.items()}
        return JointStream(self.topic, stamps, list(self._names), fields, received)


def joint_state_message(JointState, Header, Time, stamp: int, names: Sequence[str],
                        position=(), velocity=(), effort=(), frame_id: str = "",
                        array: Callable = np.asarray):
    """Build a JointState from the given message classes (rclpy or rosbags types).

    `array` converts float arrays for the message library: rosbags wants numpy
    float64 arrays (the default), rclpy accepts lists or ``array.array('d', ...)``."""
    sec, nanosec = stamp_fields(stamp)

    def conv(x):
        return array(np.asarray(x, dtype=np.float64))

    return JointState(header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame_id),
                      name=list(names), position=conv(position), velocity=conv(velocity),
                      effort=conv(effort))


def dynamic_joint_state_message(DynamicJointState, InterfaceValue, Header, Time, stamp: int,
                                names: Sequence[str], interfaces: dict, frame_id: str = "",
                                array: Callable = np.asarray):
    """Build a DynamicJointState: ``interfaces`` maps interface name -> per-joint values."""
    sec, nanosec = stamp_fields(stamp)
    inames = list(interfaces)
    cols = np.column_stack([np.asarray(interfaces[i], dtype=np.float64) for i in inames])
    ivs = [InterfaceValue(interface_names=list(inames), values=array(cols[k].copy()))
           for k in range(len(names))]
    return DynamicJointState(header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame_id),
                             joint_names=list(names), interface_values=ivs)

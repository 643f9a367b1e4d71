"""The torque node's logic without ROS: motor currents -> joint efforts, message by message.

`EffortConverter` takes joint-state messages and messages of the configured current
source (rclpy or rosbags messages, read by attribute name) and returns
`EffortSample`s -- the joint efforts of one current measurement, stamped with that
measurement's header stamp, with the positions and velocities of the latest joint
state if it is at most `max_state_age_s` older or newer (else without them).

Current sources (see `io.config`): ``dynamic_joint_states`` (a DynamicJointState
interface), ``joint_states_effort`` (currents in a JointState's effort field) and
``effort`` (the effort field already holds efforts; direct actuators). When the
current topic is the joint-state topic, each joint-state message gives one sample.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..data.msgs import dynamic_joint_state_values, joint_state_arrays


@dataclass(frozen=True)
class EffortSample:
    stamp_ns: int
    names: tuple[str, ...]
    position: np.ndarray       # empty when no recent joint state
    velocity: np.ndarray       # empty when not known
    effort: np.ndarray


class EffortConverter:
    def __init__(self, joints: Sequence[str], actuators, current_kind: str = "dynamic_joint_state",
                 current_interface: str = "current", shared_topic: bool = False, max_state_age_s: float = 0.05):
        self.joints = tuple(joints)
        self.actuators = actuators.for_joints(self.joints)
        self.current_kind = current_kind
        self.current_interface = current_interface
        self.shared_topic = shared_topic
        self.max_state_age_ns = int(round(max_state_age_s * 1e9))
        self._state: tuple[int, np.ndarray, np.ndarray] | None = None
        self.skipped = 0             # current messages without every joint (or with NaN)

    @classmethod
    def from_config(cls, cfg, max_state_age_s: float = 0.05) -> "EffortConverter":
        return cls(cfg.joints, cfg.drive, cfg.current_kind, cfg.current_interface,
                   cfg.current_topic == cfg.joint_states_topic, max_state_age_s)

    def _pick(self, names: Sequence[str], values: np.ndarray) -> np.ndarray | None:
        if values.size != len(names):
            return None
        index = {n: i for i, n in enumerate(names)}
        if any(j not in index for j in self.joints):
            return None
        return values[[index[j] for j in self.joints]]

    def on_joint_state(self, msg) -> EffortSample | None:
        a = joint_state_arrays(msg)
        q = self._pick(a.names, a.position)
        if q is not None and np.isfinite(q).all():
            qd = self._pick(a.names, a.velocity)
            self._state = (a.stamp_ns, q, qd if qd is not None and np.isfinite(qd).all() else np.zeros(0))
        if self.shared_topic:
            return self._sample(a.stamp_ns, self._pick(a.names, a.effort))
        return None

    def on_current(self, msg) -> EffortSample | None:
        if self.current_kind == "dynamic_joint_state":
            stamp, names, values = dynamic_joint_state_values(msg, self.current_interface)
        else:
            a = joint_state_arrays(msg)
            stamp, names, values = a.stamp_ns, a.names, a.effort
        return self._sample(stamp, self._pick(names, values))

    def _sample(self, stamp: int, current: np.ndarray | None) -> EffortSample | None:
        if current is None or not np.isfinite(current).all():
            self.skipped += 1
            return None
        effort = self.actuators.efforts(current[None, :])[0]
        q = qd = np.zeros(0)
        if self._state is not None and abs(stamp - self._state[0]) <= self.max_state_age_ns:
            q, qd = self._state[1], self._state[2]
        return EffortSample(stamp, self.joints, q, qd, effort)


class CurrentSynthesiser:
    """The inverse, for simulators without a current interface (Gazebo): a JointState's
    effort field -> the currents the actuators would draw, per message."""

    def __init__(self, joints: Sequence[str], actuators):
        self.joints = tuple(joints)
        self.actuators = actuators.for_joints(self.joints)
        self.skipped = 0

    def on_controller_state(self, msg) -> EffortSample | None:
        """The same from a joint_trajectory_controller's ``~/controller_state`` (control_msgs/
        JointTrajectoryControllerState) with an effort command interface: the efforts it commands
        (``output.effort``), which a simulator applies as they are. Gazebo Fortress's
        ign_ros2_control never writes the effort state interface (its /joint_states efforts read
        0); the commanded effort is what it applies to the joint."""
        from types import SimpleNamespace
        fb = getattr(msg, "feedback", None) or getattr(msg, "actual", None)
        return self.on_joint_state(SimpleNamespace(
            header=msg.header, name=list(msg.joint_names), position=list(getattr(fb, "positions", ()) or ()),
            velocity=[], effort=list(msg.output.effort)))

    def on_joint_state(self, msg) -> EffortSample | None:
        """An `EffortSample` whose ``effort`` field holds the synthesised currents."""
        a = joint_state_arrays(msg)
        index = {n: i for i, n in enumerate(a.names)}
        if a.effort.size != len(a.names) or any(j not in index for j in self.joints):
            self.skipped += 1
            return None
        idx = [index[j] for j in self.joints]
        effort = a.effort[idx]
        if not np.isfinite(effort).all():
            self.skipped += 1
            return None
        pos = a.position[idx] if a.position.size == len(a.names) else np.zeros(0)
        return EffortSample(a.stamp_ns, self.joints, pos, np.zeros(0), self.actuators.currents(effort[None, :])[0])

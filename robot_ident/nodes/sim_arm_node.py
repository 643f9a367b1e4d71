"""sim_arm_node: the MuJoCo simulated arm as a ROS node (no Gazebo, no hardware).

Steps `robot_ident.sim.stepper.SteppingArm` (the arm of ``robot-ident simulate``:
friction, armature, offsets, payload and noise from the config's ``simulation``
section) on its own thread at ``control_rate`` in sim time, paced by
``real_time_factor``, and publishes what a ros2_control arm publishes:

* ``/joint_states`` (sensor_msgs/JointState: position, velocity, measured effort);
* ``/dynamic_joint_states`` (control_msgs/DynamicJointState: position, velocity,
  effort and ``current`` from the effort through the inverse actuator model);
* ``/clock`` (rosgraph_msgs/Clock) so the other nodes run with use_sim_time;

and serves ``/<controller>/follow_joint_trajectory`` and
``/<controller>/joint_trajectory`` like a joint_trajectory_controller (goals outside
the position limits are rejected; a new goal preempts the running one; cancel holds).
Message stamps are sim time. ``~/push`` (geometry_msgs/WrenchStamped) pushes a link for
``push_duration``: a contact for the monitor node to find.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import DynamicJointState, InterfaceValue, JointTrajectoryControllerState
from geometry_msgs.msg import WrenchStamped
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory

from ..data.msgs import dynamic_joint_state_message, joint_state_message
from ..errors import TrajectoryError
from ..online.msg_build import clock_message, joint_trajectory_arrays
from ..online.shutdown import require_file_parameter
from ..sim.stepper import INVALID_GOAL, SUCCESSFUL, build_stepping_arm, goal_outcome
from ._common import (
    declare,
    declare_robot_description,
    float_array,
    message_types,
    robot_description,
    run_node,
    sensor_qos,
)

_NS = 1_000_000_000


class SimArmNode(Node):
    def __init__(self):
        super().__init__("sim_arm_node")
        declare_robot_description(self)
        config_file = declare(self, "config_file", "", "robot_ident parameter YAML (joints, actuators, "
                              "simulation section)", read_only=True)
        controller = declare(self, "controller", "joint_trajectory_controller", "served controller name",
                             read_only=True)
        rate = declare(self, "control_rate", 1000.0, "physics/control rate [Hz]", read_only=True,
                       low=100.0, high=10000.0)
        self.js_every = max(1, int(round(rate / declare(self, "joint_state_rate", 500.0, "joint state "
                                                        "publish rate [Hz]", read_only=True, low=1.0,
                                                        high=10000.0))))
        self.djs_every = max(1, int(round(rate / declare(self, "dynamic_joint_state_rate", 500.0,
                                                         "dynamic joint state publish rate [Hz]",
                                                         read_only=True, low=1.0, high=10000.0))))
        self.clock_every = max(1, int(round(rate / declare(self, "clock_rate", 250.0, "/clock publish rate "
                                                           "[Hz]", read_only=True, low=1.0, high=10000.0))))
        self.rtf = declare(self, "real_time_factor", 1.0, "sim seconds per wall second; 0: as fast as "
                           "possible", read_only=True, low=0.0, high=100.0)
        self.publish_clock = declare(self, "publish_clock", True, "publish /clock", read_only=True)
        self.goal_tolerance = declare(self, "goal_tolerance", 0.05, "default position goal tolerance [rad or m]",
                                      read_only=True, low=0.0, high=1.0)
        self.push_duration = declare(self, "push_duration", 0.5, "~/push (geometry_msgs/WrenchStamped: force in "
                                     "the world frame on the centre of mass of the link frame_id) lasts this long [s]",
                                     read_only=True, low=0.001, high=60.0)
        q0 = declare(self, "initial_positions", [0.0], "initial joint positions in the config's joint order; "
                     "[0.0] alone: the middle of each range", read_only=True)
        require_file_parameter("sim_arm_node", "config_file", config_file,
                               "the robot_ident parameter YAML (joints, actuators, simulation)")
        self.arm, self.cfg = build_stepping_arm(
            robot_description(self), config_file, None if list(q0) == [0.0] else np.asarray(q0, float), rate)
        self.joints = list(self.cfg.joints)
        self.actuators = self.cfg.drive.for_joints(self.joints)
        self._types = message_types()
        self._lock = threading.Lock()

        q = sensor_qos()
        self.js_pub = self.create_publisher(JointState, "/joint_states", q)
        self.djs_pub = self.create_publisher(DynamicJointState, "/dynamic_joint_states", q)
        self.clock_pub = self.create_publisher(Clock, "/clock", 10) if self.publish_clock else None
        # like the joint_trajectory_controller: the running trajectory's start (excitation_node's topic check)
        self.state_pub = self.create_publisher(JointTrajectoryControllerState, f"/{controller}/controller_state", 10)
        self.state_every = max(1, int(round(rate / 100.0)))
        cb = ReentrantCallbackGroup()
        self.create_subscription(JointTrajectory, f"/{controller}/joint_trajectory", self._on_trajectory, 10,
                                 callback_group=cb)
        self.create_subscription(WrenchStamped, "~/push", self._on_push, 10, callback_group=cb)
        self.server = ActionServer(self, FollowJointTrajectory, f"/{controller}/follow_joint_trajectory",
                                   execute_callback=self._execute, goal_callback=self._on_goal,
                                   cancel_callback=lambda _: CancelResponse.ACCEPT, callback_group=cb)
        self._running = True
        self._stopping = False          # set by safe_stop: running goals end, new ones are refused
        self._executing = 0
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        self.get_logger().info(f"simulated arm {', '.join(self.joints)} at {rate:g} Hz, "
                               f"real-time factor {self.rtf:g}")

    # ------------------------------------------------------------ sim loop
    def sim_time(self) -> float:
        return self.arm.time

    def _loop(self) -> None:
        wall0 = time.monotonic()
        while self._running and rclpy.ok():
            with self._lock:
                try:
                    out = self.arm.step()
                except TrajectoryError as exc:      # unstable: stop publishing, say why
                    self.get_logger().error(str(exc))
                    return
                k = self.arm.steps
            stamp = int(round((out.t - self.arm.dt) * _NS))     # the measurement's time
            try:
                if k % self.js_every == 0:
                    self.js_pub.publish(joint_state_message(JointState, Header, Time, stamp, self.joints, out.q,
                                                            out.qd, out.effort, array=float_array))
                if k % self.djs_every == 0:
                    cur = self.actuators.currents(out.effort[None, :])[0]
                    self.djs_pub.publish(dynamic_joint_state_message(
                        DynamicJointState, InterfaceValue, Header, Time, stamp, self.joints,
                        {"position": out.q, "velocity": out.qd, "effort": out.effort, "current": cur},
                        array=float_array))
                if k % self.state_every == 0:
                    self.state_pub.publish(self._controller_state(stamp))
                if self.clock_pub is not None and k % self.clock_every == 0:
                    self.clock_pub.publish(clock_message(self._types, int(round(out.t * _NS))))
            except Exception as exc:        # context shut down under us
                if rclpy.ok():
                    self.get_logger().error(f"publish failed: {exc}")
                return
            if self.rtf > 0:
                ahead = out.t / self.rtf - (time.monotonic() - wall0)
                if ahead > 0.002:
                    time.sleep(ahead)

    def _on_push(self, msg) -> None:
        """A contact for the monitor to find: the force pushes the link for push_duration."""
        from ..sim.mujoco_arm import ExternalForce
        f = msg.wrench.force
        with self._lock:
            now = self.arm.time
            try:
                self.arm.push(ExternalForce(msg.header.frame_id, (f.x, f.y, f.z), now, now + self.push_duration))
            except Exception as exc:    # an unknown link: say so, keep simulating
                self.get_logger().error(f"~/push: {exc}")
                return
        self.get_logger().info(f"pushing {msg.header.frame_id} with ({f.x:g}, {f.y:g}, {f.z:g}) N for "
                               f"{self.push_duration:g} s from t = {now:.3f} s")

    def _controller_state(self, stamp_ns: int):
        msg = JointTrajectoryControllerState()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, _NS)
        msg.joint_names = self.joints
        with self._lock:
            since = max(0.0, stamp_ns / _NS - self.arm.follower.started())
            msg.reference.positions = float_array(self.arm.follower.desired(stamp_ns / _NS)[0][0])
        msg.reference.time_from_start.sec, msg.reference.time_from_start.nanosec = divmod(int(since * _NS), _NS)
        return msg

    # -------------------------------------------------------- trajectories
    def _set(self, msg) -> tuple[int, str, int]:
        """Load a JointTrajectory into the follower: (code, reason, goal id)."""
        try:
            a = joint_trajectory_arrays(msg)
        except Exception as exc:
            return INVALID_GOAL, str(exc), -1
        with self._lock:
            code, why = self.arm.follower.check(a.joint_names, a.positions)
            if code != SUCCESSFUL:
                return code, why, -1
            now = self.sim_time()
            start = a.stamp_ns / _NS if a.stamp_ns > 0 else None
            try:
                gid = self.arm.follower.set(now, a.joint_names, a.t, a.positions, a.velocities, a.accelerations,
                                            start_time=start, q_now=self.arm.q_true, qd_now=self.arm.qd_true)
            except TrajectoryError as exc:
                return INVALID_GOAL, str(exc), -1
        return SUCCESSFUL, "", gid

    def _on_trajectory(self, msg) -> None:
        code, why, _ = self._set(msg)
        if code != SUCCESSFUL:
            self.get_logger().error(f"trajectory rejected: {why}")

    def _on_goal(self, goal) -> GoalResponse:
        if self._stopping:
            return GoalResponse.REJECT
        try:
            a = joint_trajectory_arrays(goal.trajectory)
        except Exception as exc:
            self.get_logger().error(f"goal rejected: {exc}")
            return GoalResponse.REJECT
        code, why = self.arm.follower.check(a.joint_names, a.positions)
        if code != SUCCESSFUL:
            self.get_logger().error(f"goal rejected: {why}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute(self, goal_handle):
        with self._lock:
            self._executing += 1
        try:
            return self._follow(goal_handle)
        finally:
            with self._lock:
                self._executing -= 1

    def _follow(self, goal_handle):
        result = FollowJointTrajectory.Result()
        code, why, gid = self._set(goal_handle.request.trajectory)
        if code != SUCCESSFUL:
            result.error_code, result.error_string = code, why
            goal_handle.abort()
            return result
        tol = self.goal_tolerance
        for t in goal_handle.request.goal_tolerance:
            if t.position > 0:
                tol = max(tol, float(t.position)) if tol > 0 else float(t.position)
        names = list(goal_handle.request.trajectory.joint_names)
        idx = [self.joints.index(j) for j in names]
        while rclpy.ok():
            with self._lock:
                f = self.arm.follower
                preempted = f.goal_id != gid
                now = self.sim_time()
                done = now >= f.end_time()
                q = self.arm.q_true
                stopping = self._stopping
                # a preempted goal leaves the follower to the newer trajectory (as the
                # joint_trajectory_controller does); a cancel or a shutdown holds where it is
                if (goal_handle.is_cancel_requested or stopping) and not preempted:
                    f.hold(q)
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                result.error_string = "canceled; holding position"
                return result
            if preempted:
                goal_handle.abort()
                result.error_string = "preempted by a newer trajectory"
                return result
            if stopping:
                goal_handle.abort()
                result.error_string = "the simulated arm is shutting down; holding position"
                return result
            if done:
                break
            fb = FollowJointTrajectory.Feedback()
            fb.joint_names = names
            fb.actual.positions = float_array(q[idx])
            goal_handle.publish_feedback(fb)
            time.sleep(0.02)
        with self._lock:
            q = self.arm.q_true
            final = self.arm.follower.final_position()
        code, why = goal_outcome(q[idx], final[idx], tol)
        result.error_code, result.error_string = code, why
        if code == SUCCESSFUL:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def safe_stop(self, reason: str) -> None:
        """Before the context shuts down: hold, and end running goals (aborted) so no
        execute callback is left inside a dying context."""
        self._stopping = True
        with self._lock:
            self.arm.follower.hold(self.arm.q_true)

    def stop_pending(self) -> bool:
        with self._lock:
            return self._executing > 0

    def close(self) -> None:
        self._running = False
        self._thread.join(timeout=2.0)


def main(args=None):
    return run_node(SimArmNode, args, multi_threaded=True)


if __name__ == "__main__":
    main()

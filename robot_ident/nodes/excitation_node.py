"""excitation_node: drives the arm's trajectory controller through the excitation.

A thin shell around `robot_ident.online.excitation_run.ExcitationRun` (all decisions are made
there and tested without ROS): loads the URDF and the trajectory (or designs one), checks
it, approaches the start pose slowly, sends the excitation through FollowJointTrajectory
or the joint_trajectory topic, and publishes its phase on a transient-local topic.

Services: ``~/start`` (when ``autostart`` is false) and ``~/stop`` (std_srvs/Trigger).
"""
from __future__ import annotations

import threading
import time

from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance, JointTrajectoryControllerState
from rclpy.action import ActionClient
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration as RclpyDuration
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from ..io.config import load_config
from ..online.excitation_actions import (
    GOAL_PARAMETERS,
    SETTING_PARAMETERS,
    ExcitationSettings,
    HoldPosition,
    Phase,
    PublishPlan,
    PublishState,
    SendTrajectory,
)
from ..online.excitation_plan import prepare_excitation
from ..online.excitation_run import ExcitationRun
from ..online.msg_build import controller_state_fields, joint_trajectory_message
from ..online.shutdown import require_file_parameter
from ._common import (
    LATEST_DEPTH,
    declare,
    declare_robot_description,
    latched_qos,
    message_types,
    robot_description,
    run_node,
    sensor_qos,
    wait_for_acks,
)


class ExcitationNode(Node):
    def __init__(self):
        super().__init__("excitation_node")
        declare_robot_description(self)
        self.config_file = declare(self, "config_file", "", "robot_ident parameter YAML (joints, actuators, "
                                   "excitation.acceleration_limits, ...)", read_only=True)
        self.trajectory_file = declare(self, "trajectory_file", "", "excitation trajectory YAML "
                                       "(robot-ident design); empty: design one from the config", read_only=True)
        design_time = declare(self, "design_time", 0.0, "optimiser wall-time budget when designing [s]; 0: the "
                              "config's excitation.max_time", read_only=True, low=0.0, high=3600.0) or None
        controller = declare(self, "controller", "joint_trajectory_controller",
                             "name of the joint trajectory controller", read_only=True)
        interface = declare(self, "interface", "action", "'action' (FollowJointTrajectory) or 'topic' "
                            "(<controller>/joint_trajectory)", read_only=True)
        self.state_topic = declare(self, "state_topic", "/robot_ident/excitation_state",
                                   "where the phase is published (transient local)", read_only=True)
        self.allow_without_collision_model = declare(
            self, "allow_without_collision_model", False, "run even if the URDF has no <collision> geometry "
            "(self-collisions and obstacles then unchecked)", read_only=True)
        self.autostart = declare(self, "autostart", True, "start as soon as joint states (and the action "
                                 "server) are there; false: wait for ~/start")
        settings = ExcitationSettings(use_action=interface == "action", **{
            name: declare(self, name, getattr(ExcitationSettings, name), doc, read_only=True, low=low, high=high,
                          step=1 if name == "repetitions" else None)
            for name, (doc, low, high) in SETTING_PARAMETERS.items()})
        for name, (default, doc, low, high) in GOAL_PARAMETERS.items():
            setattr(self, name, declare(self, name, default, doc, read_only=True, low=low, high=high))

        require_file_parameter("excitation_node", "config_file", self.config_file,
                               "the robot_ident parameter YAML (joints, actuators, excitation)")
        self._urdf = robot_description(self)          # fails now, not later on the loader thread
        self._types = message_types()
        self.state_pub = self.create_publisher(String, self.state_topic, latched_qos())
        self.plan_approach_pub = self.create_publisher(JointTrajectory, "~/planned_approach", latched_qos())
        self.plan_excitation_pub = self.create_publisher(JointTrajectory, "~/planned_excitation", latched_qos())
        self.traj_pub = None
        self.action = None
        if settings.use_action:
            self.action = ActionClient(self, FollowJointTrajectory, f"/{controller}/follow_joint_trajectory")
        elif interface == "topic":
            self.traj_pub = self.create_publisher(JointTrajectory, f"/{controller}/joint_trajectory", 10)
        else:
            raise ValueError(f"parameter interface must be 'action' or 'topic', got {interface!r}")
        # The controller's state: whether it runs what was sent (it only logs a refused topic trajectory), and when
        self.create_subscription(JointTrajectoryControllerState, f"/{controller}/controller_state",
                                 self._on_controller_state, 10)
        self._publish_state(Phase.IDLE, "loading")
        # Loading (or designing) the plan may take a while: a thread, the executor keeps spinning.
        self.run: ExcitationRun | None = None
        self._settings = settings
        self._goal_handle = None
        self._goal_seq = 0
        self._inflight: list = []          # goal-response and cancel futures a stop waits for
        self._lock = threading.Lock()
        self._loader = threading.Thread(target=self._load, args=(design_time,), daemon=True)
        self._loader.start()

        self.create_subscription(JointState, load_config(self.config_file).joint_states_topic, self._on_joint_state,
                                 sensor_qos(LATEST_DEPTH))
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        # On the steady clock: with use_sim_time a timer on the node's clock stops with /clock.
        self.create_timer(0.05, self._on_timer, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _load(self, design_time: float | None) -> None:
        try:
            plan = prepare_excitation(self._urdf, self.config_file, self.trajectory_file or None,
                                      design_time=design_time,
                                      allow_without_collision_model=self.allow_without_collision_model or None)
            run = ExcitationRun(plan.trajectory, plan.limits, self._settings, plan.model, plan.collision)
        except Exception as exc:       # a bad file must not leave the node half alive
            self.get_logger().error(f"cannot prepare the excitation: {exc}")
            self._publish_state(Phase.ABORTED, f"cannot prepare the excitation: {exc}")
            return
        self.get_logger().info(f"excitation: {plan.source}, {self._settings.repetitions} x "
                               f"{float(plan.trajectory.duration):.2f} s; {run.report.summary()}; "
                               f"{plan.collision_report.summary()}")
        with self._lock:
            self.run, self._ready_at = run, time.monotonic()
        self._publish_state(Phase.IDLE, "ready")

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # ---------------------------------------------------------------- actions
    def _publish_state(self, phase: Phase, detail: str = "") -> None:
        self.state_pub.publish(String(data=phase.value))
        # rclpy wants one severity per logging call site
        if phase == Phase.ABORTED:
            self.get_logger().error(f"{phase.value}: {detail}")
        elif detail:
            self.get_logger().info(f"{phase.value}: {detail}")

    def _execute(self, actions) -> None:
        for a in actions:
            if isinstance(a, PublishState):
                self._publish_state(a.phase, a.detail)
            elif isinstance(a, SendTrajectory):
                self._send(a)
            elif isinstance(a, HoldPosition):
                self._hold(a)
            elif isinstance(a, PublishPlan):
                self.plan_approach_pub.publish(joint_trajectory_message(self._types, a.approach))
                self.plan_excitation_pub.publish(joint_trajectory_message(self._types, a.excitation))

    def _send(self, a: SendTrajectory) -> None:
        msg = joint_trajectory_message(self._types, a.points)        # stamp 0: start on receipt
        if self.traj_pub is not None:
            self.traj_pub.publish(msg)
            return self.run.sent(self._now())     # the latency to the controller counts from here
        goal = FollowJointTrajectory.Goal()
        goal.trajectory = msg
        names = list(a.points["joint_names"])
        if self.path_tolerance > 0:
            goal.path_tolerance = [JointTolerance(name=j, position=self.path_tolerance) for j in names]
        if self.goal_tolerance > 0:
            goal.goal_tolerance = [JointTolerance(name=j, position=self.goal_tolerance) for j in names]
        goal.goal_time_tolerance = RclpyDuration(seconds=self.goal_time_tolerance).to_msg()
        self._goal_seq = seq = self._goal_seq + 1
        self._goal_handle = None
        future = self.action.send_goal_async(goal)
        self.run.sent(self._now())
        self._inflight.append(future)
        future.add_done_callback(lambda f: self._on_goal_response(f, seq))

    def _hold(self, a: HoldPosition) -> None:
        """Rest within the limits: on the topic, or as a goal preempting the running one (canceled only if
        the hold goal is refused: a cancel is a step to rest on the JTC)."""
        msg = joint_trajectory_message(self._types, a.points)
        if a.note:
            self.get_logger().info(a.note)
        if self.traj_pub is not None:
            self.traj_pub.publish(msg)
            return
        running, self._goal_handle = self._goal_handle, None
        self._goal_seq += 1                  # the preempted goal's result is no news
        goal = FollowJointTrajectory.Goal()
        goal.trajectory = msg
        goal.goal_time_tolerance = RclpyDuration(seconds=self.goal_time_tolerance).to_msg()
        future = self.action.send_goal_async(goal)
        self._inflight += [future, answered := Future()]   # done once the answer is handled: a stop waits
        future.add_done_callback(lambda f: self._on_hold_response(f, running, answered))

    def _on_hold_response(self, future, running, answered) -> None:
        with self._lock:
            handle = future.result()
            if handle is None or not handle.accepted:
                self.get_logger().error("the controller refused the hold goal: canceling the running goal (the "
                                        "controller then stops at once)")
                if running is not None:
                    self._inflight.append(running.cancel_goal_async())
            answered.set_result(True)

    # ---------------------------------------------------------------- events
    def _on_goal_response(self, future, seq: int) -> None:
        with self._lock:
            handle = future.result()
            if seq != self._goal_seq or self.run is None:
                if handle is not None and handle.accepted:     # stopped while the goal was on its way
                    self._inflight.append(handle.cancel_goal_async())
                    self.get_logger().warning("canceled a goal accepted after the excitation stopped")
                return
            accepted = handle is not None and handle.accepted
            if accepted:
                self._goal_handle = handle
                handle.get_result_async().add_done_callback(lambda f: self._on_result(f, seq))
            self._execute(self.run.on_goal_response(self._now(), accepted))

    def _on_result(self, future, seq: int) -> None:
        with self._lock:
            if seq != self._goal_seq or self.run is None:
                return
            res = future.result()
            self._execute(self.run.on_result(self._now(), int(res.status), int(res.result.error_code),
                                             str(res.result.error_string)))

    def _on_joint_state(self, msg: JointState) -> None:
        with self._lock:
            if self.run is not None and self._clock_running():
                stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
                self._execute(self.run.on_joint_state(self._now(), msg.name, msg.position, msg.velocity, stamp,
                                                      wall=time.monotonic()))

    def _on_controller_state(self, msg) -> None:
        fields = controller_state_fields(msg)
        with self._lock:
            if fields and self.run is not None and self._clock_running():
                self._execute(self.run.on_controller_state(self._now(), *fields))

    def _clock_running(self) -> bool:
        """With use_sim_time the clock reads 0 until the first /clock message."""
        return self.get_clock().now().nanoseconds > 0

    def _ready_to_start(self) -> bool:
        """Fresh joint states and (unless dry run or topic interface) the action server."""
        age = self.run.joint_state_age(self._now())
        if age is None or age > self._settings.joint_state_timeout:
            return False
        if self.traj_pub is not None and self.run.controller_joints is None and time.monotonic() < self._ready_at + 3:
            return False                # the controller's state first (start() refuses without it)
        return self.action is None or self._settings.dry_run or self.action.server_is_ready()

    def _on_timer(self) -> None:
        with self._lock:
            if self.run is None:
                return
            now = self._now()
            if not self._clock_running():
                return
            if self.run.phase == Phase.IDLE and self.autostart:
                if not self._ready_to_start():
                    self.get_logger().info("waiting for joint states and the trajectory controller",
                                           throttle_duration_sec=5.0)
                    return
                self._execute(self.run.start(now, clock=self._now))
                return
            self._execute(self.run.tick(now, time.monotonic()))

    def _on_start(self, request, response):
        with self._lock:
            if self.run is None:
                response.success, response.message = False, "the excitation is not loaded yet"
            elif self.run.phase != Phase.IDLE:
                response.success, response.message = False, f"already {self.run.phase.value}"
            elif not self._ready_to_start():
                response.success, response.message = False, ("no fresh joint states, or the trajectory "
                                                             "controller's action server is not up")
            else:
                self._execute(self.run.start(self._now(), clock=self._now))
                response.success = self.run.phase != Phase.ABORTED
                response.message = self.run.phase.value + (f": {self.run.detail}" if self.run.detail else "")
        return response

    def _on_stop(self, request, response):
        with self._lock:
            if self.run is None or self.run.finished:
                response.success, response.message = False, "nothing to stop"
            else:
                self._execute(self.run.stop(self._now(), "stop service called"))
                response.success, response.message = True, "aborted"
        return response

    def safe_stop(self, reason: str) -> None:
        """`run_node`, before the context shuts down: cancel or hold, publish ``aborted``."""
        with self._lock:
            if self.run is not None and not self.run.finished:
                self._execute(self.run.stop(self._now(), f"node stopping: {reason}"))
            elif self.run is None:
                self._publish_state(Phase.ABORTED, f"node stopping before the excitation was loaded: {reason}")

    def stop_pending(self) -> bool:          # a goal response or a cancel answer is on its way
        with self._lock:
            self._inflight = [f for f in self._inflight if not f.done()]
            return bool(self._inflight)

    def stop_flushed(self) -> None:          # the hold and the state reach their subscribers
        wait_for_acks(self.traj_pub, self.state_pub)


def main(args=None):
    return run_node(ExcitationNode, args)


if __name__ == "__main__":
    main()

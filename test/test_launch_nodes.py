"""launch_testing: each node's topics, services and action with ROS 2.

sim_arm_node (joint states, dynamic joint states with currents, /clock, the
FollowJointTrajectory server), torque_node (efforts from the currents equal the
simulator's efforts at the same stamp), excitation_node in dry run (latched state,
planned trajectories) and identification_node (manual window services).
Skipped cleanly where ROS 2 is absent; the logic is tested without ROS elsewhere.
"""
import tempfile
import time
import unittest
from pathlib import Path

import pytest

launch_testing = pytest.importorskip("launch_testing")
rclpy = pytest.importorskip("rclpy")
launch_ros = pytest.importorskip("launch_ros")

import launch  # noqa: E402
import launch_testing.actions  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from control_msgs.msg import DynamicJointState  # noqa: E402
from launch_ros.actions import Node  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "config" / "demo_arm.yaml")
URDF = str(ROOT / "urdf" / "demo_arm.urdf")
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3"]
LATCHED = QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
SENSOR = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


@pytest.mark.launch_test
def generate_test_description():
    common = {"config_file": CONFIG, "urdf_file": URDF, "use_sim_time": True}
    return launch.LaunchDescription([
        Node(package="robot_ident", executable="sim_arm_node", name="sim_arm_node",
             parameters=[{"config_file": CONFIG, "urdf_file": URDF}]),
        Node(package="robot_ident", executable="torque_node", name="torque_node", parameters=[common]),
        Node(package="robot_ident", executable="excitation_node", name="excitation_node",
             parameters=[common, {"trajectory_file": str(ROOT / "config" / "demo_arm_excitation.yaml"),
                                  "dry_run": True, "repetitions": 2}]),
        Node(package="robot_ident", executable="identification_node", name="identification_node",
             parameters=[common, {"output_dir": tempfile.mkdtemp(prefix="robot_ident_nodes_")}]),
        launch_testing.actions.ReadyToTest(),
    ]), {}


class TestNodes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rclpy.init()
        cls.node = rclpy.create_node("test_robot_ident_nodes")

    @classmethod
    def tearDownClass(cls):
        cls.node.destroy_node()
        rclpy.shutdown()

    def collect(self, msg_type, topic, count, timeout=30.0, qos=SENSOR, accept=lambda m: True):
        got = []
        sub = self.node.create_subscription(msg_type, topic, lambda m: got.append(m) if accept(m) else None, qos)
        try:
            end = time.monotonic() + timeout
            while time.monotonic() < end and len(got) < count:
                rclpy.spin_once(self.node, timeout_sec=0.05)
        finally:
            self.node.destroy_subscription(sub)
        self.assertGreaterEqual(len(got), count, f"{topic}: {len(got)} of {count} messages in {timeout} s")
        return got

    def test_sim_arm_publishes_states_currents_and_clock(self):
        js = self.collect(JointState, "/joint_states", 50)
        self.assertEqual(list(js[-1].name), JOINTS)
        self.assertEqual(len(js[-1].effort), 6)
        stamps = [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in js]
        self.assertTrue(all(b > a for a, b in zip(stamps, stamps[1:])))
        djs = self.collect(DynamicJointState, "/dynamic_joint_states", 10)
        for iv in djs[-1].interface_values:
            self.assertIn("current", list(iv.interface_names))
        clock = self.collect(Clock, "/clock", 5)
        self.assertGreater(clock[-1].clock.sec * 10**9 + clock[-1].clock.nanosec,
                           clock[0].clock.sec * 10**9 + clock[0].clock.nanosec)

    def test_torque_node_recovers_the_simulated_efforts(self):
        efforts, states = {}, {}

        def key(m):
            return m.header.stamp.sec * 10**9 + m.header.stamp.nanosec

        s1 = self.node.create_subscription(JointState, "/robot_ident/joint_efforts",
                                           lambda m: efforts.__setitem__(key(m), m), SENSOR)
        s2 = self.node.create_subscription(JointState, "/joint_states", lambda m: states.__setitem__(key(m), m),
                                           SENSOR)
        end = time.monotonic() + 30.0
        while time.monotonic() < end and len(set(efforts) & set(states)) < 20:
            rclpy.spin_once(self.node, timeout_sec=0.05)
        self.node.destroy_subscription(s1)
        self.node.destroy_subscription(s2)
        common = sorted(set(efforts) & set(states))
        self.assertGreaterEqual(len(common), 20)
        for k in common:
            self.assertEqual(list(efforts[k].name), JOINTS)
            for a, b in zip(efforts[k].effort, states[k].effort):
                self.assertAlmostEqual(a, b, delta=1e-9 * max(1.0, abs(b)))

    def test_excitation_dry_run_publishes_its_plan_and_state(self):
        state = self.collect(String, "/robot_ident/excitation_state", 1, 60.0, LATCHED,
                             accept=lambda m: m.data in ("done", "aborted"))
        self.assertEqual(state[-1].data, "done")
        approach = self.collect(JointTrajectory, "/excitation_node/planned_approach", 1, 10.0, LATCHED)[-1]
        excitation = self.collect(JointTrajectory, "/excitation_node/planned_excitation", 1, 10.0, LATCHED)[-1]
        self.assertEqual(list(excitation.joint_names), JOINTS)
        last = excitation.points[-1].time_from_start
        self.assertAlmostEqual(last.sec + 1e-9 * last.nanosec, 20.0, places=6)    # 2 x 10 s
        self.assertGreaterEqual(approach.points[-1].time_from_start.sec, 2)

    def test_follow_joint_trajectory(self):
        client = ActionClient(self.node, FollowJointTrajectory, "/joint_trajectory_controller/follow_joint_trajectory")
        self.assertTrue(client.wait_for_server(timeout_sec=20.0))
        q = self.collect(JointState, "/joint_states", 1)[-1].position

        def goal(target, seconds):
            g = FollowJointTrajectory.Goal()
            g.trajectory.joint_names = JOINTS
            p = JointTrajectoryPoint(positions=list(target), velocities=[0.0] * 6)
            p.time_from_start.sec = seconds
            g.trajectory.points = [p]
            return g

        def run(future, timeout=30.0):
            end = time.monotonic() + timeout
            while time.monotonic() < end and not future.done():
                rclpy.spin_once(self.node, timeout_sec=0.05)
            self.assertTrue(future.done())
            return future.result()

        target = list(q)
        target[2] += 0.1
        handle = run(client.send_goal_async(goal(target, 1)))
        self.assertTrue(handle.accepted)
        res = run(handle.get_result_async())
        self.assertEqual(res.result.error_code, 0, res.result.error_string)
        far = list(q)
        far[2] = 10.0                   # outside the elbow's limits
        self.assertFalse(run(client.send_goal_async(goal(far, 1))).accepted)
        client.destroy()

    def test_identification_manual_window(self):
        start = self.node.create_client(Trigger, "/identification_node/start")
        stop = self.node.create_client(Trigger, "/identification_node/stop")
        self.assertTrue(start.wait_for_service(timeout_sec=20.0))

        def call(client):
            f = client.call_async(Trigger.Request())
            end = time.monotonic() + 10.0
            while time.monotonic() < end and not f.done():
                rclpy.spin_once(self.node, timeout_sec=0.05)
            return f.result()

        self.assertTrue(call(start).success)
        self.assertFalse(call(start).success)           # already recording
        self.collect(JointState, "/joint_states", 100)
        r = call(stop)                                   # identifies a standstill: fails, node survives
        self.assertIn("messages", r.message)
        status = self.collect(String, "/identification_node/status", 1, 60.0, LATCHED,
                              accept=lambda m: m.data.startswith(("done", "failed")))
        self.assertTrue(status[-1].data.startswith(("done", "failed")))


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15, 130])

"""launch_testing: a bag written by `robot-ident simulate` plays with this ROS 2's
`ros2 bag play` through replay.launch.py, and the identification node's result equals
the offline `robot-ident identify` on the same bag.

The bag is written (rosbag2 metadata version 8, the default) before the launch starts.
Skipped cleanly where ROS 2 (or rosbag2) is absent; the same identification is
compared with the command line without ROS in test_identification_window.py.
"""
import shutil
import tempfile
import time
import unittest
from pathlib import Path

import pytest

launch_testing = pytest.importorskip("launch_testing")
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("launch_ros")
pytest.importorskip("ros2bag")

import launch  # noqa: E402
import launch_testing.actions  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from std_msgs.msg import String  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "config" / "demo_arm.yaml")
URDF = str(ROOT / "urdf" / "demo_arm.urdf")
WORK = Path(tempfile.mkdtemp(prefix="robot_ident_replay_"))
BAG = WORK / "bag"
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


@pytest.mark.launch_test
def generate_test_description():
    from robot_ident.offline.bag_workflow import simulate_to_bag
    simulate_to_bag(URDF, CONFIG, str(ROOT / "config" / "demo_arm_excitation.yaml"), BAG, repetitions=1)
    replay = launch.actions.IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(ROOT / "launch" / "replay.launch.py")),
        launch_arguments={"bag": str(BAG), "config": CONFIG, "urdf": URDF, "output_dir": str(WORK / "node"),
                          # a quarter of real time: the node must take every message, on a machine
                          # shared with other jobs
                          "rate": "0.25"}.items())
    return launch.LaunchDescription([replay, launch_testing.actions.ReadyToTest()]), {}


class TestReplay(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rclpy.init()
        cls.node = rclpy.create_node("test_robot_ident_replay")

    @classmethod
    def tearDownClass(cls):
        cls.node.destroy_node()
        rclpy.shutdown()

    def test_replayed_bag_identifies_like_the_command_line(self):
        status = []
        sub = self.node.create_subscription(String, "/identification_node/status",
                                            lambda m: status.append(m.data), LATCHED)
        end = time.monotonic() + 180.0
        while time.monotonic() < end and not any(s.startswith(("done", "failed")) for s in status):
            rclpy.spin_once(self.node, timeout_sec=0.1)
        self.node.destroy_subscription(sub)
        self.assertTrue(status and status[-1].startswith("done"), status)
        (folder,) = [p for p in (WORK / "node").iterdir() if (p / "result.yaml").is_file()]
        node = yaml.safe_load((folder / "result.yaml").read_text())

        from robot_ident.offline.inputs import identify_inputs
        identify_inputs([BAG], URDF, CONFIG, WORK / "cli", plots=False)
        cli = yaml.safe_load((WORK / "cli" / "result.yaml").read_text())
        self.assertEqual([p["name"] for p in node["base_parameters"]], [p["name"] for p in cli["base_parameters"]])
        a = np.array([p["value"] for p in node["base_parameters"]])
        b = np.array([p["value"] for p in cli["base_parameters"]])
        print(f"ROBOT_IDENT_FIGURES replay vs offline: {a.size} base parameters, max |difference| "
              f"{np.abs(a - b).max():.3g} (max |value| {np.abs(b).max():.3g})")
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15, 130])
        shutil.rmtree(WORK, ignore_errors=True)

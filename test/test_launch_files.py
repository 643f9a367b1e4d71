"""With ROS 2: every launch file loads with the real launch / launch_ros APIs and declares
the arguments docs/ros2.md names. Skipped cleanly where ROS 2 is absent (the files are
compiled by test_static_ros.py everywhere)."""
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("launch")
pytest.importorskip("launch_ros")

from launch import LaunchDescription  # noqa: E402
from launch.actions import DeclareLaunchArgument  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = {
    "sim.launch.py": {"config", "urdf", "trajectory", "repetitions", "output_dir", "method", "real_time_factor",
                      "dry_run", "use_sim_time", "interface"},
    "identify.launch.py": {"config", "urdf", "robot_description", "trajectory", "controller", "interface",
                           "repetitions", "dry_run", "autostart", "output_dir", "use_sim_time"},
    "replay.launch.py": {"bag", "config", "urdf", "rate", "record_all", "repetitions", "method", "output_dir",
                         "start_delay"},
    "gazebo.launch.py": {"config", "trajectory", "repetitions", "output_dir", "gz_flavour", "world"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_launch_file_loads_and_declares_its_arguments(name):
    spec = importlib.util.spec_from_file_location(name.replace(".", "_"), ROOT / "launch" / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ld = module.generate_launch_description()
    assert isinstance(ld, LaunchDescription)
    declared = {e.name for e in ld.entities if isinstance(e, DeclareLaunchArgument)}
    assert declared == EXPECTED[name]

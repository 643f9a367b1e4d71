"""Helpers shared by the launch tests that start robot_ident's nodes as processes of their
own (test_launch_stop.py, test_launch_controller.py). Imported only after those files
have skipped where ROS 2 is absent."""
import json
import os
import time
from pathlib import Path


def executable(name):
    from ament_index_python.packages import get_package_prefix
    return str(Path(get_package_prefix("robot_ident")) / "lib" / "robot_ident" / name)


def output(log):
    log.flush()
    return Path(log.name).read_text()


def record(env: str, figures: dict):
    """Print `figures` (one JSON line) and append them to the file $`env` names, if set."""
    print("ROBOT_IDENT_FIGURES " + json.dumps(figures))
    path = os.environ.get(env)
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(figures) + "\n")


class Spinning:
    """unittest mixin: `self.node` is spun until a condition holds; `self.states` (wall, phase)
    goes into the failure message."""

    def spin_until(self, cond, timeout, what):
        import rclpy
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.01)
            if cond():
                return
        self.fail(f"{what} within {timeout} s; states {[s for _, s in self.states]}")

    def spin_for(self, seconds):
        import rclpy
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.01)

"""Installs robot_ident with pip (no ROS needed) or colcon (ament_python)."""
import glob
import os

from setuptools import find_packages, setup

package_name = "robot_ident"


def share(folder, pattern="*"):
    files = sorted(f for f in glob.glob(os.path.join(folder, pattern)) if os.path.isfile(f))
    return (os.path.join("share", package_name, folder), files)


setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "bench"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        share("launch"),
        share("urdf"),
        share("config"),
    ],
    python_requires=">=3.10",
    install_requires=[
        "numpy>=1.22",
        "scipy>=1.8",
        "PyYAML>=5.4",
        "matplotlib>=3.5",
        # Pinocchio: 'pin' on PyPI (Pinocchio 4); ROS users get Pinocchio 3 from ros-<distro>-pinocchio.
        "pin>=2.7; platform_system != 'Windows'",
        "mujoco>=3.1",
        "rosbags>=0.10",
        "pymoo>=0.6",
        "SALib>=1.4",
        "threadpoolctl>=3",
        "xacro>=2",          # vendor URDFs ship as xacro (model/robot.py expands them)
    ],
    extras_require={
        # pytest 9 breaks Humble's launch_testing plugin (every pytest run fails to start)
        # mcap: Foxglove's writer makes the lz4 / CRC / unchunked MCAP files of test/test_bag_fast_read.py
        # pytest-xdist: the README's test command runs the suite on every core (-n auto)
        "test": ["pytest>=7,<9", "pytest-xdist>=3", "example-robot-data>=4", "xacro>=2", "mcap>=1.1"],
    },
    zip_safe=True,
    maintainer="robot_ident developers",
    maintainer_email="robot_ident@example.com",
    description="On-robot dynamic identification of robot arms",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "robot-ident = robot_ident.cli:run",
            # ROS 2 nodes (ros2 run robot_ident <name>); they import rclpy only when run.
            "excitation_node = robot_ident.nodes.excitation_node:main",
            "torque_node = robot_ident.nodes.torque_node:main",
            "identification_node = robot_ident.nodes.identification_node:main",
            "sim_arm_node = robot_ident.nodes.sim_arm_node:main",
            "current_synth_node = robot_ident.nodes.current_synth_node:main",
            "monitor_node = robot_ident.nodes.monitor_node:main",
        ],
    },
)

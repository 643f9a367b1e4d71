"""The identified model at work next to the arm: external torques, contacts, model health.

    ros2 launch robot_ident monitor.launch.py result:=/path/robot_ident_results/identification_<time>
    ros2 topic echo /monitor_node/events
    ros2 topic echo /diagnostics

Starts monitor_node on a result folder of `robot-ident identify` or the identification
node. The topics and actuators come from the result's config.yaml unless `config` is
given. Keep the arm free of contact for the first `calibration_s` seconds (the observer
learns its own noise); `~/status` says `calibrating`, then `watching`.
"""
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from launch import LaunchDescription


def generate_launch_description():
    args = [
        DeclareLaunchArgument("result", description="result folder (result.yaml, model.urdf, config.yaml)"),
        DeclareLaunchArgument("config", default_value="",
                              description="parameter YAML for the topics and actuators; empty: the result's"),
        DeclareLaunchArgument("threshold", default_value="2.5", description="contact threshold, multiples of the band"),
        DeclareLaunchArgument("gain", default_value="200.0", description="observer gain [1/s]"),
        DeclareLaunchArgument("calibration_s", default_value="5.0",
                              description="seconds at the start without contact (the observer's noise)"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock"),
    ]
    node = Node(package="robot_ident", executable="monitor_node", name="monitor_node", output="screen",
                parameters=[{"result_dir": LaunchConfiguration("result"),
                             "config_file": LaunchConfiguration("config"),
                             "threshold": ParameterValue(LaunchConfiguration("threshold"), value_type=float),
                             "gain": ParameterValue(LaunchConfiguration("gain"), value_type=float),
                             "calibration_s": ParameterValue(LaunchConfiguration("calibration_s"), value_type=float),
                             "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)}])
    return LaunchDescription(args + [node])

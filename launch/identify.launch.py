"""Identification next to a real arm's running ros2_control controllers.

    ros2 launch robot_ident identify.launch.py config:=/path/arm.yaml urdf:=/path/arm.urdf \
        trajectory:=/path/excitation.yaml [controller:=joint_trajectory_controller] [dry_run:=true]
    ros2 service call /excitation_node/start std_srvs/srv/Trigger      # when autostart is false

Starts torque_node, identification_node and excitation_node. The URDF comes from the
`robot_description` argument (text) if given, else from the `urdf` file. The
excitation waits for ~/start unless autostart:=true.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    share = FindPackageShare("robot_ident")
    args = [
        DeclareLaunchArgument("config", default_value=PathJoinSubstitution([share, "config", "demo_arm.yaml"]),
                              description="robot_ident parameter YAML of the arm"),
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution([share, "urdf", "demo_arm.urdf"]),
                              description="URDF file (used when robot_description is empty)"),
        DeclareLaunchArgument("robot_description", default_value="", description="URDF text"),
        DeclareLaunchArgument("trajectory", default_value="",
                              description="excitation trajectory YAML (robot-ident design); empty: design one"),
        DeclareLaunchArgument("controller", default_value="joint_trajectory_controller",
                              description="the arm's joint trajectory controller"),
        DeclareLaunchArgument("interface", default_value="action",
                              description="action (FollowJointTrajectory) or topic (<controller>/joint_trajectory)"),
        DeclareLaunchArgument("repetitions", default_value="2", description="excitation repetitions"),
        DeclareLaunchArgument("dry_run", default_value="false",
                              description="true: only publish the planned trajectories"),
        DeclareLaunchArgument("autostart", default_value="false",
                              description="false: wait for ros2 service call /excitation_node/start"),
        DeclareLaunchArgument("output_dir", default_value="robot_ident_results", description="result folders"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock"),
    ]
    sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    reps = ParameterValue(LaunchConfiguration("repetitions"), value_type=int)
    common = {"config_file": LaunchConfiguration("config"), "use_sim_time": sim_time}
    model = {"urdf_file": LaunchConfiguration("urdf"),
             "robot_description": ParameterValue(LaunchConfiguration("robot_description"), value_type=str)}
    nodes = [
        Node(package="robot_ident", executable="torque_node", name="torque_node", output="screen",
             parameters=[common]),
        Node(package="robot_ident", executable="identification_node", name="identification_node",
             output="screen",
             parameters=[common, model, {"output_dir": LaunchConfiguration("output_dir"), "repetitions": reps}]),
        Node(package="robot_ident", executable="excitation_node", name="excitation_node", output="screen",
             parameters=[common, model, {
                 "trajectory_file": LaunchConfiguration("trajectory"),
                 "controller": LaunchConfiguration("controller"),
                 "interface": LaunchConfiguration("interface"),
                 "repetitions": reps,
                 "dry_run": ParameterValue(LaunchConfiguration("dry_run"), value_type=bool),
                 "autostart": ParameterValue(LaunchConfiguration("autostart"), value_type=bool)}]),
    ]
    return LaunchDescription(args + nodes)

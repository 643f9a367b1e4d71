"""The whole loop on the MuJoCo simulated arm: no Gazebo, no hardware.

    ros2 launch robot_ident sim.launch.py [repetitions:=2] [real_time_factor:=1.0]

sim_arm_node (the arm, its trajectory controller and /clock) + torque_node +
excitation_node + identification_node, on the simulator's time by default
(use_sim_time:=true): on wall time a loaded machine that slows the simulator down
makes the arm look late, and the excitation aborts on its tracking error. The excitation approaches
its start pose slowly, runs `repetitions` times, and the identification node writes
its result folder under `output_dir` and publishes the estimates.
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
                              description="robot_ident parameter YAML"),
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution([share, "urdf", "demo_arm.urdf"]),
                              description="URDF of the arm (CAD model; the simulator perturbs it per config)"),
        DeclareLaunchArgument("trajectory",
                              default_value=PathJoinSubstitution([share, "config", "demo_arm_excitation.yaml"]),
                              description="excitation trajectory YAML; empty: design one (takes design_time)"),
        DeclareLaunchArgument("repetitions", default_value="2",
                              description="excitation repetitions; the last is held out for validation"),
        DeclareLaunchArgument("output_dir", default_value="robot_ident_results",
                              description="result folders are written here"),
        DeclareLaunchArgument("method", default_value="", description="estimator; empty: the config's"),
        DeclareLaunchArgument("real_time_factor", default_value="1.0",
                              description="sim seconds per wall second (0: as fast as possible)"),
        DeclareLaunchArgument("dry_run", default_value="false",
                              description="only publish the planned trajectories"),
        DeclareLaunchArgument("use_sim_time", default_value="true",
                              description="the nodes next to the simulated arm run on its /clock (keep true)"),
        DeclareLaunchArgument("interface", default_value="action",
                              description="'action' (FollowJointTrajectory) or 'topic' (joint_trajectory)"),
    ]
    config = LaunchConfiguration("config")
    urdf = LaunchConfiguration("urdf")
    reps = ParameterValue(LaunchConfiguration("repetitions"), value_type=int)
    common = {"config_file": config, "urdf_file": urdf,
              "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)}
    nodes = [
        Node(package="robot_ident", executable="sim_arm_node", name="sim_arm_node", output="screen",
             parameters=[{"config_file": config, "urdf_file": urdf,
                          "real_time_factor": ParameterValue(LaunchConfiguration("real_time_factor"),
                                                             value_type=float)}]),
        Node(package="robot_ident", executable="torque_node", name="torque_node", output="screen",
             parameters=[common]),
        Node(package="robot_ident", executable="identification_node", name="identification_node",
             output="screen",
             parameters=[common, {"output_dir": LaunchConfiguration("output_dir"), "repetitions": reps,
                                  "method": LaunchConfiguration("method")}]),
        Node(package="robot_ident", executable="excitation_node", name="excitation_node", output="screen",
             parameters=[common, {"trajectory_file": LaunchConfiguration("trajectory"), "repetitions": reps,
                                  "interface": LaunchConfiguration("interface"),
                                  "dry_run": ParameterValue(LaunchConfiguration("dry_run"), value_type=bool)}]),
    ]
    return LaunchDescription(args + nodes)

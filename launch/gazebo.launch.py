"""The demo arm in Gazebo Sim under ros2_control, with robot_ident's nodes on sim time.

    ros2 launch robot_ident gazebo.launch.py [gz_flavour:=ign] [headless:=true]   # ign on Humble + Fortress

Gazebo (ros_gz_sim) + robot_state_publisher (xacro, use_gazebo:=true) + spawn +
/clock bridge + controller_manager spawners for joint_state_broadcaster and an
effort-interface joint_trajectory_controller (config/controllers_gazebo.yaml) + our nodes.
Gazebo has no current interface: current_synth_node synthesises motor currents from
the efforts the trajectory controller commands (its ~/controller_state: Gazebo applies
them as they are, and Fortress's ign_ros2_control reports no effort state, its
/joint_states efforts read 0) with the config's actuators (inverse), and the torque and
identification nodes read those (/robot_ident/synthetic_currents), so the real
current -> effort path runs.
"""
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import (
    Command,
    FindExecutable,
    LaunchConfiguration,
    PathJoinSubstitution,
    PythonExpression,
)
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

SYNTH_TOPIC = "/robot_ident/synthetic_currents"


def generate_launch_description():
    share = FindPackageShare("robot_ident")
    controllers = PathJoinSubstitution([share, "config", "controllers_gazebo.yaml"])
    args = [
        DeclareLaunchArgument("config", default_value=PathJoinSubstitution([share, "config", "demo_arm.yaml"]),
                              description="robot_ident parameter YAML"),
        DeclareLaunchArgument("trajectory",
                              default_value=PathJoinSubstitution([share, "config", "demo_arm_excitation.yaml"]),
                              description="excitation trajectory YAML; empty: design one"),
        DeclareLaunchArgument("repetitions", default_value="2", description="excitation repetitions"),
        DeclareLaunchArgument("output_dir", default_value="robot_ident_results", description="result folders"),
        DeclareLaunchArgument("gz_flavour", default_value="gz",
                              description="gz (Jazzy + Harmonic, gz_ros2_control) or ign (Humble + Fortress)"),
        DeclareLaunchArgument("world", default_value=PathJoinSubstitution([share, "config", "gazebo_world.sdf"]),
                              description="Gazebo world (the default: a 25 us physics step, so that Gazebo's joint "
                                          "friction on the light wrists is the URDF's; see the file)"),
        DeclareLaunchArgument("headless", default_value="false",
                              description="true: the Gazebo server only, no GUI (no display, CI, a remote machine)"),
    ]
    description = ParameterValue(Command([
        FindExecutable(name="xacro"), " ", PathJoinSubstitution([share, "urdf", "demo_arm.urdf.xacro"]),
        " use_gazebo:=true", " gz_flavour:=", LaunchConfiguration("gz_flavour"),
        " controllers_file:=", controllers]), value_type=str)
    sim_time = {"use_sim_time": True}
    server_only = PythonExpression(["'-s ' if '", LaunchConfiguration("headless"), "'.lower() == 'true' else ''"])

    gazebo = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(PathJoinSubstitution([FindPackageShare("ros_gz_sim"), "launch",
                                                            "gz_sim.launch.py"])),
        launch_arguments={"gz_args": [server_only, "-r -v 1 ", LaunchConfiguration("world")]}.items())
    rsp = Node(package="robot_state_publisher", executable="robot_state_publisher", output="screen",
               parameters=[{"robot_description": description}, sim_time])
    spawn = Node(package="ros_gz_sim", executable="create", output="screen",
                 arguments=["-topic", "robot_description", "-name", "demo_arm", "-allow_renaming", "true"])
    clock_bridge = Node(package="ros_gz_bridge", executable="parameter_bridge", output="screen",
                        arguments=["/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock"])
    jsb = Node(package="controller_manager", executable="spawner", output="screen",
               arguments=["joint_state_broadcaster", "--controller-manager", "/controller_manager"])
    jtc = Node(package="controller_manager", executable="spawner", output="screen",
               arguments=["joint_trajectory_controller", "--controller-manager", "/controller_manager",
                          "--param-file", controllers])

    config = LaunchConfiguration("config")
    reps = ParameterValue(LaunchConfiguration("repetitions"), value_type=int)
    common = {"config_file": config, "use_sim_time": True}
    model = {"robot_description": description}
    ours = [
        Node(package="robot_ident", executable="current_synth_node", name="current_synth_node", output="screen",
             parameters=[common, {"input_topic": "/joint_trajectory_controller/controller_state",
                                  "input_kind": "controller_state", "output_topic": SYNTH_TOPIC}]),
        Node(package="robot_ident", executable="torque_node", name="torque_node", output="screen",
             parameters=[common, {"current_topic": SYNTH_TOPIC}]),
        Node(package="robot_ident", executable="identification_node", name="identification_node",
             output="screen",
             parameters=[common, model, {"current_topic": SYNTH_TOPIC, "repetitions": reps,
                                         "output_dir": LaunchConfiguration("output_dir")}]),
        Node(package="robot_ident", executable="excitation_node", name="excitation_node", output="screen",
             parameters=[common, model, {"trajectory_file": LaunchConfiguration("trajectory"),
                                         "repetitions": reps}]),
    ]
    return LaunchDescription(args + [
        gazebo, rsp, spawn, clock_bridge,
        # the spawners wait for the plugin's controller_manager; the trajectory controller after the broadcaster
        RegisterEventHandler(OnProcessExit(target_action=spawn, on_exit=[jsb])),
        RegisterEventHandler(OnProcessExit(target_action=jsb, on_exit=[jtc])),
    ] + ours)

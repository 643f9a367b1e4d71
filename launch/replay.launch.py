"""Identification from a rosbag2 recording: nothing is sent to any controller.

    ros2 launch robot_ident replay.launch.py bag:=/path/to/bag config:=/path/arm.yaml urdf:=/path/arm.urdf

Plays the bag with `ros2 bag play --clock` and runs torque_node and
identification_node on sim time. With record_all:=true (default) the window spans the
whole bag and the identification runs when playback ends; with record_all:=false it
follows the excitation state recorded in the bag (/robot_ident/excitation_state).
The whole-bag window is identified only when `ros2 bag play` succeeded (a bag it
cannot read identifies nothing), and the node refuses an empty window.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, LogInfo, RegisterEventHandler, TimerAction
from launch.conditions import IfCondition
from launch.event_handlers import OnProcessExit
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    share = FindPackageShare("robot_ident")
    args = [
        DeclareLaunchArgument("bag", description="rosbag2 folder"),
        DeclareLaunchArgument("config", default_value=PathJoinSubstitution([share, "config", "demo_arm.yaml"]),
                              description="robot_ident parameter YAML"),
        DeclareLaunchArgument("urdf", default_value=PathJoinSubstitution([share, "urdf", "demo_arm.urdf"]),
                              description="URDF file"),
        DeclareLaunchArgument("rate", default_value="1.0", description="playback rate"),
        DeclareLaunchArgument("record_all", default_value="true",
                              description="true: identify the whole bag; false: the recorded excitation window"),
        DeclareLaunchArgument("repetitions", default_value="0",
                              description="> 1: hold out the last repetition; 0: the config's hold-out fraction"),
        DeclareLaunchArgument("method", default_value="", description="estimator; empty: the config's"),
        DeclareLaunchArgument("output_dir", default_value="robot_ident_results", description="result folders"),
        DeclareLaunchArgument("start_delay", default_value="2.0",
                              description="seconds to wait for the subscribers before playing"),
    ]
    common = {"config_file": LaunchConfiguration("config"), "use_sim_time": True}
    ident = Node(package="robot_ident", executable="identification_node", name="identification_node",
                 output="screen",
                 parameters=[common, {
                     "urdf_file": LaunchConfiguration("urdf"),
                     "output_dir": LaunchConfiguration("output_dir"),
                     "method": LaunchConfiguration("method"),
                     "repetitions": ParameterValue(LaunchConfiguration("repetitions"), value_type=int),
                     "record_on_start": ParameterValue(LaunchConfiguration("record_all"), value_type=bool)}])
    torque = Node(package="robot_ident", executable="torque_node", name="torque_node", output="screen",
                  parameters=[common])
    # --delay: the player's publishers exist a second before the first message, so the
    # subscribers have discovered them and miss nothing; --wait-for-all-acked: the last
    # messages are delivered before the player exits and the identification starts.
    play = ExecuteProcess(cmd=["ros2", "bag", "play", LaunchConfiguration("bag"), "--clock",
                               "--rate", LaunchConfiguration("rate"), "--delay", "1.0",
                               "--wait-for-all-acked", "5000"], output="screen")
    def at_end(event, context):
        if event.returncode != 0:
            return [LogInfo(msg=f"ros2 bag play exited with code {event.returncode}: nothing is identified")]
        return [ExecuteProcess(cmd=["ros2", "service", "call", "/identification_node/identify",
                                    "std_srvs/srv/Trigger"],
                               output="screen", condition=IfCondition(LaunchConfiguration("record_all")))]

    identify_at_end = RegisterEventHandler(OnProcessExit(target_action=play, on_exit=at_end))
    return LaunchDescription(args + [ident, torque, identify_at_end,
                                     TimerAction(period=LaunchConfiguration("start_delay"), actions=[play])])

"""The demo arm on ros2_control's mock hardware: the real controller stack, no robot.

    ros2 launch robot_ident mock_arm.launch.py [interface:=topic] [initial_positions:="0 0 0 0 0 0"]

The way to try the excitation node against the real joint_trajectory_controller
before a real arm: controller_manager (ros2_control_node) with
mock_components/GenericSystem (urdf/demo_arm.urdf.xacro, use_mock_hardware:=true), which
echoes the position and velocity commands as the joint states, the
joint_state_broadcaster and the position/velocity joint_trajectory_controller of
config/controllers_position.yaml, then excitation_node. Approach, excitation, the
stops (Ctrl-C, ``ros2 service call /excitation_node/stop std_srvs/srv/Trigger``) and the
refusals run as they would on the arm. The mock has no dynamics (efforts and currents
read 0), so nothing is identified here: ``identify:=true`` adds torque_node and
identification_node to check the recording path only.

A real arm: its own bringup starts the controller_manager; give it
controllers_position.yaml (or your controllers with the same joints) and start our
nodes with identify.launch.py.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, RegisterEventHandler
from launch.conditions import IfCondition
from launch.event_handlers import OnProcessExit
from launch.substitutions import Command, FindExecutable, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def _has_package(name: str) -> bool:
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    try:
        get_package_share_directory(name)
        return True
    except PackageNotFoundError:
        return False


def generate_launch_description():
    share = FindPackageShare("robot_ident")
    controllers = PathJoinSubstitution([share, "config", "controllers_position.yaml"])
    args = [
        DeclareLaunchArgument("config", default_value=PathJoinSubstitution([share, "config", "demo_arm.yaml"]),
                              description="robot_ident parameter YAML"),
        DeclareLaunchArgument("trajectory",
                              default_value=PathJoinSubstitution([share, "config", "demo_arm_excitation.yaml"]),
                              description="excitation trajectory YAML; empty: design one"),
        DeclareLaunchArgument("interface", default_value="action",
                              description="action (FollowJointTrajectory) or topic (<controller>/joint_trajectory)"),
        DeclareLaunchArgument("initial_positions", default_value="0 0 0 0 0 0",
                              description="the mock arm's start pose, one value per joint"),
        DeclareLaunchArgument("repetitions", default_value="1", description="excitation repetitions"),
        DeclareLaunchArgument("dry_run", default_value="false", description="true: only publish the plan"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="false: wait for ros2 service call /excitation_node/start"),
        DeclareLaunchArgument("identify", default_value="false",
                              description="also start torque_node and identification_node (recording path only)"),
        DeclareLaunchArgument("output_dir", default_value="robot_ident_results", description="result folders"),
    ]
    description = ParameterValue(Command([
        FindExecutable(name="xacro"), " ", PathJoinSubstitution([share, "urdf", "demo_arm.urdf.xacro"]),
        " use_mock_hardware:=true", " initial_positions:='", LaunchConfiguration("initial_positions"), "'"]),
        value_type=str)
    model = {"robot_description": description}
    # Humble's controller_manager takes robot_description as a parameter (deprecated there);
    # Jazzy's reads it from robot_state_publisher's topic.
    bringup = [Node(package="controller_manager", executable="ros2_control_node", output="screen",
                    parameters=[model, controllers])]
    if _has_package("robot_state_publisher"):
        bringup.append(Node(package="robot_state_publisher", executable="robot_state_publisher", output="screen",
                            parameters=[model]))
    jsb = Node(package="controller_manager", executable="spawner", output="screen",
               arguments=["joint_state_broadcaster", "--controller-manager", "/controller_manager"])
    jtc = Node(package="controller_manager", executable="spawner", output="screen",
               arguments=["joint_trajectory_controller", "--controller-manager", "/controller_manager"])

    common = {"config_file": LaunchConfiguration("config")}
    reps = ParameterValue(LaunchConfiguration("repetitions"), value_type=int)
    identify = IfCondition(LaunchConfiguration("identify"))
    ours = [
        Node(package="robot_ident", executable="excitation_node", name="excitation_node", output="screen",
             parameters=[common, model, {
                 "trajectory_file": LaunchConfiguration("trajectory"),
                 "interface": LaunchConfiguration("interface"),
                 "repetitions": reps,
                 "dry_run": ParameterValue(LaunchConfiguration("dry_run"), value_type=bool),
                 "autostart": ParameterValue(LaunchConfiguration("autostart"), value_type=bool)}]),
        Node(package="robot_ident", executable="torque_node", name="torque_node", output="screen",
             parameters=[common], condition=identify),
        Node(package="robot_ident", executable="identification_node", name="identification_node",
             output="screen", condition=identify,
             parameters=[common, model, {"output_dir": LaunchConfiguration("output_dir"), "repetitions": reps}]),
    ]
    # the trajectory controller after the broadcaster, our nodes after the controller is active
    return LaunchDescription(args + bringup + [
        jsb,
        RegisterEventHandler(OnProcessExit(target_action=jsb, on_exit=[jtc])),
        RegisterEventHandler(OnProcessExit(target_action=jtc, on_exit=ours)),
    ])

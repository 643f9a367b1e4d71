"""current_synth_node: motor currents synthesised from efforts, for simulators without a
current interface (Gazebo).

Subscribes to a JointState topic whose effort field holds joint efforts (the
joint_state_broadcaster's /joint_states), or with ``input_kind:=controller_state`` to an
effort joint_trajectory_controller's ``~/controller_state`` (the efforts it commands:
Gazebo Fortress's ign_ros2_control reports no effort state), and publishes
control_msgs/DynamicJointState with interface ``current`` = the config's actuators'
inverse of the effort (`robot_ident.online.torque_stream.CurrentSynthesiser`), same stamp,
so the torque and identification nodes run their real current -> effort path.
"""
from __future__ import annotations

from builtin_interfaces.msg import Time
from control_msgs.msg import DynamicJointState, InterfaceValue, JointTrajectoryControllerState
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from ..data.msgs import dynamic_joint_state_message
from ..io.config import load_config
from ..online.shutdown import require_file_parameter
from ..online.torque_stream import CurrentSynthesiser
from ._common import declare, float_array, run_node, sensor_qos


class CurrentSynthNode(Node):
    def __init__(self):
        super().__init__("current_synth_node")
        config_file = declare(self, "config_file", "", "robot_ident parameter YAML (joints, actuators)",
                              read_only=True)
        in_topic = declare(self, "input_topic", "/joint_states", "JointState with joint efforts", read_only=True)
        kind = declare(self, "input_kind", "joint_state", "joint_state (sensor_msgs/JointState efforts) or "
                       "controller_state (the commanded efforts of JointTrajectoryControllerState)", read_only=True)
        out_topic = declare(self, "output_topic", "/robot_ident/synthetic_currents",
                            "DynamicJointState with the 'current' interface", read_only=True)
        cfg = load_config(require_file_parameter("current_synth_node", "config_file", config_file,
                                                 "the robot_ident parameter YAML (joints, actuators)"))
        self.synth = CurrentSynthesiser(cfg.joints, cfg.drive)
        self.interface = cfg.current_interface
        self.pub = self.create_publisher(DynamicJointState, out_topic, sensor_qos())
        if kind == "controller_state":
            self.create_subscription(JointTrajectoryControllerState, in_topic, self._on_controller_state, sensor_qos())
        elif kind == "joint_state":
            self.create_subscription(JointState, in_topic, self._on_joint_state, sensor_qos())
        else:
            raise ValueError(f"parameter input_kind must be 'joint_state' or 'controller_state', got {kind!r}")

    def _on_controller_state(self, msg) -> None:
        self._publish(self.synth.on_controller_state(msg))

    def _on_joint_state(self, msg) -> None:
        self._publish(self.synth.on_joint_state(msg))

    def _publish(self, s) -> None:
        if s is None:
            return
        self.pub.publish(dynamic_joint_state_message(DynamicJointState, InterfaceValue, Header, Time, s.stamp_ns,
                                                     s.names, {self.interface: s.effort}, array=float_array))


def main(args=None):
    return run_node(CurrentSynthNode, args)


if __name__ == "__main__":
    main()

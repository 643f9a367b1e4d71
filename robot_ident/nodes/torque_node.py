"""torque_node: motor currents -> joint efforts.

Subscribes to the joint states and the configured current source
(``/dynamic_joint_states`` interface ``current``, or a JointState's effort field),
converts currents to efforts with the config's actuators
(`robot_ident.online.torque_stream.EffortConverter`, tested without ROS) and publishes
sensor_msgs/JointState (position, velocity, effort) on ``/robot_ident/joint_efforts``,
stamped with the current measurement's time.
"""
from __future__ import annotations

from dataclasses import replace

from builtin_interfaces.msg import Time
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from ..data.msgs import joint_state_message
from ..io.config import load_config
from ..online.shutdown import require_file_parameter
from ..online.torque_stream import EffortConverter
from ._common import declare, float_array, run_node, sensor_qos


class TorqueNode(Node):
    def __init__(self):
        super().__init__("torque_node")
        config_file = declare(self, "config_file", "", "robot_ident parameter YAML (joints, current_source, "
                              "actuators)", read_only=True)
        out_topic = declare(self, "output_topic", "/robot_ident/joint_efforts", "published joint efforts",
                            read_only=True)
        max_age = declare(self, "max_state_age", 0.05, "attach positions/velocities of a joint state at most "
                          "this far from the current sample [s]", read_only=True, low=0.0, high=1.0)
        current_topic = declare(self, "current_topic", "", "override the config's current_topic; empty: the "
                                "config's", read_only=True)
        cfg = load_config(require_file_parameter("torque_node", "config_file", config_file,
                                                 "the robot_ident parameter YAML (joints, current source, "
                                                 "actuators)"))
        if current_topic:
            cfg = replace(cfg, current_topic=current_topic)
        self.converter = EffortConverter.from_config(cfg, max_age)
        self.pub = self.create_publisher(JointState, out_topic, sensor_qos())
        self.create_subscription(JointState, cfg.joint_states_topic, self._on_joint_state, sensor_qos())
        if not self.converter.shared_topic:
            if cfg.current_kind == "dynamic_joint_state":
                from control_msgs.msg import DynamicJointState
                self.create_subscription(DynamicJointState, cfg.current_topic, self._on_current, sensor_qos())
            else:
                self.create_subscription(JointState, cfg.current_topic, self._on_current, sensor_qos())
        self.get_logger().info(f"{cfg.current_source} on {cfg.current_topic} -> efforts of "
                               f"{', '.join(cfg.joints)} on {out_topic}")

    def _publish(self, sample) -> None:
        if sample is None:
            if self.converter.skipped and self.converter.skipped % 1000 == 1:
                self.get_logger().warning(f"{self.converter.skipped} current message(s) without a finite value "
                                          "for every configured joint were skipped")
            return
        self.pub.publish(joint_state_message(JointState, Header, Time, sample.stamp_ns, sample.names,
                                             sample.position, sample.velocity, sample.effort,
                                             array=float_array))

    def _on_joint_state(self, msg) -> None:
        self._publish(self.converter.on_joint_state(msg))

    def _on_current(self, msg) -> None:
        self._publish(self.converter.on_current(msg))


def main(args=None):
    return run_node(TorqueNode, args)


if __name__ == "__main__":
    main()

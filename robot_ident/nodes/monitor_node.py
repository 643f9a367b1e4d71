"""monitor_node: an identified model at work next to the arm -- external joint torques,
contacts and the model's health.

Loads a result folder (``result_dir``: result.yaml, model.urdf, config.yaml of
``robot-ident identify`` or the identification node), subscribes to the joint states and
the configured current source (converted as the torque node does: actuators, couplings)
and runs the result's model over them every ``update_period`` seconds
(`robot_ident.online.monitor_stream`, the same code as ``robot-ident monitor``, tested
without ROS). Publishes:

* ``~/external_torque`` (sensor_msgs/JointState, effort field): the momentum observer's
  estimate of the external joint torques, stamped with the current measurement's time;
* ``~/contact`` (std_msgs/Bool): a joint's estimate outside its band x ``threshold``,
  at least 4.5 x the model's slow error held out (plus the friction slack in the dead band);
* ``~/wrench`` (geometry_msgs/WrenchStamped, frame of the model's root link, at the last
  joint's origin) while in contact, on a serial arm;
* ``~/events`` (std_msgs/String): each contact event that ended, as YAML (joint, start,
  end in seconds from the first sample, signed peak);
* ``/diagnostics``: OK / WARN / ERROR with the reason (residual over the band, friction
  drift, payload change), once a second, each joint's band and contact threshold and the
  calibration's notes as key-values; ``~/status`` (transient local).

The first ``calibration_s`` seconds learn the observer's own noise: keep the arm free of
contact then (the status says ``calibrating``).
"""
from __future__ import annotations

import yaml
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Header, String

from .. import defaults
from ..data.msgs import joint_state_message, stamp_fields
from ..io.config import load_config
from ..io.result_model import load_result_model
from ..monitor.observer import ObserverSettings
from ..online.monitor_stream import MonitorStream
from ..online.msg_build import diagnostic_array
from ..online.shutdown import require_file_parameter
from ._common import declare, float_array, latched_qos, message_types, now_ns, run_node, sensor_qos


class MonitorNode(Node):
    def __init__(self):
        super().__init__("monitor_node")
        result_dir = declare(self, "result_dir", "", "result folder of robot-ident identify or the identification "
                             "node (result.yaml, model.urdf, config.yaml)", read_only=True)
        config_file = declare(self, "config_file", "", "parameter YAML for the topics and actuators; empty: the "
                              "result's config.yaml", read_only=True)
        current_topic = declare(self, "current_topic", "", "override the config's current_topic; empty: the "
                                "config's", read_only=True)
        settings = ObserverSettings(
            gain=declare(self, "gain", defaults.MONITOR_GAIN, "observer gain K [1/s]", read_only=True, low=1.0,
                         high=5000.0),
            threshold=declare(self, "threshold", defaults.MONITOR_THRESHOLD, "contact threshold in multiples of "
                              "each joint's band", read_only=True, low=0.5, high=100.0),
            calibration_s=declare(self, "calibration_s", defaults.MONITOR_CALIBRATION_S, "seconds at the start "
                                  "that learn the observer's noise (keep the arm free of contact)", read_only=True,
                                  low=0.1, high=600.0))
        period = declare(self, "update_period", 0.01, "seconds between runs of the monitor over the samples "
                         "received", read_only=True, low=0.001, high=1.0)
        diag_topic = declare(self, "diagnostics_topic", "/diagnostics", "DiagnosticArray output", read_only=True)
        require_file_parameter("monitor_node", "result_dir", result_dir, "a result folder of robot-ident identify")
        rm = load_result_model(result_dir)
        cfg = load_config(config_file) if config_file else rm.cfg
        if current_topic:
            from dataclasses import replace
            cfg = replace(cfg, current_topic=current_topic)
        self.stream = MonitorStream.from_result(rm, cfg, settings)
        self.frame = rm.model.model.frames[1].name if len(rm.model.model.frames) > 1 else "base_link"
        self._types = message_types()
        self.torque_pub = self.create_publisher(JointState, "~/external_torque", sensor_qos())
        self.contact_pub = self.create_publisher(Bool, "~/contact", sensor_qos())
        self.wrench_pub = self.create_publisher(WrenchStamped, "~/wrench", sensor_qos())
        self.events_pub = self.create_publisher(String, "~/events", latched_qos(depth=100))
        self.diag_pub = self.create_publisher(DiagnosticArray, diag_topic, latched_qos())
        self.status_pub = self.create_publisher(String, "~/status", latched_qos())
        self.create_subscription(JointState, cfg.joint_states_topic, self.stream.on_joint_state, sensor_qos())
        if not self.stream.converter.shared_topic:
            if cfg.current_kind == "dynamic_joint_state":
                from control_msgs.msg import DynamicJointState
                self.create_subscription(DynamicJointState, cfg.current_topic, self.stream.on_current, sensor_qos())
            else:
                self.create_subscription(JointState, cfg.current_topic, self.stream.on_current, sensor_qos())
        self.create_timer(period, self._update)
        self.create_timer(1.0, self._diagnose)
        self._status("calibrating")
        self.get_logger().info(f"monitoring {', '.join(self.stream.joints)} with result {result_dir} "
                               f"({cfg.current_source} on {cfg.current_topic})")

    def _status(self, text: str) -> None:
        self.status_pub.publish(String(data=text))

    def _update(self) -> None:
        out = self.stream.flush()
        if out is None:
            return
        self.torque_pub.publish(joint_state_message(JointState, Header, Time, out.stamp_ns, self.stream.joints,
                                                    [], [], out.external, array=float_array))
        self.contact_pub.publish(Bool(data=out.contact))
        if out.wrench is not None:
            sec, nanosec = stamp_fields(out.stamp_ns)
            m = WrenchStamped()
            m.header.stamp.sec, m.header.stamp.nanosec, m.header.frame_id = sec, nanosec, self.frame
            (m.wrench.force.x, m.wrench.force.y, m.wrench.force.z,
             m.wrench.torque.x, m.wrench.torque.y, m.wrench.torque.z) = (float(v) for v in out.wrench)
            self.wrench_pub.publish(m)
        for e in out.events:
            self.events_pub.publish(String(data=yaml.safe_dump(e, sort_keys=False)))
            self.get_logger().warning(f"contact on {e['joint']}: {e['start']:.3f}-{e['end']:.3f} s, "
                                      f"peak {e['peak']:+.4g}")

    def _diagnose(self) -> None:
        level, message, kv = self.stream.diagnostic()
        self.diag_pub.publish(diagnostic_array(self._types, now_ns(self), "robot_ident monitor", message, kv, level))
        self._status("watching" if self.stream.monitor.detector.calibrated else "calibrating")

    def close(self) -> None:
        for e in self.stream.open_events():
            self.get_logger().info(f"contact still on when the node stopped: {e}")


def main(args=None):
    return run_node(MonitorNode, args)


if __name__ == "__main__":
    main()

"""identification_node: records while the arm is excited, identifies, publishes.

Records the joint states and the current source while the excitation node reports
``exciting`` (or between ``~/start`` and ``~/stop``), then identifies on a worker
thread -- subscription callbacks keep running -- exactly as ``robot-ident identify``
does (`robot_ident.online.identification_window`, tested without ROS), writes the same
result folder, and publishes (all transient local):

* ``/robot_ident/parameters``: std_msgs/Float64MultiArray, one dimension labelled
  ``base_parameters``; the names are on ``/robot_ident/parameter_names``
  (std_msgs/String, a YAML document ``{parameters: [...], joints: [...]}``);
* ``/robot_ident/validation_rms``: Float64MultiArray labelled ``validation_rms``, one
  value per joint in the order of ``joints`` (held-out repetition when available);
* ``/diagnostics``: diagnostic_msgs/DiagnosticArray with name -> value +- std;
* ``/robot_ident/robot_description``: the identified URDF (std_msgs/String) when the
  estimator gives physical parameters -- never /robot_description;
* ``~/status``: std_msgs/String: idle, recording, identifying (with ``identifying: [stage]
  45.2 %  120.0 kmsg/s  ETA 3 s`` progress lines, at most one a second), done <folder>,
  failed <why>.

With ``record_to_bag`` (default) the window is written into a rosbag2 folder under
``output_dir/recordings`` as it arrives and identified from there in streaming mode:
memory stays bounded for an excitation of any length and the raw recording is kept.

``~/identify`` (std_srvs/Trigger) closes an open window and identifies it, or
identifies the last recorded window again. ``~/identify_payload`` (Trigger) does the same
as a payload identification with the arm known (parameter ``payload_arm``: a result
folder; empty: the config's payload.known_arm, else the URDF) and publishes the URDF
with the payload link (`robot_ident.online.payload_window`).
"""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger

from ..io.config import load_config
from ..online.identification_window import identify_recorded, method_error, result_summary
from ..online.msg_build import diagnostic_array, labelled_array
from ..online.recording_bag import StatusProgress
from ..online.recording_window import IDENTIFY, RecordingWindow, empty_reason
from ..online.shutdown import require_file_parameter
from ._common import (
    declare,
    declare_robot_description,
    latched_qos,
    message_types,
    now_ns,
    robot_description,
    run_node,
    sensor_qos,
)


class IdentificationNode(Node):
    def __init__(self):
        super().__init__("identification_node")
        declare_robot_description(self)
        self.config_file = declare(self, "config_file", "", "robot_ident parameter YAML", read_only=True)
        state_topic = declare(self, "state_topic", "/robot_ident/excitation_state",
                              "the excitation node's phase (transient local)", read_only=True)
        self.output_dir = declare(self, "output_dir", "robot_ident_results", "result folders are written "
                                  "under this folder, one per identification", read_only=True)
        self.method = declare(self, "method", "", "estimator (ols, wls, robust, rls, physical, sobol-ga, "
                              "sobol-ls); empty: the config's")
        self.repetitions = declare(self, "repetitions", 0, "repetitions in the excitation window; > 1 holds out "
                                   "the last one for validation, else the config's hold-out fraction",
                                   low=0, high=1000, step=1)
        identify_on_abort = declare(self, "identify_on_abort", False, "identify what was recorded when the "
                                    "excitation aborts", read_only=True)
        self.plots = declare(self, "plots", False, "write PNG plots into the result folder")
        diag_topic = declare(self, "diagnostics_topic", "/diagnostics", "DiagnosticArray output",
                             read_only=True)
        record_on_start = declare(self, "record_on_start", False, "open the window at start-up (bag replay); "
                                  "close it with ~/stop or ~/identify", read_only=True)
        current_topic = declare(self, "current_topic", "", "override the config's current_topic (e.g. "
                                "synthesised currents in Gazebo); empty: the config's", read_only=True)
        self.payload_arm = declare(self, "payload_arm", "", "~/identify_payload: the arm's result folder; empty: "
                                   "the config's payload.known_arm, else the URDF")
        self.joint_state_timeout = declare(
            self, "joint_state_timeout", 5.0, "close an excitation window as aborted when no joint state came "
            "for this many seconds of wall (steady) time, or when the excitation node is gone [s]",
            read_only=True, low=0.05, high=60.0)
        err = method_error(self.method)
        if err:
            raise ValueError(err)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        require_file_parameter("identification_node", "config_file", self.config_file,
                               "the robot_ident parameter YAML (joints, current source, actuators)")
        self.urdf = robot_description(self)
        self.cfg = load_config(self.config_file)
        if current_topic:
            self.cfg = replace(self.cfg, current_topic=current_topic)
        record_to_bag = declare(self, "record_to_bag", True, "write the window's messages into a rosbag2 under "
                                "output_dir/recordings as they arrive (bounded memory, kept on disk) and identify "
                                "it in streaming mode; false: collect them in memory", read_only=True)
        self.window = RecordingWindow.from_config(
            self.cfg, identify_on_abort, bag_root=Path(self.output_dir) / "recordings" if record_to_bag else None)
        if record_on_start:
            self.window.start()
        self._types = message_types()

        q = latched_qos()
        self.param_pub = self.create_publisher(Float64MultiArray, "/robot_ident/parameters", q)
        self.names_pub = self.create_publisher(String, "/robot_ident/parameter_names", q)
        self.rms_pub = self.create_publisher(Float64MultiArray, "/robot_ident/validation_rms", q)
        self.urdf_pub = self.create_publisher(String, "/robot_ident/robot_description", q)
        self.diag_pub = self.create_publisher(DiagnosticArray, diag_topic, q)
        self.status_pub = self.create_publisher(String, "~/status", q)

        # Recording to a bag, the subscriptions take the serialised messages and write them as they
        # are: at 1 kHz a deserialise-convert-serialise per message fell behind and lost half of them.
        raw = record_to_bag
        js_cb = self._on_raw(self.cfg.joint_states_topic) if raw else self._on_joint_state
        self.create_subscription(JointState, self.cfg.joint_states_topic, js_cb, sensor_qos(), raw=raw)
        if not self.window.shared_topic:
            cur_cb = self._on_raw(self.cfg.current_topic) if raw else self._on_current
            if self.cfg.current_kind == "dynamic_joint_state":
                from control_msgs.msg import DynamicJointState
                self.create_subscription(DynamicJointState, self.cfg.current_topic, cur_cb, sensor_qos(), raw=raw)
            else:
                self.create_subscription(JointState, self.cfg.current_topic, cur_cb, sensor_qos(), raw=raw)
        self.create_subscription(String, state_topic, self._on_excitation_state, latched_qos())
        self._state_topic = state_topic
        self.create_timer(0.1, self._on_watchdog, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_service(Trigger, "~/identify", self._on_identify)
        self.create_service(Trigger, "~/identify_payload", self._on_identify_payload)

        self._last = None               # the last recorded window
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        self._status("recording" if self.window.is_open else "idle")

    # ------------------------------------------------------------ recording
    def _on_set_parameters(self, params):
        for p in params:
            if p.name == "method":
                err = method_error(str(p.value))
                if err:
                    return SetParametersResult(successful=False, reason=err)
        return SetParametersResult(successful=True)

    def _on_joint_state(self, msg) -> None:
        self.window.add_joint_state(msg, now_ns(self), wall=time.monotonic())

    def _on_raw(self, topic: str):
        def callback(data: bytes) -> None:
            self.window.add_raw(topic, data, now_ns(self), wall=time.monotonic())
        return callback

    def _on_watchdog(self) -> None:
        publishers = self.count_publishers(self._state_topic) if self.window.source == "excitation" else None
        verdict, rec, why = self.window.watchdog(time.monotonic(), self.joint_state_timeout, publishers)
        if rec is None:
            return
        self.get_logger().error(f"excitation window closed as aborted: {why}")
        if verdict == IDENTIFY:
            self._identify(rec)
        else:
            self._status(f"idle (discarded {rec.messages} messages: {why})")

    def _on_current(self, msg) -> None:
        self.window.add_current(msg, now_ns(self))

    def _status(self, text: str) -> None:
        self.status_pub.publish(String(data=text))
        self.get_logger().info(text)

    def _on_excitation_state(self, msg) -> None:
        was_open = self.window.is_open
        verdict, rec = self.window.on_excitation_state(msg.data, wall=time.monotonic())
        if self.window.is_open and not was_open:
            self._status("recording")
        if rec is None:
            return
        if verdict == IDENTIFY:
            self._identify(rec)
        else:
            self._status(f"idle (discarded {rec.messages} messages: excitation {msg.data})")

    def _on_start(self, request, response):
        response.success, response.message = self.window.start()
        if response.success:
            self._status("recording")
        return response

    def _on_stop(self, request, response):
        ok, message, rec = self.window.stop()
        response.success, response.message = ok, message
        if rec is not None:
            response.success, response.message = self._identify(rec)
        return response

    def _on_identify(self, request, response):
        rec = None
        if self.window.is_open:
            _, _, rec = self.window.stop()
        rec = rec or self._last
        if rec is None:
            response.success, response.message = False, "nothing recorded yet"
        else:
            response.success, response.message = self._identify(rec)
        return response

    def _on_identify_payload(self, request, response):
        from ..online.payload_window import identify_payload_recorded

        rec = self.window.stop()[2] if self.window.is_open else None
        rec = rec or self._last
        why = empty_reason(rec)
        if why is not None:
            response.success, response.message = False, why
            return response
        self._last = rec
        out = Path(self.output_dir) / f"payload_{datetime.now(timezone.utc).strftime('%Y%m%d_%H%M%S')}"
        try:   # a payload fit is small (10 + a few unknowns): run it in the service call
            o = identify_payload_recorded(rec, self.cfg, self.urdf, out,
                                          self.get_parameter("payload_arm").value or None,
                                          {"node": self.get_fully_qualified_name(), "window": rec.source})
        except Exception as exc:        # report, keep the node alive
            response.success, response.message = False, f"payload identification failed: {exc}"
            self._status(response.message)
            return response
        if o.identified_urdf:
            self.urdf_pub.publish(String(data=o.identified_urdf))
        e = o.estimate
        response.success = True
        response.message = (f"payload {e.mass:.4g} kg at {[round(float(c), 5) for c in e.com]} m on {e.frame}; "
                            f"determined {int(e.determined.sum())}/10; {out}")
        self._status(f"done {out}")
        return response

    # -------------------------------------------------------- identification
    def _identify(self, rec) -> tuple[bool, str]:
        """Start the identification of `rec` on the worker thread (not of an empty window)."""
        why = empty_reason(rec)
        if why is not None:
            self._status(f"idle ({why})")
            return False, why
        with self._worker_lock:
            if self._worker is not None and self._worker.is_alive():
                return False, "an identification is running"
            self._last = rec
            self._worker = threading.Thread(target=self._work, args=(rec,), daemon=True)
            self._worker.start()
        return True, f"identifying {rec.messages} messages"

    def _work(self, rec) -> None:
        self._status(f"identifying ({rec.messages} messages" + (f"; {rec.loss_text()})" if rec.loss else ")"))
        if rec.loss and any(v.lost for v in rec.loss.values()):
            self.get_logger().warning(f"messages missing from the recording: {rec.loss_text()}")
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d_%H%M%S")
        out = Path(self.output_dir) / f"identification_{stamp}"
        t0 = time.monotonic()
        try:
            outcome = identify_recorded(
                rec, self.cfg, self.urdf, out, self.config_file,
                method=self.get_parameter("method").value or None,
                repetitions=int(self.get_parameter("repetitions").value),
                plots=bool(self.get_parameter("plots").value),
                source={"node": self.get_fully_qualified_name(), "window": rec.source},
                progress=StatusProgress(self._status))
        except Exception as exc:        # report, keep the node alive for the next window
            self._status(f"failed: {exc}")
            self.get_logger().error(f"identification failed: {exc}")
            return
        self._publish(outcome)
        self._status(f"done {out} ({time.monotonic() - t0:.1f} s)")

    def _publish(self, outcome) -> None:
        s = result_summary(outcome)
        self.param_pub.publish(labelled_array(self._types, "base_parameters", s.values))
        self.names_pub.publish(String(data=yaml.safe_dump({"parameters": list(s.names), "joints": list(s.joints)},
                                                          sort_keys=False)))
        if s.validation_rms is not None:
            self.rms_pub.publish(labelled_array(self._types, "validation_rms", s.validation_rms))
        self.diag_pub.publish(diagnostic_array(self._types, now_ns(self), "robot_ident: identification",
                                               f"{s.method}: {len(s.names)} base parameters", s.key_values(),
                                               hardware_id=self.cfg.node_name))
        if outcome.identified_urdf:
            self.urdf_pub.publish(String(data=outcome.identified_urdf))


def main(args=None):
    return run_node(IdentificationNode, args)


if __name__ == "__main__":
    main()

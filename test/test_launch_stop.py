"""launch_testing: stopping is safe on real ROS 2, measured from the joint states.

Each test starts the simulated arm and the nodes as processes of its own (so it can
signal or kill one of them), lets the excitation run, and then:

* Ctrl-C (SIGINT) or SIGTERM on the excitation node, action and topic interface: the
  arm must come to rest within 0.2 s of the arm's own (sim) time, or the time braking
  at the acceleration limits takes plus 0.1 s, the state must
  go to ``aborted`` and the node must exit 0 without a traceback;
* the simulated arm -- joint states and /clock -- is killed: the excitation node's
  clock stops, and the stale-joint-state watchdog must still abort within
  ``joint_state_timeout`` of wall time (plus its 50 ms timer period);
* the excitation node is killed (SIGKILL: no ``aborted`` is ever published): the
  identification node must close its window.

The figures go to stdout (and $ROBOT_IDENT_STOP_FIGURES when set). Skipped cleanly
where ROS 2 is absent; the same logic is tested without ROS in test_node_shutdown.py,
test_excitation_run.py and test_identification_window.py.
"""
import signal
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

import pytest

launch_testing = pytest.importorskip("launch_testing")
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("launch_ros")

import launch  # noqa: E402
import launch_testing.actions  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from ros_test_helpers import Spinning, executable, output, record  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIGURES = "ROBOT_IDENT_STOP_FIGURES"        # file the figures are appended to, when set
CONFIG = str(ROOT / "config" / "demo_arm.yaml")
URDF = str(ROOT / "urdf" / "demo_arm.urdf")
TRAJECTORY = str(ROOT / "config" / "demo_arm_excitation.yaml")
LATCHED = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
SENSOR = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
REST_SPEED = 0.05          # rad/s: the arm is at rest below this on every joint
STOP_TARGET = 0.2          # s of the arm's time from the signal to rest
# topic interface: the hold brakes no harder than the config's acceleration limits (smallest
# 6 rad/s^2, 5 % margin), so from speed v it may take v / BRAKE_ACC (+ one control period)
BRAKE_ACC = 0.95 * 6.0
JOINT_STATE_TIMEOUT = 0.5  # s, the excitation node's default


@pytest.mark.launch_test
def generate_test_description():
    # the tests start their own processes; this one keeps the launch alive meanwhile
    keep_alive = launch.actions.ExecuteProcess(cmd=["sleep", "3600"])
    return launch.LaunchDescription([keep_alive, launch_testing.actions.ReadyToTest()]), {}



def start(name, **params):
    args = [executable(name), "--ros-args"]
    for k, v in params.items():
        v = str(v).lower() if isinstance(v, bool) else v
        args += ["-p", f"{k}:={v}"]
    log = tempfile.NamedTemporaryFile("w+", prefix=f"{name}_", suffix=".log", delete=False)
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, text=True), log




class TestStopping(Spinning, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rclpy.init()
        cls.node = rclpy.create_node("test_robot_ident_stop")

    @classmethod
    def tearDownClass(cls):
        cls.node.destroy_node()
        rclpy.shutdown()

    def setUp(self):
        self.procs = []
        self.states = []           # (wall, data)
        self.js = []               # (wall, stamp s, max |qd|)
        self.subs = [
            self.node.create_subscription(String, "/robot_ident/excitation_state",
                                          lambda m: self.states.append((time.monotonic(), m.data)), LATCHED),
            self.node.create_subscription(JointState, "/joint_states", self._on_js, SENSOR),
        ]

    def tearDown(self):
        for s in self.subs:
            self.node.destroy_subscription(s)
        for p, log in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
            log.close()

    def _on_js(self, m):
        qd = [abs(v) for v in m.velocity] or [0.0]
        self.js.append((time.monotonic(), m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, max(qd)))

    def launch(self, name, **params):
        p, log = start(name, **params)
        self.procs.append((p, log))
        return p, log

    def state_after(self, t, wanted):
        return [(w, s) for w, s in self.states if w >= t and s in wanted]

    def excite(self, interface, joint_state_timeout=2.0, **extra):
        """Start the arm and the excitation node; return once it is 3 s into the excitation.
        The watchdog's 2 s here (0.5 s by default) keeps a stall of the loaded machine
        from aborting the run before the stop under test."""
        # 100 Hz joint states and /clock: these tests share 2 cores with other jobs; 10 ms
        # is the resolution of the stop figures
        sim = self.launch("sim_arm_node", config_file=CONFIG, urdf_file=URDF, real_time_factor=1.0,
                          joint_state_rate=100.0, dynamic_joint_state_rate=100.0, clock_rate=100.0)
        exc = self.launch("excitation_node", config_file=CONFIG, urdf_file=URDF, trajectory_file=TRAJECTORY,
                          use_sim_time=True, interface=interface, repetitions=1,
                          # the stop is tested here, not the tracking: with the machine loaded the topic
                          # interface's unstamped start lags by ~0.1 s
                          max_tracking_error=0.3, joint_state_timeout=joint_state_timeout, **extra)
        self.spin_until(lambda: any(s == "exciting" for _, s in self.states), 120.0, "no 'exciting'")
        t0 = self.js[-1][1]
        self.spin_until(lambda: self.js[-1][1] > t0 + 3.0, 60.0, "3 s of sim time")   # moving fast by then
        self.assertEqual(self.states[-1][1], "exciting", "still exciting before the stop")
        return sim, exc

    def spin_sim(self, seconds, timeout=60.0):
        """Spin until the joint states cover `seconds` more of the arm's (sim) time."""
        t0 = self.js[-1][1]
        self.spin_until(lambda: self.js[-1][1] > t0 + seconds, timeout, f"{seconds} s more of sim time")

    def stop_figures(self, t_signal):
        """From the joint states: the arm's time from the signal to rest (every joint
        below REST_SPEED from then on) and the speed it had."""
        before = [j for j in self.js if j[0] <= t_signal]
        after = [j for j in self.js if j[0] > t_signal]
        self.assertTrue(before and after, "joint states around the signal")
        _, s0, v0 = before[-1]
        moving = [j for j in after if j[2] >= REST_SPEED]
        rest_stamp = s0 if not moving else moving[-1][1]
        rest_wall = t_signal if not moving else moving[-1][0]
        # the arm keeps publishing: at rest for at least a second after
        self.assertGreater(after[-1][1] - rest_stamp, 1.0)
        return {"speed_at_signal": round(v0, 3), "to_rest_sim_s": round(rest_stamp - s0, 4),
                "to_rest_wall_s": round(rest_wall - t_signal, 4)}

    def _signal_stops_the_arm(self, interface, signum):
        _, (exc, log) = self.excite(interface)
        t_sig = time.monotonic()
        exc.send_signal(signum)
        self.spin_sim(1.5)
        self.assertEqual(exc.wait(10), 0, output(log))
        text = output(log)
        self.assertNotIn("Traceback", text)
        self.assertTrue(self.state_after(t_sig, {"aborted"}), "aborted published after the signal")
        fig = self.stop_figures(t_sig)
        aborted = self.state_after(t_sig, {"aborted"})[0][0] - t_sig
        fig.update(test=f"{signal.Signals(signum).name} {interface}", aborted_received_wall_s=round(aborted, 4))
        record(FIGURES, fig)
        self.assertGreater(fig["speed_at_signal"], 0.2)          # it was moving
        # both interfaces brake with the hold trajectory, no harder than the acceleration limits
        target = max(STOP_TARGET, fig["speed_at_signal"] / BRAKE_ACC + 0.1)
        self.assertLess(fig["to_rest_sim_s"], target, fig)

    def test_ctrl_c_stops_the_arm_action(self):
        self._signal_stops_the_arm("action", signal.SIGINT)

    def test_ctrl_c_stops_the_arm_topic(self):
        self._signal_stops_the_arm("topic", signal.SIGINT)

    def test_sigterm_stops_the_arm_topic(self):
        self._signal_stops_the_arm("topic", signal.SIGTERM)

    def test_stopped_clock_aborts_on_wall_time(self):
        (sim, _), (exc, log) = self.excite("action", joint_state_timeout=JOINT_STATE_TIMEOUT)
        t_kill = time.monotonic()
        sim.kill()                          # joint states and /clock stop together
        self.spin_until(lambda: self.state_after(t_kill, {"aborted"}), 10.0, "no 'aborted' after the clock stopped")
        t_abort = self.state_after(t_kill, {"aborted"})[0][0] - t_kill
        last_js = max(w for w, _, _ in self.js)
        record(FIGURES, {"test": "clock stopped (sim arm killed), action", "aborted_after_kill_wall_s": round(t_abort, 4),
                "aborted_after_last_joint_state_wall_s": round(self.state_after(t_kill, {"aborted"})[0][0] - last_js,
                                                               4),
                "joint_state_timeout_s": JOINT_STATE_TIMEOUT})
        exc.send_signal(signal.SIGINT)
        self.assertEqual(exc.wait(10), 0)
        self.assertIn("on the wall clock", output(log))
        self.assertLess(t_abort, JOINT_STATE_TIMEOUT + 0.05 + 0.25)    # + timer period + delivery

    def test_identification_window_closes_when_the_excitation_node_dies(self):
        out = tempfile.mkdtemp(prefix="robot_ident_stop_")
        status = []
        sub = self.node.create_subscription(String, "/identification_node/status",
                                            lambda m: status.append((time.monotonic(), m.data)), LATCHED)
        self.subs.append(sub)
        ident, ilog = self.launch("identification_node", config_file=CONFIG, urdf_file=URDF, use_sim_time=True,
                                  output_dir=out, joint_state_timeout=1.0)
        (sim, _), (exc, _) = self.excite("action")
        self.spin_until(lambda: any(s == "recording" for _, s in status), 10.0, "no 'recording'")
        t_kill = time.monotonic()
        exc.kill()                          # SIGKILL: no 'aborted' ever comes
        sim.kill()                          # and the joint states stop
        self.spin_until(lambda: any(w > t_kill and s.startswith("idle (discarded") for w, s in status), 15.0,
                        "the window did not close")
        closed = [w for w, s in status if w > t_kill and s.startswith("idle (discarded")][0] - t_kill
        record(FIGURES, {"test": "excitation node and arm killed: identification window closed", "closed_after_wall_s":
                round(closed, 4), "identification_joint_state_timeout_s": 1.0})
        self.assertFalse(list(Path(out).rglob("result.yaml")), "nothing identified")
        ident.send_signal(signal.SIGINT)
        self.assertEqual(ident.wait(10), 0, output(ilog))
        self.assertNotIn("Traceback", output(ilog))

    def test_stop_service_stops_the_arm_action(self):
        from std_srvs.srv import Trigger
        _, (exc, log) = self.excite("action")
        client = self.node.create_client(Trigger, "/excitation_node/stop")
        self.assertTrue(client.wait_for_service(timeout_sec=10.0))
        t_call = time.monotonic()
        future = client.call_async(Trigger.Request())
        self.spin_until(future.done, 10.0, "no answer from ~/stop")
        self.assertTrue(future.result().success, future.result().message)
        self.spin_sim(1.5)
        fig = self.stop_figures(t_call)
        fig.update(test="~/stop action (from the call, service round trip included)")
        record(FIGURES, fig)
        self.assertTrue(self.state_after(t_call, {"aborted"}))
        self.assertLess(fig["to_rest_sim_s"], max(0.5, fig["speed_at_signal"] / BRAKE_ACC + 0.2), fig)
        self.node.destroy_client(client)

    def test_nodes_without_parameters_exit_with_one_line(self):
        for name in ("excitation_node", "torque_node", "identification_node", "sim_arm_node",
                     "current_synth_node"):
            p = subprocess.run([executable(name)], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 1, (name, p.stdout, p.stderr))
            self.assertNotIn("Traceback", p.stderr + p.stdout)
            # (the middleware may print its own notices, e.g. Cyclone's "lo is not multicast-capable")
            err = [line for line in p.stderr.splitlines() if line.startswith(f"{name}:")]
            self.assertEqual(len(err), 1, (name, p.stderr))
            self.assertTrue(err[0].startswith(f"{name}: cannot start: parameter "), err[0])
            self.assertEqual(p.stderr.strip().splitlines()[-1], err[0])

    def test_unknown_method_is_refused_at_startup(self):
        p = subprocess.run([executable("identification_node"), "--ros-args", "-p", f"config_file:={CONFIG}",
                            "-p", f"urdf_file:={URDF}", "-p", "method:=wlss"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("parameter method: unknown estimator 'wlss'", p.stderr)
        self.assertNotIn("Traceback", p.stderr)

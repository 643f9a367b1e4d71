"""The identification node's window and identification without ROS, with rosbags messages
read from a simulated bag: the node's result must equal the command line's on the same
messages, and only messages inside the window count."""
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_ident.excitation.families import ModifiedFourierTrajectory
from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory
from robot_ident.io.config import load_config
from robot_ident.model.robot import RobotModel
from robot_ident.offline.bag_workflow import simulate_to_bag
from robot_ident.offline.inputs import identify_inputs
from robot_ident.online.identification_window import (
    holdout_fraction,
    identify_recorded,
    identify_streams,
    method_error,
    result_summary,
)
from robot_ident.online.recording_window import DISCARD, IDENTIFY, RecordingWindow, empty_reason

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "demo_arm.yaml"


@pytest.fixture(scope="module")
def sim_bag(tmp_path_factory, demo_urdf):
    d = tmp_path_factory.mktemp("window")
    m = RobotModel(demo_urdf)
    rng = np.random.default_rng(2)
    tr = ModifiedFourierTrajectory(m.joint_names, 2 * np.pi / 8, np.array([0.0, -0.3, 0.6, 0.0, 0.3, 0.0]),
                                   0.25 * rng.standard_normal((6, 4)), 0.25 * rng.standard_normal((6, 4)))
    save_trajectory(d / "t.yaml", TrajectoryFile(tr))
    simulate_to_bag(demo_urdf, CONFIG, d / "t.yaml", d / "bag", repetitions=2)
    return d


def bag_messages(bag):
    """(topic, log time, message) of a bag in log order, as rosbags deserialises them."""
    from rosbags.highlevel import AnyReader

    from robot_ident.data.bag import make_typestore
    with AnyReader([Path(bag)], default_typestore=make_typestore()) as r:
        return [(c.topic, t, r.deserialize(raw, c.msgtype)) for c, t, raw in r.messages()]


def feed(win, cfg, msgs):
    for topic, t, m in msgs:
        if topic == cfg.joint_states_topic:
            win.add_joint_state(m, t)
        elif topic == cfg.current_topic:
            win.add_current(m, t)


def test_node_result_equals_the_command_line(sim_bag, demo_urdf, tmp_path):
    """The window's streams in memory (a node without a bag root) identify as the command
    line identifies the bag of the same messages: the same parameters, checks and result."""
    cfg = load_config(CONFIG)
    msgs = bag_messages(sim_bag / "bag")
    win = RecordingWindow.from_config(cfg)
    assert win.on_excitation_state("exciting") == (None, None)
    feed(win, cfg, msgs)
    verdict, rec = win.on_excitation_state("done")
    assert verdict == IDENTIFY and rec.source == "excitation" and rec.messages == len(msgs)
    node = identify_streams(rec.states, rec.currents, cfg, demo_urdf, tmp_path / "node", CONFIG)
    cli = identify_inputs([sim_bag / "bag"], demo_urdf, CONFIG, tmp_path / "cli", plots=False)
    assert node.warnings == cli.warnings
    np.testing.assert_array_equal(node.result.values, cli.result.values)
    np.testing.assert_array_equal(node.validation.rms, cli.validation.rms)
    a = yaml.safe_load((tmp_path / "node" / "result.yaml").read_text())
    b = yaml.safe_load((tmp_path / "cli" / "result.yaml").read_text())
    a.pop("source", None), b.pop("source", None)
    assert a == b
    for f in ("result.yaml", "model.urdf", "config.yaml"):
        assert (tmp_path / "node" / f).is_file()
    assert ((tmp_path / "node" / "identified.urdf").is_file()) == ((tmp_path / "cli" / "identified.urdf").is_file())
    # and it is right: held-out RMS near the simulator's effort noise
    noise = yaml.safe_load((sim_bag / "bag" / "robot_ident_truth.yaml").read_text())["effort_noise_std"]
    s = result_summary(node)
    for j, r in zip(s.joints, s.validation_rms):
        assert r <= 1.3 * noise[j], (j, r, noise[j])
    kv = dict(s.key_values())
    assert kv["method"] == node.result.method and f"validation_rms.{s.joints[0]}" in kv
    assert len(kv) == 3 + len(s.warnings) + len(s.names) + len(s.joints)
    assert all(v.startswith("warning: ") for k, v in kv.items() if k.startswith("warning."))
    assert all(v.startswith("note: ") for k, v in kv.items() if k.startswith("note."))


def test_window_recorded_to_a_bag_gives_the_command_lines_result(sim_bag, demo_urdf, tmp_path):
    """The node's default: messages go to a rosbag2 as they arrive (nothing in memory),
    the bag is closed before identifying, and the identification of it (read in bounded
    memory) equals `robot-ident identify` on the original bag; progress reaches the status
    text."""
    from robot_ident.online.recording_bag import StatusProgress
    cfg = load_config(CONFIG)
    msgs = bag_messages(sim_bag / "bag")
    win = RecordingWindow.from_config(cfg, bag_root=tmp_path / "recordings")
    win.start()
    feed(win, cfg, msgs)
    assert win._js is None and win._cur is None          # nothing collected in memory
    ok, _, rec = win.stop()
    assert ok and rec.states is None and rec.bag.parent == tmp_path / "recordings"
    assert (rec.bag / "metadata.yaml").is_file() and rec.messages == len(msgs)
    status = []
    node = identify_recorded(rec, cfg, demo_urdf, tmp_path / "node", CONFIG, method="wls",
                             progress=StatusProgress(status.append, interval=0.0))
    cli = identify_inputs([sim_bag / "bag"], demo_urdf, CONFIG, tmp_path / "cli", method="wls", plots=False)
    assert node.warnings == cli.warnings      # the same input checks (the config sets the cutoff)
    np.testing.assert_array_equal(node.result.values, cli.result.values)
    np.testing.assert_array_equal(node.validation.rms, cli.validation.rms)
    assert node.holdout == 0.2 and (tmp_path / "node" / "result.yaml").is_file()
    assert any(s.startswith("identifying: [read]") and "msg/s" in s for s in status)
    assert any(s.startswith("identifying: [identify]") for s in status)


def test_only_the_window_is_recorded_and_the_last_repetition_is_held_out(sim_bag, demo_urdf):
    cfg = load_config(CONFIG)
    msgs = bag_messages(sim_bag / "bag")
    win = RecordingWindow.from_config(cfg)
    k0, k1 = len(msgs) // 10, len(msgs) - len(msgs) // 10
    win.on_excitation_state("idle")
    win.on_excitation_state("approaching")
    feed(win, cfg, msgs[:k0])
    win.on_excitation_state("exciting")
    feed(win, cfg, msgs[k0:k1])
    win.on_excitation_state("exciting")         # latched re-delivery: no effect
    assert win.is_open
    verdict, rec = win.on_excitation_state("done")
    feed(win, cfg, msgs[k1:])
    assert verdict == IDENTIFY and rec.messages == k1 - k0
    first = min(int(m.header.stamp.sec) * 10**9 + int(m.header.stamp.nanosec) for _, _, m in msgs[k0:k1])
    assert rec.states.stamps.min() >= first and rec.currents.stamps.min() >= first
    out = identify_streams(rec.states, rec.currents, cfg, demo_urdf, repetitions=2)
    assert out.holdout == 0.5 and out.output is None
    assert out.validation is not None
    # the held-out half starts in the middle of the window (times from its first sample) and holds
    # as many samples as the identified half (the report's series are thinned for the plots; its
    # per-joint counts are the moving samples, fewer than all)
    span = (rec.states.stamps.max() - rec.states.stamps.min()) * 1e-9
    assert out.validation.t[0] == pytest.approx(0.5 * span, abs=0.02)
    n = out.result.n_samples
    assert 0.8 * n <= out.validation.n_samples.max() <= n + 5


def test_window_transitions():
    win = RecordingWindow("/joint_states", "/dynamic_joint_states", "dynamic_joint_state", "current")
    assert win.stop() == (False, "not recording", None)
    assert win.on_excitation_state("done") == (None, None)       # never opened
    win.on_excitation_state("exciting")
    assert win.start()[0] is False and "excitation" in win.start()[1]
    verdict, rec = win.on_excitation_state("aborted")
    assert verdict == DISCARD and rec.messages == 0
    win2 = RecordingWindow("/joint_states", "/dynamic_joint_states", "dynamic_joint_state", "current",
                           identify_on_abort=True)
    win2.on_excitation_state("exciting")
    assert win2.on_excitation_state("aborted")[0] == IDENTIFY
    # a restarted excitation node (idle while the window is open) discards
    win2.on_excitation_state("exciting")
    assert win2.on_excitation_state("idle")[0] == DISCARD
    # manual window: the excitation state does not close it
    assert win.start() == (True, "recording")
    assert win.on_excitation_state("done") == (None, None) and win.is_open
    ok, msg, rec = win.stop()
    assert ok and rec.source == "manual" and not win.is_open
    # the current topic is the joint-state topic: one collector serves both
    win3 = RecordingWindow("/joint_states", "/joint_states", "joint_state")
    assert win3.shared_topic
    win3.start()
    from types import SimpleNamespace as NS
    m = NS(header=NS(stamp=NS(sec=1, nanosec=0)), name=["a"], position=[0.1], velocity=[], effort=[2.0])
    win3.add_joint_state(m)
    win3.add_current(m)                          # ignored: already recorded as a joint state
    _, _, rec = win3.stop()
    assert rec.states is rec.currents and rec.messages == 1
    with pytest.raises(Exception, match="cannot be both"):
        RecordingWindow("/x", "/x", "dynamic_joint_state", "current")


def test_holdout_fraction():
    assert holdout_fraction(0.2, 0) == 0.2 and holdout_fraction(0.2, 1) == 0.2
    assert holdout_fraction(0.2, 4) == 0.25


def test_bag_recorder_keeps_duck_typed_messages(tmp_path):
    """rclpy-like messages (array.array fields) in, the same values out of the bag."""
    import array
    from types import SimpleNamespace as NS

    from robot_ident.data.bag_stream import bag_chunks
    win = RecordingWindow("/joint_states", "/currents", "joint_state", bag_root=tmp_path, storage="sqlite3")
    win.start()
    for k in range(50):
        hdr = NS(stamp=NS(sec=100 + k // 10, nanosec=(k % 10) * 100_000_000), frame_id="")
        win.add_joint_state(NS(header=hdr, name=["a", "b"], position=array.array("d", [k, -k]),
                               velocity=array.array("d", [0.5, 0.25]), effort=array.array("d")), 5 + k)
        win.add_current(NS(header=hdr, name=["b", "a"], position=array.array("d"),
                           velocity=array.array("d"), effort=array.array("d", [2.0 * k, 3.0])), 6 + k)
    ok, _, rec = win.stop()
    assert ok and rec.messages == 100
    topics = {"/joint_states": ("joint_state", None), "/currents": ("joint_state", None)}
    got = {}
    for chunk in bag_chunks(rec.bag, topics):
        got.update(chunk)
    js, cur = got["/joint_states"], got["/currents"]
    assert np.array_equal(js.matrix("position", ["a", "b"])[:, 1], -np.arange(50.0))
    assert np.isnan(js.matrix("effort", ["a"])).all()
    assert np.array_equal(cur.matrix("effort", ["a", "b"])[:, 1], 2.0 * np.arange(50))
    assert js.stamps[12] == 101_200_000_000 and np.array_equal(cur.received, 6 + np.arange(50))

def _js(sec):
    from types import SimpleNamespace as NS
    return NS(header=NS(stamp=NS(sec=sec, nanosec=0)), name=["a"], position=[0.1], velocity=[], effort=[2.0])


@pytest.mark.parametrize("identify_on_abort", [False, True])
def test_watchdog_closes_an_excitation_window_whose_joint_states_stop(identify_on_abort):
    """Sim time: the joint states and /clock stop together; only the wall clock moves."""
    win = RecordingWindow("/joint_states", "/joint_states", "joint_state", identify_on_abort=identify_on_abort)
    assert win.watchdog(100.0, 1.0) == (None, None, "")              # nothing open
    win.on_excitation_state("exciting", wall=100.0)
    assert win.watchdog(100.9, 1.0) == (None, None, "")              # none yet, but not for long
    win.add_joint_state(_js(1), wall=100.5)
    win.add_joint_state(_js(2), wall=101.0)
    assert win.watchdog(101.9, 1.0)[0] is None and win.is_open
    assert win.watchdog(102.05, 1.0)[0] is None and win.is_open      # stale once: maybe our own stall
    verdict, rec, why = win.watchdog(102.1, 1.0)
    assert verdict == (IDENTIFY if identify_on_abort else DISCARD) and rec.messages == 2
    assert "wall time" in why and not win.is_open
    assert win.on_excitation_state("aborted") == (None, None)         # the late abort finds it closed


def test_watchdog_closes_the_window_when_the_excitation_node_is_gone():
    win = RecordingWindow("/joint_states", "/joint_states", "joint_state")
    win.on_excitation_state("exciting", wall=0.0)
    win.add_joint_state(_js(1), wall=0.1)
    assert win.watchdog(0.2, 1.0, state_publishers=1)[0] is None
    verdict, rec, why = win.watchdog(0.3, 1.0, state_publishers=0)     # killed: no 'aborted' ever comes
    assert verdict == DISCARD and rec.messages == 1 and "gone" in why


def test_watchdog_leaves_manual_windows_alone():
    win = RecordingWindow("/joint_states", "/joint_states", "joint_state")
    win.start()
    win.add_joint_state(_js(1), wall=0.0)
    assert win.watchdog(1000.0, 1.0, state_publishers=0) == (None, None, "") and win.is_open


def test_an_empty_window_is_not_identified():
    win = RecordingWindow("/joint_states", "/joint_states", "joint_state")
    assert empty_reason(None) == "nothing recorded yet"
    win.start()
    _, _, rec = win.stop()
    assert rec.messages == 0 and "no joint state" in empty_reason(rec)
    win.start()
    win.add_joint_state(_js(1))
    _, _, rec = win.stop()
    assert empty_reason(rec) is None


def test_method_is_checked_against_the_estimators():
    assert method_error("") is None and method_error("wls") is None and method_error("physical") is None
    err = method_error("wlss")
    assert err.startswith("parameter method: unknown estimator 'wlss'")
    assert "ols" in err and "sobol-ga" in err and "\n" not in err


def test_watchdog_ignores_a_stall_of_the_node_itself():
    win = RecordingWindow("/joint_states", "/joint_states", "joint_state")
    win.on_excitation_state("exciting", wall=0.0)
    win.add_joint_state(_js(1), wall=0.1)
    assert win.watchdog(1.5, 1.0)[0] is None                     # the timer first after a stall
    win.add_joint_state(_js(2), wall=1.5)                        # then the queued states
    assert win.watchdog(1.6, 1.0)[0] is None and win.is_open


def test_watchdog_sees_joint_states_recorded_to_a_bag(tmp_path):
    """The node records to a bag by default: the wall-clock watchdog must see those joint
    states too (it would otherwise abort a healthy recording), and the window is not empty."""
    win = RecordingWindow("/joint_states", "/joint_states", "joint_state", bag_root=tmp_path, storage="sqlite3")
    win.on_excitation_state("exciting", wall=0.0)
    for k in range(1, 30):
        win.add_joint_state(_js(k), received_ns=k, wall=0.1 * k)
        assert win.watchdog(0.1 * k + 0.05, 1.0)[0] is None and win.is_open
    verdict, rec = win.on_excitation_state("done", wall=3.0)
    assert verdict == IDENTIFY and rec.bag is not None and rec.joint_state_messages == 29
    assert empty_reason(rec) is None


def raw_messages(bag):
    """(topic, log time, serialised bytes) of a bag: what a raw rclpy subscription delivers."""
    from rosbags.highlevel import AnyReader

    from robot_ident.data.bag import make_typestore
    with AnyReader([Path(bag)], default_typestore=make_typestore()) as r:
        return [(c.topic, t, bytes(raw)) for c, t, raw in r.messages()]


def test_a_raw_recording_counts_the_messages_lost_and_identifies_as_the_command_line(sim_bag, demo_urdf, tmp_path):
    """Issue 30: at 1 kHz the node lost half the messages in its queues, silently. Recording raw
    writes each message as delivered; the losses are counted from the gaps in the header stamps."""
    cfg = load_config(CONFIG)
    msgs = raw_messages(sim_bag / "bag")
    win = RecordingWindow.from_config(cfg, bag_root=tmp_path / "recordings")
    win.start()
    for topic, t, data in msgs:
        win.add_raw(topic, data, t, wall=1.0)
    _, _, rec = win.stop()
    assert rec.messages == len(msgs) and all(v.lost == 0 for v in rec.loss.values())
    assert rec.joint_state_messages == sum(1 for m in msgs if m[0] == cfg.joint_states_topic)
    node = identify_recorded(rec, cfg, demo_urdf, tmp_path / "node", CONFIG, method="wls")
    cli = identify_inputs([sim_bag / "bag"], demo_urdf, CONFIG, tmp_path / "cli", method="wls", plots=False)
    np.testing.assert_array_equal(node.result.values, cli.result.values)
    source = yaml.safe_load((tmp_path / "node" / "result.yaml").read_text())["source"]
    js = source["messages"][cfg.joint_states_topic]
    assert js["lost"] == 0 and js["received"] == rec.joint_state_messages and js["rate_hz"] > 0

    # the same stream with messages dropped as an overflowing queue drops them
    win2 = RecordingWindow.from_config(cfg, bag_root=tmp_path / "recordings2")
    win2.start()
    dropped = {}
    for k, (topic, t, data) in enumerate(msgs):
        if 200 <= k < 260 or (1000 <= k < 3000 and k % 7 == 0):
            dropped[topic] = dropped.get(topic, 0) + 1
            continue
        win2.add_raw(topic, data, t)
    _, _, rec2 = win2.stop()
    assert {t: v.lost for t, v in rec2.loss.items()} == dropped
    assert "lost" in rec2.loss_text() and "gaps of the header stamps" in rec2.loss_text()


def test_stamp_gaps_count_missing_periods():
    from robot_ident.data.stamp_gaps import StampGaps
    g = StampGaps()
    stamps = [k * 1_000_000 for k in range(1000) if k not in (10, 11, 12, 500)]
    for s in stamps + [stamps[-1] - 5_000_000, stamps[-1] + 1_000_000]:   # one step back: not a gap
        g.add(s)
    loss = g.loss()
    assert loss.lost == 4 and loss.gaps == 2 and loss.period_s == pytest.approx(1e-3)
    assert loss.received == len(stamps) + 2
    assert StampGaps().loss().period_s is None


def test_a_raw_recording_of_a_shared_topic_keeps_the_joint_states(tmp_path):
    """Currents in the joint states' effort field: one topic, recorded once (a mapping keyed by
    topic let the absent current connection replace the joint states')."""
    from robot_ident.data.bag import JOINT_STATE, make_typestore
    from robot_ident.online.recording_bag import BagRecorder
    ts = make_typestore()
    T = ts.types
    rec = BagRecorder(tmp_path / "bag", "/joint_states", "/joint_states", "joint_state")
    for k in range(5):
        stamp = T["builtin_interfaces/msg/Time"](sec=1, nanosec=k * 1000)
        m = T[JOINT_STATE](header=T["std_msgs/msg/Header"](stamp=stamp, frame_id=""),
                           name=["a"], position=np.array([0.1 * k]), velocity=np.array([0.0]), effort=np.array([1.0]))
        rec.write_raw("/joint_states", bytes(ts.serialize_cdr(m, JOINT_STATE)), 10 + k)
    rec.close()
    assert rec.messages == 5 and rec.loss()["/joint_states"].received == 5
    assert len(bag_messages(tmp_path / "bag")) == 5

"""The identification node's window and identification without ROS, with rosbags messages
read from a simulated bag: the node's result must equal the command line's on the same
messages, and only messages inside the window count."""
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_ident.excitation.families import ModifiedFourierTrajectory
from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory
from robot_ident.online.identification_window import (DISCARD, IDENTIFY, RecordingWindow, holdout_fraction,
                                               identify_streams, result_summary)
from robot_ident.io.config import load_config
from robot_ident.model.robot import RobotModel
from robot_ident.offline.bag_workflow import identify_bag, simulate_to_bag

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
    cfg = load_config(CONFIG)
    msgs = bag_messages(sim_bag / "bag")
    win = RecordingWindow.from_config(cfg)
    assert win.on_excitation_state("exciting") == (None, None)
    feed(win, cfg, msgs)
    verdict, rec = win.on_excitation_state("done")
    assert verdict == IDENTIFY and rec.source == "excitation" and rec.messages == len(msgs)
    node = identify_streams(rec.states, rec.currents, cfg, demo_urdf, tmp_path / "node", CONFIG)
    cli = identify_bag(sim_bag / "bag", demo_urdf, CONFIG, tmp_path / "cli", plots=False)
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
    assert abs(out.validation.t.size - out.result.n_samples) <= 0.02 * out.result.n_samples + 5


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

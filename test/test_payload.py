"""Payload identification (issue 15): the payload model against Pinocchio, the estimator
against MuJoCo's truth through design --payload -> simulate -> identify --payload, which
of the 10 parameters a motion determines, and bad input."""
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from robot_ident.cli import main
from robot_ident.errors import ConfigError, ModelError
from robot_ident.estimation.payload import (
    PayloadModel,
    frame_transform_matrix,
    identify_payload,
    payload_config,
)
from robot_ident.excitation.trajectory_file import load_trajectory
from robot_ident.io.known_arm import arm_from_urdf
from robot_ident.io.payload_urdf import add_payload_link
from robot_ident.model.robot import FrictionOptions, RobotModel

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "demo_arm_payload.yaml"


def tool(mass=2.0, com=(0.012, -0.018, 0.065), box=(0.10, 0.08, 0.14), rpy=(0.3, -0.2, 0.5)):
    a, b, h = box
    R = pin.rpy.rpyToMatrix(*rpy)
    Ibox = mass / 12.0 * np.diag([b * b + h * h, a * a + h * h, a * a + b * b])
    return pin.Inertia(mass, np.array(com), R @ Ibox @ R.T).toDynamicParameters()


def run_cli(*args):
    return main([str(a) for a in args])


def test_frame_transform_is_pinocchios_se3_action():
    rng = np.random.default_rng(1)
    M = pin.SE3(pin.rpy.rpyToMatrix(0.3, -1.1, 2.0), np.array([0.1, -0.05, 0.2]))
    T = frame_transform_matrix(M)
    for _ in range(3):
        I = pin.Inertia(float(rng.uniform(0.1, 5)), rng.normal(size=3) * 0.1, np.diag(rng.uniform(0.01, 0.1, 3)))
        np.testing.assert_allclose(T @ I.toDynamicParameters(), M.act(I).toDynamicParameters(), atol=1e-12)


def test_urdf_payload_link_matches_the_payload_model(demo_urdf):
    """The payload written into the URDF as a fixed link on tool0 adds exactly T phi to
    the carrying body (wrist_3), as Pinocchio reads the new URDF."""
    phi = tool()
    cad = RobotModel(demo_urdf)
    pm = PayloadModel(cad, "tool0")
    assert pm.body == "wrist_3"
    xml = add_payload_link(cad.urdf_xml, "tool0", phi, "payload")
    with_tool = RobotModel(xml)
    np.testing.assert_allclose(with_tool.nominal, pm.add_to(cad.nominal, phi), atol=1e-9)
    with pytest.raises(ModelError, match="already has a link 'payload'"):
        add_payload_link(xml, "tool0", phi, "payload")
    with pytest.raises(ModelError, match="not a physical body"):
        add_payload_link(cad.urdf_xml, "tool0", -phi, "payload")


def _pinocchio_data(urdf_xml, joints_moving, seconds=8.0, rate=200.0, seed=0, noise=0.01):
    """Exact efforts of the arm with a tool (Pinocchio RNEA), only `joints_moving` moving."""
    m = RobotModel(urdf_xml)
    t = np.arange(0, seconds, 1 / rate)
    q = np.tile(np.array([0.0, -0.9, 1.5, 0.0, 0.0, 0.0]), (t.size, 1))
    qd, qdd = np.zeros_like(q), np.zeros_like(q)
    rng = np.random.default_rng(seed)
    for j in joints_moving:
        k = m.joint_names.index(j)
        for f in (0.3, 0.5, 0.8):
            a, ph = rng.uniform(0.3, 0.6), rng.uniform(0, 2 * np.pi)
            w = 2 * np.pi * f
            q[:, k] += a * np.sin(w * t + ph)
            qd[:, k] += a * w * np.cos(w * t + ph)
            qdd[:, k] -= a * w * w * np.sin(w * t + ph)
    tau = m.rnea(q, qd, qdd)
    tau += rng.normal(size=tau.shape) * noise * tau.std(axis=0)
    return q, qd, qdd, tau


def test_wrist_motion_determines_all_ten_and_one_axis_does_not(demo_urdf):
    cad = RobotModel(demo_urdf, friction=FrictionOptions(False, False, False, False))   # RNEA data: no friction
    phi = tool()
    truth = add_payload_link(cad.urdf_xml, "tool0", phi, "tool")
    arm = arm_from_urdf(cad)
    pm = PayloadModel(cad, "tool0")
    q, qd, qdd, tau = _pinocchio_data(truth, ["wrist_1", "wrist_2", "wrist_3"])
    mask = np.abs(qd) > 0.05
    est = identify_payload(cad, pm, q, qd, qdd, tau, mask, arm.predict_from_regressor, nuisance_symbols=())
    assert est.joints_used == ["wrist_1", "wrist_2", "wrist_3"]
    assert est.determined.all() and est.well_determined.all()
    assert abs(est.mass - 2.0) < 0.02
    assert np.linalg.norm(est.com - phi[1:4] / phi[0]) < 2e-3
    # Only wrist_3 turns: its torque sees the payload's moments about its own axis only.
    q, qd, qdd, tau = _pinocchio_data(truth, ["wrist_3"])
    est1 = identify_payload(cad, pm, q, qd, qdd, tau, np.abs(qd) > 0.05, arm.predict_from_regressor,
                            nuisance_symbols=())
    assert est1.joints_used == ["wrist_3"]
    assert not est1.determined[0], "the mass cannot be determined by one wrist axis"
    d = est1.to_dict()
    assert "m" in d["not_determined"] and d["rank"] < 10
    assert any("does not determine" in n for n in d["notes"])


def test_payload_config_errors(demo_urdf):
    cad = RobotModel(demo_urdf)
    with pytest.raises(ConfigError, match=r"payload.mass: unknown key"):
        payload_config({"mass": 2.0}, cad)
    with pytest.raises(ConfigError, match="'flange' is not a link"):
        payload_config({"frame": "flange"}, cad)
    with pytest.raises(ConfigError, match="payload.pose.elbow: expected a number"):
        payload_config({"pose": {"elbow": "x"}}, cad)
    with pytest.raises(ModelError, match="not moved by any identified joint"):
        PayloadModel(RobotModel(demo_urdf), "base_link")
    assert payload_config({}, cad).excited(cad) == ["wrist_1", "wrist_2", "wrist_3"]


@pytest.fixture(scope="module")
def payload_bag(tmp_path_factory, demo_urdf):
    """design --payload, then a 10 s simulated (MuJoCo) bag of the demo arm with a 2 kg
    tool on tool0 (the tool is a link of the truth URDF)."""
    d = tmp_path_factory.mktemp("payload")
    truth = d / "truth.urdf"
    truth.write_text(add_payload_link(Path(demo_urdf).read_text(), "tool0", tool(), "tool"))
    assert run_cli("design", "--payload", "--urdf", demo_urdf, "--config", CONFIG, "--output", d / "traj.yaml",
                   "--max-evals", 400, "--time-limit", 20) == 0
    assert run_cli("simulate", "--urdf", truth, "--config", CONFIG, "--trajectory", d / "traj.yaml", "--output",
                   d / "bag", "--quiet") == 0
    return d


def check_payload_folder(folder, demo_urdf, arm_urdf=None):
    phi = tool()
    d = yaml.safe_load((folder / "payload.yaml").read_text())
    p = d["payload"]
    assert abs(p["mass"] - 2.0) / 2.0 < 0.01
    assert np.linalg.norm(np.array(p["com"]) - phi[1:4] / phi[0]) < 2e-3
    assert len(p["determined"]) == 10
    for j, v in d["holdout_rms"].items():
        assert v["with_payload"] < 0.2 * v["arm_only"], j
    ident = RobotModel(str(folder / "identified.urdf"))
    arm = RobotModel(str(arm_urdf or demo_urdf))
    sl = arm.layout.inertial_slice("wrist_3")
    np.testing.assert_allclose(ident.nominal[sl][0], arm.nominal[sl][0] + p["mass"], rtol=1e-9)
    return d


def test_design_simulate_identify_payload_through_the_cli(payload_bag, demo_urdf, capsys):
    """Arm known from the URDF: mass within 1 %, centre of mass within 2 mm, from 10 s of
    wrist motion; identified.urdf carries the payload."""
    tf = load_trajectory(payload_bag / "traj.yaml")
    assert tf.trajectory.joint_names == RobotModel(demo_urdf).joint_names
    qs = tf.trajectory.sample(np.linspace(0, tf.trajectory.duration, 200))[0]
    assert np.ptp(qs[:, :3], axis=0).max() == 0.0 and np.ptp(qs[:, 3:], axis=0).min() > 0.1
    assert tf.criterion["payload"]["excited_joints"] == ["wrist_1", "wrist_2", "wrist_3"]
    capsys.readouterr()
    assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--urdf", demo_urdf, "--config", CONFIG,
                   "--output", payload_bag / "pay", "--quiet") == 0
    assert "payload on tool0: mass" in capsys.readouterr().out
    d = check_payload_folder(payload_bag / "pay", demo_urdf)
    assert d["nuisance_symbols"] == ["Ia", "Fc", "Fv", "off"]        # the URDF knows no drive parameters
    # written as a whole: run again into the same folder (replaced), never into someone else's folder
    assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--urdf", demo_urdf, "--config", CONFIG,
                   "--output", payload_bag / "pay", "--quiet") == 0
    assert sorted(p.name for p in (payload_bag / "pay").iterdir() if not p.name.startswith(".")) == \
        ["identified.urdf", "payload.yaml"]
    other = payload_bag / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    capsys.readouterr()
    assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--urdf", demo_urdf, "--config", CONFIG,
                   "--output", other, "--quiet") == 2
    assert "not a robot_ident payload folder" in capsys.readouterr().err and (other / "mine.txt").is_file()


def test_node_payload_service_equals_the_command_line(payload_bag, demo_urdf, tmp_path):
    from robot_ident.io.config import load_config
    from robot_ident.online.recording_window import RecordingWindow
    from robot_ident.online.payload_window import identify_payload_streams
    from test_identification_window import bag_messages, feed

    cfg = load_config(CONFIG)
    win = RecordingWindow.from_config(cfg)
    win.start()
    feed(win, cfg, bag_messages(payload_bag / "bag"))
    rec = win.stop()[2]
    o = identify_payload_streams(rec.states, rec.currents, cfg, demo_urdf, tmp_path / "node")
    if not (payload_bag / "pay").is_dir():
        assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--urdf", demo_urdf, "--config",
                       CONFIG, "--output", payload_bag / "pay", "--quiet") == 0
    cli = yaml.safe_load((payload_bag / "pay" / "payload.yaml").read_text())["payload"]
    np.testing.assert_allclose(o.estimate.values, [p["value"] for p in cli["parameters"]], rtol=1e-9, atol=1e-12)
    assert o.identified_urdf == (tmp_path / "node" / "identified.urdf").read_text()


def test_payload_with_the_arm_from_a_previous_result(payload_bag, demo_urdf, tmp_path):
    """The arm identified first (no tool, 6 joints, WLS), then the payload with that result
    as the known arm: the result's identification errors are the arm's model errors."""
    from robot_ident.excitation import FourierTrajectory
    from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory

    m = RobotModel(demo_urdf)
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=3)
    save_trajectory(tmp_path / "arm.yaml", TrajectoryFile(traj))
    assert run_cli("simulate", "--urdf", demo_urdf, "--config", CONFIG, "--trajectory", tmp_path / "arm.yaml",
                   "--output", tmp_path / "arm_bag", "--repetitions", 2, "--quiet") == 0
    assert run_cli("identify", "--bag", tmp_path / "arm_bag", "--urdf", demo_urdf, "--config", CONFIG,
                   "--output", tmp_path / "arm", "--method", "wls", "--no-plots", "--quiet") == 0
    assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--result", tmp_path / "arm",
                   "--config", CONFIG, "--output", tmp_path / "pay", "--quiet") == 0
    d = check_payload_folder(tmp_path / "pay", demo_urdf, tmp_path / "arm" / "model.urdf")
    assert d["nuisance_symbols"] == ["off"] and d["arm_model"].startswith("result ")


def test_identify_payload_needs_an_arm_model(tmp_path, capsys):
    assert run_cli("identify", "--payload", "--bag", tmp_path, "--config", CONFIG, "--output", tmp_path / "o") == 2
    assert "needs the arm's model" in capsys.readouterr().err


def test_identify_payload_bad_frame_exits_2(payload_bag, demo_urdf, capsys):
    assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--urdf", demo_urdf, "--config", CONFIG,
                   "--frame", "flange", "--output", payload_bag / "bad", "--quiet") == 2
    err = capsys.readouterr().err
    assert "payload frame 'flange' is not a link" in err and len(err.strip().splitlines()) == 1
    assert not (payload_bag / "bad" / "payload.yaml").exists()


def _payload_config(tmp_path, **actuator_changes):
    """The payload config with some actuators' entries changed (joint -> {key: value})."""
    doc = yaml.safe_load(CONFIG.read_text())
    acts = doc["robot_ident"]["ros__parameters"]["actuators"]
    for joint, change in actuator_changes.items():
        acts[joint].update(change)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize("changes, words", [
    ({j: {"torque_constant": 125.0 if j in ("shoulder_pan", "shoulder_lift", "elbow") else 90.0}
      for j in ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3")}, "limit"),
    ({"wrist_1": {"direction": -1}}, "runs against the CAD model"),
])
def test_payload_identification_runs_the_input_checks(payload_bag, demo_urdf, tmp_path, capsys, changes, words):
    """The recording's input checks run before a payload is identified (issue 31): every
    torque constant x1000 (efforts far beyond the limits) or a flipped wrist direction is
    refused naming the cause, nothing is written; --force identifies and records the
    forced warnings. The clean recording gives no warning (the tool the URDF lacks is a note)."""
    cfg = _payload_config(tmp_path, **changes)
    out = tmp_path / "pay"
    assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--urdf", demo_urdf, "--config", cfg,
                   "--output", out, "--quiet") == 2
    err = capsys.readouterr().err
    assert words in err, err
    assert not out.exists()
    assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--urdf", demo_urdf, "--config", cfg,
                   "--output", out, "--quiet", "--force") == 0
    checks = yaml.safe_load((out / "payload.yaml").read_text())["input_checks"]
    assert checks["forced"] and any(words in w for w in checks["warnings"]), checks


def test_a_clean_payload_recording_gives_no_warning(payload_bag, demo_urdf, tmp_path, capsys):
    out = tmp_path / "pay"
    assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--urdf", demo_urdf, "--config", CONFIG,
                   "--output", out, "--quiet") == 0
    err = capsys.readouterr().err
    assert "warning:" not in err, err
    checks = yaml.safe_load((out / "payload.yaml").read_text())["input_checks"]
    assert not checks["forced"] and not [w for w in checks["warnings"] if w.startswith("warning:")], checks


@pytest.mark.parametrize("joint, factor", [("wrist_3", 2.0), ("wrist_1", 2.0), ("wrist_1", 1.3)])
def test_a_wrong_wrist_gain_is_not_absorbed_into_the_payload(payload_bag, demo_urdf, tmp_path, capsys, joint,
                                                             factor):
    """One wrist torque constant off (issue 31: x2 gave 4.992 +- 0.0005 kg for the 2 kg tool,
    every parameter 'well determined'): the joints disagree about the payload they share,
    and the payload is marked not trustworthy by joint."""
    doc = yaml.safe_load(CONFIG.read_text())
    kt = doc["robot_ident"]["ros__parameters"]["actuators"][joint]["torque_constant"]
    cfg = _payload_config(tmp_path, **{joint: {"torque_constant": factor * kt}})
    out = tmp_path / "pay"
    assert run_cli("identify", "--payload", "--bag", payload_bag / "bag", "--urdf", demo_urdf, "--config", cfg,
                   "--output", out, "--quiet", "--force") == 0
    io = capsys.readouterr()
    assert "misses structure" in io.err and "payload is NOT trustworthy" in io.err, io.err
    assert "payload NOT trustworthy" in io.out
    found = yaml.safe_load((out / "payload.yaml").read_text())["payload"]["misses_structure"]
    assert found, "nothing found"

"""Closed chains through the product (issue 15): the config's `closures:` key, source A's
hybrid robot from rosbag2 recordings of its actuated joints (positions, motor currents
through screw drives) through `identify`, `validate` and `report`, `simulate` and `design`
on a closed chain, and the passive joints' limit check by the closure solver."""
import contextlib
import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_ident.cli import main
from robot_ident.errors import ConfigError
from robot_ident.estimation.pipeline import identification_config
from robot_ident.io.model_loading import load_model
from robot_ident.io.config import load_config
from robot_ident.mechanisms.closed_chain import ClosedChainModel
from robot_ident.mechanisms.closed_chain.config import passive_limit_violations

ROOT = Path(__file__).resolve().parent.parent
URDF = ROOT / "urdf" / "hybrid5.urdf"
CONFIG = ROOT / "config" / "hybrid5.yaml"


def run_cli(*args):
    return main([str(a) for a in args])


def _model(config=CONFIG):
    cfg = load_config(config)
    return load_model(URDF, cfg, identification_config(cfg.section("identification")))


def test_config_names_the_closures(tmp_path):
    m = _model()
    assert isinstance(m, ClosedChainModel)
    assert m.joint_names == ("limb1_slide", "limb2_slide", "limb3_slide", "head_a", "head_c")
    assert m.friction.coulomb_velocity_scale == 0.001 and m.tie_groups
    doc = yaml.safe_load(CONFIG.read_text())
    p = doc["robot_ident"]["ros__parameters"]
    p["closures"] = str((ROOT / "urdf" / "hybrid5_closures.yaml").resolve())
    p["joints"] = ["limb1_slide", "limb2_slide", "head_a", "head_c"]
    del p["actuators"]["limb3_slide"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="must be the actuated joints"):
        _model(bad)
    p["closures"] = "nowhere.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="closures: file 'nowhere.yaml' not found"):
        _model(bad)


def test_passive_limits_come_from_the_closure_solver():
    from robot_ident.demos.hybrid import HybridDemoSetup, random_chain
    from robot_ident.excitation.constraints import LimitSpec, Margins

    m = _model()
    limits = LimitSpec(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                       np.asarray(HybridDemoSetup().acceleration_limits, float), margins=Margins(position=0.004))
    tr = random_chain(m, 1, 6.0, m.home_actuated(), limits.bounds(), 3)
    assert passive_limit_violations(m, tr, dt=0.05) == []
    # The support slide's range narrowed around its home value: the same motion now violates it.
    k = m.tree.joint_names.index("support_slide")
    lo, hi = m.tree.limits.lower.copy(), m.tree.limits.upper.copy()
    lo[k], hi[k] = 0.949, 0.951
    m.tree.limits = dataclasses.replace(m.tree.limits, lower=lo, upper=hi)
    bad = passive_limit_violations(m, tr, dt=0.05)
    assert [b["joint"] for b in bad] == ["support_slide"] and bad[0]["excess"] > 0


@pytest.fixture(scope="module")
def hybrid_bags(tmp_path_factory):
    """An 18 s identification bag and a 6 s validation bag of the simulated hybrid robot
    (MuJoCo closed-chain truth: CAD perturbed by up to 8 %, a 3.5 kg tool, drive friction)."""
    from robot_ident.demos.hybrid import HybridDemoSetup, load_hybrid, random_chain, true_parameters
    from robot_ident.excitation.constraints import LimitSpec, Margins
    from robot_ident.offline.closed_chain_workflow import simulate_closed_chain_bag
    from robot_ident.sim.mujoco_arm import SimNoise

    d = tmp_path_factory.mktemp("hybrid")
    setup = HybridDemoSetup(seed=7)
    model, _ = load_hybrid(setup)
    truth = true_parameters(model, setup)
    limits = LimitSpec(model.joint_names, model.limits.lower, model.limits.upper, model.limits.velocity,
                       np.asarray(setup.acceleration_limits, float),
                       margins=Margins(position=0.004, velocity=0.05, acceleration=0.05))
    runs = {}
    for name, segs, seed in (("ident", 3, 7), ("valid", 1, 1007)):
        tr = random_chain(model, segs, 6.0, model.home_actuated(), limits.bounds(), seed)
        runs[name] = simulate_closed_chain_bag(URDF, CONFIG, tr, d / name, truth=truth,
                                               noise=SimNoise(2e-6, 2e-4, 0.01, seed=seed))
    return d, runs


def test_hybrid_from_bags_through_identify_validate_report(hybrid_bags, capsys):
    d, runs = hybrid_bags
    assert runs["ident"].max_violation < 1e-6
    assert run_cli("identify", "--bag", d / "ident", "--urdf", URDF, "--config", CONFIG, "--output", d / "res",
                   "--no-plots", "--quiet") == 0
    res = yaml.safe_load((d / "res" / "result.yaml").read_text())
    assert res["robot"]["joints"] == list(_model().joint_names) and res["source"]["closures"].endswith(
        "hybrid5_closures.yaml")
    assert any(p["name"].startswith("limb_rod.") for p in res["base_parameters"])     # tied limbs
    capsys.readouterr()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run_cli("validate", "--bag", d / "valid", "--result", d / "res", "--quiet") == 0
    v = yaml.safe_load((d / "res" / "validation.yaml").read_text())["joints"]
    noise = runs["valid"].effort_noise_std
    for k, j in enumerate(_model().joint_names):
        assert v[j]["rms"] / noise[k] < 1.3, (j, v[j]["rms"] / noise[k])
    assert run_cli("report", "--result", d / "res") == 0
    assert (d / "res" / "report.html").is_file()


def test_simulate_and_design_on_the_closed_chain(tmp_path):
    from robot_ident.excitation.families import PolynomialTrajectory
    from robot_ident.excitation.trajectory_file import TrajectoryFile, load_trajectory, save_trajectory

    m = _model()
    c = np.array([[0.8, -0.4], [-0.6, 0.3], [0.7, 0.2], [5.0, 3.0], [-6.0, 4.0]])
    tr = PolynomialTrajectory(m.joint_names, 2.0, m.home_actuated(), c)
    save_trajectory(tmp_path / "t.yaml", TrajectoryFile(tr))
    assert run_cli("simulate", "--urdf", URDF, "--config", CONFIG, "--trajectory", tmp_path / "t.yaml", "--output",
                   tmp_path / "bag", "--quiet") == 0
    truth = yaml.safe_load((tmp_path / "bag" / "robot_ident_truth.yaml").read_text())
    assert truth["max_closure_violation_m"] < 1e-6 and truth["joints"] == list(m.joint_names)
    meta = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == 8                         # Humble's default, as for a serial arm
    assert run_cli("simulate", "--urdf", URDF, "--config", CONFIG, "--trajectory", tmp_path / "t.yaml", "--output",
                   tmp_path / "bag9", "--bag-version", 9, "--quiet") == 0
    meta = yaml.safe_load((tmp_path / "bag9" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == 9
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []     # no staging left behind
    assert run_cli("design", "--urdf", URDF, "--config", CONFIG, "--output", tmp_path / "d.yaml", "--family",
                   "polynomial7", "--optimizer", "ga", "--max-evals", 30, "--time-limit", 60) == 0
    d = load_trajectory(tmp_path / "d.yaml")
    assert d.trajectory.joint_names == m.joint_names and d.criterion["base_parameters"] == 61
    assert passive_limit_violations(m, d.trajectory, 0.05) == []


def test_nodes_logic_takes_the_closed_chain(hybrid_bags, tmp_path):
    """The identification node's path (recorded streams) gives the command line's result, and
    the excitation node's plan is on the actuated joints of the closed chain."""
    from robot_ident.excitation.families import PolynomialTrajectory
    from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory
    from robot_ident.online.excitation_plan import prepare_excitation
    from robot_ident.online.identification_window import identify_streams
    from robot_ident.online.recording_window import RecordingWindow
    from test_identification_window import bag_messages, feed

    d, _ = hybrid_bags
    cfg = load_config(CONFIG)
    win = RecordingWindow.from_config(cfg)
    win.start()
    feed(win, cfg, bag_messages(d / "ident"))
    rec = win.stop()[2]
    node = identify_streams(rec.states, rec.currents, cfg, URDF, tmp_path / "node", CONFIG)
    if not (d / "res").is_dir():
        assert run_cli("identify", "--bag", d / "ident", "--urdf", URDF, "--config", CONFIG, "--output", d / "res",
                       "--no-plots", "--quiet") == 0
    cli = yaml.safe_load((d / "res" / "result.yaml").read_text())
    np.testing.assert_allclose(node.result.values, [p["value"] for p in cli["base_parameters"]], rtol=1e-9)
    assert yaml.safe_load((tmp_path / "node" / "result.yaml").read_text())["source"]["closures"] == \
        cli["source"]["closures"]
    m = _model()
    tr = PolynomialTrajectory(m.joint_names, 3.0, m.home_actuated(), np.array([[0.5, 0.0]] * 3 + [[4.0, 0.0]] * 2))
    save_trajectory(tmp_path / "t.yaml", TrajectoryFile(tr))
    with pytest.raises(ConfigError, match="collisions of a closed chain cannot be checked"):
        prepare_excitation(URDF, CONFIG, tmp_path / "t.yaml")     # no collision check: refused by default
    plan = prepare_excitation(URDF, CONFIG, tmp_path / "t.yaml", allow_without_collision_model=True)
    assert isinstance(plan.model, ClosedChainModel) and plan.limits.joint_names == m.joint_names


def test_identified_urdf_of_a_closed_chain_expands_tied_limbs(tmp_path):
    """A physically consistent result of the hybrid writes the spanning tree's URDF with the
    tied block on every limb (Pinocchio reads back the same parameters)."""
    from types import SimpleNamespace

    from robot_ident.io.results import write_identified_urdf
    from robot_ident.model.robot import RobotModel

    m = _model()
    theta = m.nominal.copy()
    sl = m.layout.inertial_slice("limb_rod")
    theta[sl] = theta[sl] * 1.1                        # scaled mass, first moments and inertia: still physical
    p = write_identified_urdf(tmp_path, m, SimpleNamespace(standard_values=theta, method="physical"))
    back = RobotModel(str(p))
    full = m.full_inertial(theta)
    for j in ("limb1_slide", "limb2_slide", "limb3_slide"):
        k = m.tree.layout.body_joints.index(j)
        np.testing.assert_allclose(back.nominal[back.layout.inertial_slice(j)], full[10 * k:10 * k + 10], atol=1e-8)

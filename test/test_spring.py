"""Gravity-balancer springs (issue 15): the spring torque columns against MuJoCo's own
tendon spring and finite differences, the stiffness design against a brute-force
search, the config section, and K / F0 recovered from a simulated bag of the palletiser."""
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from robot_ident.errors import ConfigError, ModelError
from robot_ident.mechanisms.balancer import design_balancer
from robot_ident.model.spring import SpringRobotModel, SpringSpec, spring_specs
from robot_ident.sim.balancer import spring_hook, true_free_length
from robot_ident.sim.mujoco_arm import JointTruth, SimulatedArm

ROOT = Path(__file__).resolve().parent.parent
URDF = ROOT / "urdf" / "palletiser.urdf"
SPEC = SpringSpec("balancer", "turret_link", (0.25, 0.0, 1.1), "upper_arm", (0.0, 0.0, 0.4), 6000.0,
                  free_length=0.05)


@pytest.fixture(scope="module")
def model():
    return SpringRobotModel(URDF, springs=[SPEC])


def test_layout_and_nominal(model):
    assert model.layout.names[-2:] == ("balancer.K", "balancer.F0")
    # L_ref = length at q = 0: 0.5 m above the shoulder axis vs 0.4 m along the upright arm
    assert model.springs.reference_lengths[0] == pytest.approx(0.1)
    assert model.nominal[-2:] == pytest.approx([6000.0, 6000.0 * (0.1 - 0.05)])


def test_spring_torques_equal_mujocos_tendon_spring(model):
    """MuJoCo computes the tendon's spring force itself (qfrc_passive): the actuators must
    supply the opposite, which is what our columns give."""
    K, L0 = 6000.0, true_free_length(model.springs, model.springs.nominal)
    assert L0 == pytest.approx([0.05])
    arm = SimulatedArm(str(URDF), model.joint_names, JointTruth.zeros(4), spec_hook=spring_hook(model.springs, [K], L0))
    m, d = arm.mj_model, arm.mj_data
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = rng.uniform(model.limits.lower, model.limits.upper)
        d.qpos[arm._qadr] = q
        d.qvel[:] = 0.0
        mujoco.mj_forward(m, d)
        ours = model.springs.torques(q[None])[0]
        np.testing.assert_allclose(-d.qfrc_passive[arm._dadr], ours, atol=1e-8 * max(1.0, np.abs(ours).max()))
        assert d.ten_length[0] == pytest.approx(model.springs.lengths(q[None])[0, 0], abs=1e-12)
    assert np.abs(ours[1]) > 10.0            # the check is not vacuous: the shoulder sees the spring


def test_length_gradient_matches_finite_differences(model):
    rng = np.random.default_rng(2)
    q = rng.uniform(-0.8, 0.8, (1, 4))
    g = model.springs.columns(q)[0, :, 1]
    h = 1e-6
    for k in range(4):
        dq = np.zeros((1, 4))
        dq[0, k] = h
        fd = (model.springs.lengths(q + dq) - model.springs.lengths(q - dq))[0, 0] / (2 * h)
        assert g[k] == pytest.approx(fd, abs=1e-7)


def test_stiffness_design_is_the_brute_force_optimum(model):
    from robot_ident.demos.palletiser import pick_and_place_cycle

    cyc = pick_and_place_cycle()
    t = np.arange(0.0, cyc.duration, 0.01)
    q, qd, qdd = cyc.sample(t)
    d = design_balancer(model, model.nominal, t, q, qd, qdd, "balancer", "shoulder")
    assert d.free_length == pytest.approx(0.05)
    np.testing.assert_allclose(d.tau_before, model.efforts(q, qd, qdd)[:, 1])
    Y = model.regressor(q, qd, qdd).reshape(len(t), 4, -1)[:, 1]     # shoulder rows, once
    grid = np.linspace(0.0, 20000.0, 4001)
    peaks, ripples = [], []
    for K in grid:
        theta = model.nominal.copy()
        theta[-2:] = (K, K * (0.1 - 0.05))
        tau = Y @ theta
        peaks.append(np.abs(tau).max())
        ripples.append(np.ptp(tau))
    assert d.peak_after == pytest.approx(min(peaks), rel=1e-3)
    assert d.stiffness_peak == pytest.approx(grid[int(np.argmin(peaks))], abs=10.0)
    assert d.ripple_after == pytest.approx(min(ripples), rel=1e-3)
    assert d.peak_after < d.peak_before
    with pytest.raises(ModelError, match="no spring named 'x'"):
        design_balancer(model, model.nominal, t, q, qd, qdd, "x", "shoulder")


def test_spring_config_errors():
    ok = {"link_a": "a", "point_a": [0, 0, 1], "link_b": "b", "point_b": [0, 0, 0.4], "stiffness": 100.0}
    assert spring_specs({"s": ok})[0].stiffness == 100.0
    with pytest.raises(ConfigError, match=r"springs.s.point_a: expected three numbers"):
        spring_specs({"s": {**ok, "point_a": [0, 1]}})
    with pytest.raises(ConfigError, match="free_length or preload, not both"):
        spring_specs({"s": {**ok, "free_length": 0.1, "preload": 5.0}})
    with pytest.raises(ConfigError, match=r"springs.s.damping: unknown key"):
        spring_specs({"s": {**ok, "damping": 1.0}})
    with pytest.raises(ModelError, match="'nope' is not a link"):
        SpringRobotModel(URDF, springs=[SpringSpec("s", "nope", (0, 0, 0), "upper_arm", (0, 0, 0))])
    with pytest.raises(ModelError, match="move together"):
        SpringRobotModel(URDF, springs=[SpringSpec("s", "upper_arm", (0, 0, 0), "upper_arm", (0, 0, 1))])


def test_palletiser_spring_identified_from_a_simulated_bag(tmp_path):
    """One 10 s period of the designed excitation (MuJoCo, tendon spring K = 6000 N/m while
    the CAD says 5000): K within 2 %, and ignoring the spring is clearly worse on the
    shoulder in validation."""
    from robot_ident.demos.palletiser import PalletiserSetup, run_palletiser_demo

    o = run_palletiser_demo(tmp_path, PalletiserSetup(periods=1))
    K, sK = o.identified["balancer.K"]
    assert abs(K - 6000.0) / 6000.0 < 0.02 and sK > 0
    F0, _ = o.identified["balancer.F0"]
    assert abs(F0 - o.true_F0) / o.true_F0 < 0.05
    assert o.validation_with["shoulder"] < 1.3 * o.noise["shoulder"]
    assert o.validation_without["shoulder"] > 3.0 * o.validation_with["shoulder"]
    assert (tmp_path / "with_spring" / "result.yaml").is_file()
    # the model without the spring misses structure the data show, and says so; with it, nothing
    quality = {k: yaml.safe_load((tmp_path / k / "result.yaml").read_text())["model_quality"]
               for k in ("with_spring", "without_spring")}
    assert quality["with_spring"]["good"] and "misses_structure" not in quality["with_spring"]
    # and identify's gain check allows for the spring the CAD lacks (it said shoulder 0.414 x the CAD's)
    import contextlib
    import io

    from robot_ident.cli import main as cli_main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli_main(["identify", "--bag", str(tmp_path / "ident_bag"), "--urdf", str(URDF), "--config",
                         str(ROOT / "config" / "palletiser.yaml"), "--output", str(tmp_path / "again"), "--quiet",
                         "--no-plots"]) == 0
    assert "x the CAD model's" not in err.getvalue(), err.getvalue()
    assert not quality["without_spring"]["good"]
    assert quality["without_spring"]["misses_structure"]     # the joints whose fit the missing spring distorts
    assert o.design.peak_after < o.design.peak_before
    # `robot-ident validate` rebuilds the spring model from the result folder's config

    from robot_ident.cli import main
    assert main(["validate", "--bag", str(tmp_path / "valid_bag"), "--result", str(tmp_path / "with_spring"),
                 "--quiet"]) == 0
    v = yaml.safe_load((tmp_path / "with_spring" / "validation.yaml").read_text())["joints"]
    assert v["shoulder"]["rms"] == pytest.approx(o.validation_with["shoulder"], rel=0.05)


def test_simulate_command_puts_the_configs_spring_into_mujoco(tmp_path):
    """`robot-ident simulate` with a `springs:` config: the spring acts in MuJoCo (the
    efforts of a held pose differ from a spring-free run by the spring torque) and its
    K / F0 are in the truth file."""

    from robot_ident.cli import main
    from robot_ident.excitation.families import PolynomialTrajectory
    from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory

    cfg = ROOT / "config" / "palletiser.yaml"
    doc = yaml.safe_load(cfg.read_text())
    p = doc["robot_ident"]["ros__parameters"]
    p["simulation"].update({"effort_noise": 0.0, "joints": {}})
    for k in ("current_noise",):
        p["simulation"].pop(k, None)
    with_spring = tmp_path / "with.yaml"
    with_spring.write_text(yaml.safe_dump(doc))
    p.pop("springs")
    without = tmp_path / "without.yaml"
    without.write_text(yaml.safe_dump(doc))
    tr = PolynomialTrajectory(("turret", "shoulder", "elbow", "wrist"), 1.0, np.array([0.0, 0.6, 0.2, 0.0]),
                              np.zeros((4, 2)))
    save_trajectory(tmp_path / "hold.yaml", TrajectoryFile(tr))
    for name, c in (("a", with_spring), ("b", without)):
        assert main(["simulate", "--urdf", str(URDF), "--config", str(c), "--trajectory", str(tmp_path / "hold.yaml"),
                     "--output", str(tmp_path / name), "--quiet"]) == 0
    truth = yaml.safe_load((tmp_path / "a" / "robot_ident_truth.yaml").read_text())["parameters"]
    assert truth["balancer.K"] == 5000.0 and truth["balancer.F0"] == pytest.approx(5000.0 * 0.05)
    from robot_ident.data.bag import read_recordings_from_config
    from robot_ident.io.config import load_config
    eff = {}
    for name, c in (("a", with_spring), ("b", without)):
        seg = read_recordings_from_config(tmp_path / name, load_config(c)).segments[0]
        eff[name] = np.median(seg.reorder(("turret", "shoulder", "elbow", "wrist")).effort[200:], axis=0)
    m = SpringRobotModel(URDF, springs=[SpringSpec("balancer", "turret_link", (0.25, 0.0, 1.1), "upper_arm",
                                                   (0.0, 0.0, 0.4), 5000.0, free_length=0.05)])
    spring_tau = m.springs.torques(np.array([[0.0, 0.6, 0.2, 0.0]]))[0]
    assert abs(spring_tau[1]) > 100.0
    np.testing.assert_allclose(eff["a"][1] - eff["b"][1], spring_tau[1], rtol=0.01)

"""Coupled transmissions: motor-side armature and friction through a coupling matrix,
judged against MuJoCo (each motor a `fixed` tendon with its own armature, damping and
frictionloss)."""
import mujoco
import numpy as np
import pytest

from conftest import random_states
from robot_ident.data.signals import FilterOptions, Recording, process
from robot_ident.demos.serial_arm import DemoSetup, true_arm_parameters
from robot_ident.errors import ConfigError
from robot_ident.estimation.pipeline import IdentificationSettings, identify, validate_result
from robot_ident.excitation import FourierTrajectory
from robot_ident.io.config import config_from_parameters
from robot_ident.io.urdf_export import write_parameters
from robot_ident.model.actuation import Actuator, ActuatorSet
from robot_ident.model.robot import RobotModel
from robot_ident.model.transmission import CoupledGroup, Drive, Transmission
from robot_ident.online.torque_stream import EffortConverter
from robot_ident.sim import JointTruth, SimNoise, SimulatedArm

# A three-joint wrist: motor 5 turns when joint 4 turns, motor 6 follows joints 4 and 5.
WRIST_M = np.array([[1.0, 0.0, 0.0], [-1.0, 1.0, 0.0], [0.5, -1.0, 1.0]])


def wrist(joints):
    return Transmission(joints, [CoupledGroup("wrist", tuple(joints[3:]), ("m4", "m5", "m6"), WRIST_M)])


# ----------------------------------------------------------------- the maps
def test_power_balance_and_inverse():
    tr = wrist([f"j{i}" for i in range(1, 7)])
    rng = np.random.default_rng(0)
    qd, tau_m = rng.normal(size=(5, 6)), rng.normal(size=(5, 6))
    tau_j = tr.joint_efforts(tau_m)
    # motor power equals joint power, sample by sample
    np.testing.assert_allclose(np.sum(tau_m * tr.motor_velocities(qd), 1), np.sum(tau_j * qd, 1), atol=1e-12)
    np.testing.assert_allclose(tr.motor_torques(tau_j), tau_m, atol=1e-12)
    np.testing.assert_allclose(tr.joint_velocities(tr.motor_velocities(qd)), qd, atol=1e-12)
    assert tr.motors == ("j1", "j2", "j3", "m4", "m5", "m6")


def test_joint_from_motor_is_the_inverse_and_errors_name_the_group():
    C = np.linalg.inv(WRIST_M)
    g = CoupledGroup.from_dict("w", {"joints": ["a", "b", "c"], "joint_from_motor": C.tolist()})
    np.testing.assert_allclose(g.motor_from_joint, WRIST_M, atol=1e-12)
    assert g.motors == ("w_m1", "w_m2", "w_m3")
    flat = CoupledGroup.from_dict("w", {"joints": ["a", "b", "c"], "motor_from_joint": WRIST_M.ravel().tolist()})
    np.testing.assert_allclose(flat.motor_from_joint, WRIST_M)
    with pytest.raises(ConfigError, match="transmission 'w'.*singular"):
        CoupledGroup.from_dict("w", {"joints": ["a", "b"], "motor_from_joint": [[1, 1], [1, 1]]})
    with pytest.raises(ConfigError, match="exactly one"):
        CoupledGroup.from_dict("w", {"joints": ["a", "b"]})
    with pytest.raises(ConfigError, match="2x2"):
        CoupledGroup.from_dict("w", {"joints": ["a", "b"], "motor_from_joint": [[1, 0, 0], [0, 1, 0]]})
    with pytest.raises(ConfigError, match="'x' is not identified"):
        Transmission(["a", "b"], [CoupledGroup("w", ("a", "x"), ("m1", "m2"), np.eye(2))])
    with pytest.raises(ConfigError, match="identified as a whole"):
        Transmission(["a", "b", "c"], [CoupledGroup("w", ("b", "c"), ("m1", "m2"), np.eye(2))]).for_joints(["a", "b"])


def test_config_transmissions_and_currents_to_efforts():
    params = {
        "joints": ["j1", "j2", "j3"],
        "current_source": "joint_states_effort",
        "actuators": {j: {"type": "rotary", "torque_constant": 0.1, "gear_ratio": 50.0 + 10 * k,
                          "current_offset": 0.01 * k} for k, j in enumerate(["j1", "j2", "j3"])},
        "transmissions": {"wrist": {"joints": ["j2", "j3"], "motors": ["m2", "m3"],
                                    "motor_from_joint": [[1.0, 0.0], [-1.0, 1.0]]}},
    }
    cfg = config_from_parameters(params, "cfg.yaml")
    assert cfg.transmission.motors == ("j1", "m2", "m3")
    cur = np.array([[1.0, 2.0, -0.5], [0.3, -1.0, 2.0]])
    # by hand: motor output torques, then tau_j = M^T tau_m on the wrist
    gains = np.array([0.1 * 50, 0.1 * 60, 0.1 * 70])
    tau_m = (cur - np.array([0.0, 0.01, 0.02])) * gains
    expect = tau_m.copy()
    expect[:, 1] = tau_m[:, 1] - tau_m[:, 2]
    expect[:, 2] = tau_m[:, 2]
    np.testing.assert_allclose(cfg.drive.efforts(cur), expect, atol=1e-12)
    np.testing.assert_allclose(cfg.drive.currents(expect), cur, atol=1e-12)
    # another column order is matched by name
    np.testing.assert_allclose(cfg.drive.efforts(cur[:, ::-1], ["j3", "j2", "j1"]), expect[:, ::-1], atol=1e-12)
    # the torque node's converter uses the same map
    conv = EffortConverter.from_config(cfg)

    class Msg:  # a JointState-like message
        class header:
            class stamp:
                sec, nanosec = 1, 0
        name = ["j3", "j1", "j2"]
        position = [0.0, 0.0, 0.0]
        velocity = []
        effort = [cur[0, 2], cur[0, 0], cur[0, 1]]
    sample = conv.on_joint_state(Msg)
    np.testing.assert_allclose(sample.effort, expect[0], atol=1e-12)
    # a recording is converted the same way
    rec = Recording(np.arange(2) * 0.01, ("j1", "j2", "j3"), np.zeros((2, 3)), cur)
    np.testing.assert_allclose(cfg.drive.apply(rec).effort, expect, atol=1e-12)
    # a bad matrix names the key
    params["transmissions"]["wrist"]["motor_from_joint"] = [[1.0, 1.0], [1.0, 1.0]]
    with pytest.raises(ConfigError, match=r"cfg.yaml: transmissions: transmission 'wrist'.*singular"):
        config_from_parameters(params, "cfg.yaml")


def test_coupled_layout_names_motors(demo_urdf):
    cad = RobotModel(demo_urdf)
    m = RobotModel(demo_urdf, transmission=wrist(cad.joint_names))
    assert m.layout.actuator_joints == cad.joint_names[:3] + ("m4", "m5", "m6")
    assert "m5.Fc" in m.layout.names and "wrist_2.Fc" not in m.layout.names
    # CAD friction of a coupled joint does not become motor friction
    assert m.nominal[m.layout.index("m5.Fc")] == 0.0


# ------------------------------------------------------- against MuJoCo
def test_mujoco_tendon_motors_match_the_coupled_regressor(demo_urdf):
    """Motor armature and damping as MuJoCo tendons: MuJoCo's inverse dynamics equals the
    coupled regressor times the true parameters (and not the per-joint model's)."""
    cad = RobotModel(demo_urdf)
    tr = wrist(cad.joint_names)
    model = RobotModel(demo_urdf, transmission=tr)
    truth = JointTruth(np.array([0.3, 0.3, 0.2, 0.05, 0.04, 0.03]), np.zeros(6),
                       np.array([1.0, 1.2, 0.8, 0.4, 0.3, 0.2]), np.zeros(6))
    arm = SimulatedArm(model.urdf_xml, model.joint_names, truth, transmission=tr)
    theta = arm.true_parameters(model)
    q, qd, qdd = random_states(model, 10, seed=5)
    m, d = arm.mj_model, arm.mj_data
    worst_coupled = worst_plain = 0.0
    plain = RobotModel(demo_urdf)
    theta_plain = SimulatedArm(model.urdf_xml, model.joint_names, truth).true_parameters(plain)
    for s in range(q.shape[0]):
        d.qpos[arm._qadr], d.qvel[arm._dadr], d.qacc[arm._dadr] = q[s], qd[s], qdd[s]
        mujoco.mj_inverse(m, d)
        tau = d.qfrc_inverse[arm._dadr]
        worst_coupled = max(worst_coupled, np.abs(tau - model.efforts(q[s], qd[s], qdd[s], theta)[0]).max())
        worst_plain = max(worst_plain, np.abs(tau - plain.efforts(q[s], qd[s], qdd[s], theta_plain)[0]).max())
    assert worst_coupled < 1e-8
    assert worst_plain > 0.05       # the per-joint model is not the same dynamics


@pytest.fixture(scope="module")
def coupled_runs(demo_urdf):
    setup = DemoSetup()
    cad = RobotModel(demo_urdf)
    tr = wrist(cad.joint_names)
    model = RobotModel(demo_urdf, transmission=tr)
    truth_urdf, _ = write_parameters(cad, true_arm_parameters(cad, setup))
    truth = JointTruth(np.array(setup.armature), np.array(setup.coulomb), np.array(setup.viscous),
                       np.array(setup.effort_offset))
    arm = SimulatedArm(truth_urdf, cad.joint_names, truth, nominal=model, transmission=tr)
    lim = cad.limits
    trajs = [FourierTrajectory.random_within_limits(
        cad.joint_names, lim.lower, lim.upper, lim.velocity, np.array(setup.acceleration_limits), wf=setup.base_frequency,
        harmonics=setup.harmonics, margin=setup.limit_margin, seed=setup.seed + k) for k in (1, 2)]
    # 3 % effort noise: with 1-2 % the filter's own error on the fast, lightly loaded
    # shoulder_pan (present with the true parameters too) is already 5-6 % of the noise.
    runs = [arm.run(trajs[0], 2 * trajs[0].period, SimNoise(effort_rel_std=0.03, seed=17)),
            arm.run(trajs[1], trajs[1].period, SimNoise(effort_rel_std=0.03, seed=27))]
    settings = IdentificationSettings(method="wls", filter=FilterOptions(cutoff_hz=20.0))
    data = [process(r.recording, settings.filter) for r in runs]
    return cad, model, arm, runs, data, settings


def test_coupled_wrist_identified_to_the_noise_floor(coupled_runs):
    cad, model, arm, runs, (ident, valid), settings = coupled_runs
    result = identify(model, ident, settings)
    v = validate_result(result, model, valid, settings, runs[1].effort_noise_std)
    assert np.all(v.noise_ratio <= 1.05), v.noise_ratio
    assert v.n_samples.min() > 0.6 * valid.n_samples
    # motor friction recovered where it is its own base parameter
    act = result.actuator_parameters()
    setup = DemoSetup()
    for k, motor in ((3, "m4"), (4, "m5"), (5, "m6")):
        assert act[motor]["Fc"]["value"] == pytest.approx(setup.coulomb[k], rel=0.1)
        assert act[motor]["Fv"]["value"] == pytest.approx(setup.viscous[k], rel=0.2)
    # The per-joint model on the same data cannot describe the wrist.
    plain = identify(cad, ident, settings)
    vp = validate_result(plain, cad, valid, settings, runs[1].effort_noise_std)
    assert vp.noise_ratio[3:].min() > 3.0, vp.noise_ratio
    # ... and says so: its wrist residual follows another wrist joint's effort (the coupling
    # the config lacks); the coupled model misses nothing
    assert result.quality["good"] and "misses_structure" not in result.quality
    assert not plain.quality["good"]
    found = plain.quality["misses_structure"]
    assert any(f["joint"] in cad.joint_names[3:] and f["probe"] in {f"effort of {j}" for j in cad.joint_names[3:]}
               for f in found), found


def test_bag_round_trip_converts_currents_through_the_coupling(tmp_path):
    """write_bag_from_config turns joint efforts into channel currents through M^-T and the
    actuators; reading it back gives the joint efforts again (the bag path uses the drive)."""
    from robot_ident.data.bag import read_recordings_from_config, write_bag_from_config
    joints = ["j1", "j2", "j3"]
    cfg = config_from_parameters({
        "joints": joints, "current_source": "dynamic_joint_states",
        "actuators": {j: {"type": "rotary", "torque_constant": 0.1, "gear_ratio": 100.0} for j in joints},
        "transmissions": {"w": {"joints": ["j2", "j3"], "motor_from_joint": [[1.0, 0.0], [-1.0, 1.0]]}},
    })
    t = np.arange(400) * 2e-3
    eff = np.column_stack([np.sin(3 * t), 2 * np.cos(2 * t), np.sin(5 * t)])
    rec = Recording(t, joints, np.column_stack([np.sin(t)] * 3), eff, qd=np.column_stack([np.cos(t)] * 3))
    write_bag_from_config(tmp_path / "bag", rec, cfg, joint_states_rate_hz=500.0)
    seg = read_recordings_from_config(tmp_path / "bag", cfg).segments[0].reorder(joints)
    np.testing.assert_allclose(seg.effort, eff[: seg.n_samples], atol=1e-6)
    # the channel values in the bag are not the joint efforts: motor 3 carries tau_3, motor 2 tau_2 + tau_3
    plain = config_from_parameters({"joints": joints, "current_source": "dynamic_joint_states",
                                    "actuators": {j: {"type": "rotary", "torque_constant": 0.1,
                                                      "gear_ratio": 100.0} for j in joints}})
    raw = read_recordings_from_config(tmp_path / "bag", plain).segments[0].reorder(joints)
    np.testing.assert_allclose(raw.effort[:, 1], (eff[:, 1] + eff[:, 2])[: raw.n_samples], atol=1e-6)


def test_excitation_design_state_jacobian_with_a_coupling(demo_urdf):
    """The excitation designer's exact Coulomb derivative follows the coupling: dY/dqd
    matches a central difference of the coupled regressor."""
    from robot_ident.excitation.evaluator import RegressorEvaluator
    from robot_ident.model.base import BaseParameters
    cad = RobotModel(demo_urdf)
    model = RobotModel(demo_urdf, transmission=wrist(cad.joint_names))
    ev = RegressorEvaluator(model, BaseParameters.from_model(model, n_samples=60))
    q, qd, qdd = random_states(model, 3, seed=2)
    qd[:, 3:] = np.array([0.02, 0.035, -0.01])       # motor velocities near the tanh knee
    Y, dY = ev.state_jacobians(q, qd, qdd)
    h = 1e-7
    for i in (3, 4, 5):
        e = np.zeros(model.n)
        e[i] = h
        num = (model.regressor(q, qd + e, qdd) - model.regressor(q, qd - e, qdd)).reshape(3, model.n, -1) / (2 * h)
        np.testing.assert_allclose(dY[:, model.n + i], num, atol=1e-4 * max(1.0, np.abs(num).max()))


def test_cli_simulate_identify_validate_with_a_coupled_wrist(tmp_path, demo_urdf):
    """The config's `transmissions` reach every step of the command line: `simulate` (MuJoCo
    tendon motors, currents through M^-T), `identify` (motor-side model, currents through M^T)
    and `validate`."""
    import subprocess
    import sys

    import yaml
    from conftest import ROOT
    from robot_ident.excitation.trajectory_file import TrajectoryFile, save_trajectory

    cad = RobotModel(demo_urdf)
    lim = cad.limits
    for k, name in ((13, "ident"), (16, "valid")):    # seeds whose random motion keeps clear of the floor and itself
        tr = FourierTrajectory.random_within_limits(cad.joint_names, lim.lower, lim.upper, lim.velocity,
                                                    np.array([6.0, 6, 8, 10, 10, 10]), wf=0.2 * np.pi,
                                                    harmonics=5, margin=0.1, seed=k)
        save_trajectory(tmp_path / f"{name}.yaml", TrajectoryFile(tr))
    doc = yaml.safe_load((ROOT / "config" / "demo_arm.yaml").read_text())
    p = next(iter(doc.values()))["ros__parameters"]
    p["transmissions"] = {"wrist": {"joints": ["wrist_1", "wrist_2", "wrist_3"], "motors": ["m4", "m5", "m6"],
                                    "motor_from_joint": WRIST_M.tolist()}}
    sim = p["simulation"]["joints"]
    for j, m in zip(["wrist_1", "wrist_2", "wrist_3"], ["m4", "m5", "m6"]):
        sim[m] = sim.pop(j)
    p["simulation"]["effort_noise"] = 0.03
    p["identification"]["method"] = "wls"
    cfg = tmp_path / "coupled.yaml"
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False))

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "robot_ident.cli", *map(str, args)], capture_output=True, text=True,
                           cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr
        return r

    cli("simulate", "--urdf", demo_urdf, "--config", cfg, "--trajectory", tmp_path / "ident.yaml",
        "--output", tmp_path / "b1", "--quiet")
    cli("simulate", "--urdf", demo_urdf, "--config", cfg, "--trajectory", tmp_path / "valid.yaml",
        "--output", tmp_path / "b2", "--quiet")
    r = cli("identify", "--bag", tmp_path / "b1", "--validate-bag", tmp_path / "b2", "--urdf", demo_urdf,
            "--config", cfg, "--output", tmp_path / "res", "--quiet", "--no-plots")
    # the gain check allows for the motors' coupled armature and friction (it said wrist_1 2.8 x the CAD's)
    assert "warning" not in r.stderr, r.stderr
    res = yaml.safe_load((tmp_path / "res" / "result.yaml").read_text())
    assert res["robot"]["transmissions"]["wrist"]["motors"] == ["m4", "m5", "m6"]
    truth = yaml.safe_load((tmp_path / "b2" / "robot_ident_truth.yaml").read_text())
    noise = np.array([truth["effort_noise_std"][j] for j in cad.joint_names])
    rms = np.array([res["validation"]["joints"][j]["rms"] for j in cad.joint_names])
    assert np.all(rms / noise < 1.1), rms / noise
    cli("validate", "--bag", tmp_path / "b2", "--result", tmp_path / "res", "--quiet")
    val = yaml.safe_load((tmp_path / "res" / "validation.yaml").read_text())
    np.testing.assert_allclose([val["joints"][j]["rms"] for j in cad.joint_names], rms, rtol=1e-6)
    # a plain arm's bag given with the coupled one under the plain config: one model cannot fit both
    cli("simulate", "--urdf", demo_urdf, "--config", ROOT / "config" / "demo_arm.yaml", "--trajectory",
        tmp_path / "valid.yaml", "--output", tmp_path / "plain", "--quiet")
    cli("identify", "--bag", tmp_path / "plain", "--bag", tmp_path / "b1", "--urdf", demo_urdf, "--config",
        ROOT / "config" / "demo_arm.yaml", "--output", tmp_path / "mixed", "--quiet", "--no-plots", "--method", "wls")
    q = yaml.safe_load((tmp_path / "mixed" / "result.yaml").read_text())["model_quality"]
    assert not q["good"] and any(f["probe"] == "inputs" for f in q["misses_structure"]), q
    # ... and under the coupled config: the joint fit leaves both about equally wrong (their residual
    # ratio near 1), but the coupled bag fitted alone is at its noise and the plain one alone misses
    # structure (it passed before, as a good model)
    cli("identify", "--bag", tmp_path / "plain", "--bag", tmp_path / "b1", "--urdf", demo_urdf, "--config", cfg,
        "--output", tmp_path / "mixed_c", "--quiet", "--no-plots", "--method", "wls")
    q = yaml.safe_load((tmp_path / "mixed_c" / "result.yaml").read_text())["model_quality"]
    assert not q["good"] and {f["joint"] for f in q["misses_structure"] if f["probe"] == "inputs"} & {
        "wrist_1", "wrist_2", "wrist_3"}, q
    cli("report", "--result", tmp_path / "res")             # it once failed on the motors' names (KeyError 'm4')
    page = (tmp_path / "res" / "report.html").read_text()
    assert "<td>m4</td>" in page and "kg·m²" in page

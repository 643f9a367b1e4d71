"""Identification judged against MuJoCo, an engine independent of Pinocchio."""
import mujoco
import numpy as np
import pytest

from conftest import random_states
from robot_ident.demos.serial_arm import DemoSetup, run_demo
from robot_ident.io.results import load_result
from robot_ident.model.robot import RobotModel
from robot_ident.sim import JointTruth, SimNoise, SimulatedArm


def test_mujoco_inverse_dynamics_matches_the_regressor(demo_urdf):
    """Same URDF in both engines: MuJoCo's inverse dynamics (with armature and damping)
    equals regressor x parameters to numerical precision."""
    model = RobotModel(demo_urdf)
    n = model.n
    truth = JointTruth(np.linspace(0.1, 0.6, n), np.zeros(n), np.linspace(0.2, 2.0, n), np.zeros(n))
    arm = SimulatedArm(model.urdf_xml, model.joint_names, truth)
    theta = arm.true_parameters(model)
    q, qd, qdd = random_states(model, 20, seed=3)
    m, d = arm.mj_model, arm.mj_data
    for s in range(q.shape[0]):
        d.qpos[arm._qadr] = q[s]
        d.qvel[arm._dadr] = qd[s]
        d.qacc[arm._dadr] = qdd[s]
        mujoco.mj_inverse(m, d)
        tau_mj = d.qfrc_inverse[arm._dadr]   # includes the passive damping force
        tau_model = model.efforts(q[s], qd[s], qdd[s], theta)[0]
        np.testing.assert_allclose(tau_mj, tau_model, atol=1e-8 * max(1, np.abs(tau_model).max()))


@pytest.fixture(scope="module")
def demo_outcome(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    return run_demo(out / "result", DemoSetup(), plots=True)


def test_demo_recovers_the_simulator_truth(demo_outcome):
    o = demo_outcome
    # Issue figures: validation RMS within 1.25x the effort noise on every joint ...
    assert np.all(o.validation.noise_ratio <= 1.25), o.validation.noise_ratio
    # ... and the well-determined base parameters within 1 % (median) of the truth.
    good = o.well_determined
    assert good.sum() >= 30
    assert np.median(o.relative_errors[good]) <= 0.01
    # The CAD model (which the simulated arm departs from) is far worse on the same data.
    v = o.validation
    cad_err = np.abs(o.true_base - o.base.project(o.model.nominal))
    assert np.median(cad_err[good] / np.abs(o.true_base[good])) > 5 * np.median(o.relative_errors[good])
    assert v.n_samples.min() > 0.8 * len(v.t)


def test_friction_and_armature_are_recovered(demo_outcome):
    o = demo_outcome
    setup = DemoSetup()
    act = o.result.actuator_parameters()
    for k, j in enumerate(o.model.joint_names):
        assert act[j]["Fc"]["value"] == pytest.approx(setup.coulomb[k], rel=0.05)
        assert act[j]["Fv"]["value"] == pytest.approx(setup.viscous[k], rel=0.1)
        assert act[j]["off"]["value"] == pytest.approx(setup.effort_offset[k], abs=0.05 * setup.coulomb[k])
    assert act["elbow"]["Ia"]["value"] == pytest.approx(setup.armature[2], rel=0.05)
    assert "Ia" not in act["shoulder_pan"]   # merged into shoulder_pan.Izz


def test_result_folder_round_trips(demo_outcome):
    o = demo_outcome
    d, base, values, std = load_result(o.output)
    assert d["method"] == "physical" and d["robot"]["joints"] == list(o.model.joint_names)
    np.testing.assert_allclose(values, o.result.values, rtol=1e-12)
    np.testing.assert_allclose(base.projection, o.base.projection, rtol=1e-12)
    assert set(d["validation"]["joints"]) == set(o.model.joint_names)
    for png in ("identification_efforts.png", "validation_efforts.png"):
        assert (o.output / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(o.output.glob(".*.tmp"))


def test_simulated_noise_has_the_requested_level(demo_urdf):
    model = RobotModel(demo_urdf)
    n = model.n
    arm = SimulatedArm(model.urdf_xml, model.joint_names, JointTruth.zeros(n))

    class Hold:
        joint_names = model.joint_names
        duration = 2.0

        def sample(self, t):
            z = np.zeros((len(t), n))
            return z + 0.3, z, z

    r = arm.run(Hold(), noise=SimNoise(effort_abs_std=np.full(n, 0.05), seed=1))
    measured_noise = np.std(r.recording.effort - r.effort_true, axis=0)
    np.testing.assert_allclose(measured_noise, 0.05, rtol=0.1)


def test_panda_with_locked_mimic_fingers_simulates(panda_urdf):
    from conftest import PANDA_ARM
    model = RobotModel(panda_urdf, PANDA_ARM)
    arm = SimulatedArm(model.urdf_xml, PANDA_ARM, JointTruth.zeros(7))
    assert arm.mj_model.nq == 7 and arm.mj_model.neq == 0
    theta = arm.true_parameters(model)
    np.testing.assert_allclose(theta[:70], model.nominal[:70])


def _so101_and_a_trajectory():
    from conftest import example_robot_urdf
    from robot_ident.excitation import FourierTrajectory
    m = RobotModel(example_robot_urdf("so_arm_description", "so101.urdf"))
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.full(m.n, 10.0), seed=1)
    return m, traj


def test_an_unstable_simulation_is_an_error_not_a_bag():
    """Issue 29: the SO-101 (0.1 kg links, 10 N·m limits) blew up in MuJoCo ("Nan, Inf or huge
    value in QACC"), which resets the state and carries on: `simulate` wrote a 30 s bag with
    positions up to 271 rad and exit 0. The run now stops with the time it happened (made
    unstable here by a PD bandwidth far above what the 1 kHz loop carries)."""
    from robot_ident.errors import ModelError
    m, traj = _so101_and_a_trajectory()
    n = m.n
    arm = SimulatedArm(m.urdf_xml, m.joint_names, JointTruth(*(np.zeros(n),) * 4), nominal=m, bandwidth_hz=200.0)
    with pytest.raises(ModelError, match=r"the simulation is unstable at t = [0-9.]+ s .*nothing is written"):
        arm.run(traj, 30.0)


def test_the_pd_gains_follow_the_effective_inertia_along_the_trajectory(panda_urdf):
    """The SO-101 above, and the Panda and the UR10 of bench/zoo.py, blew up with the PD gains
    taken from M_ii at the start pose: where a joint's effective inertia 1 / (M^-1)_ii is far
    smaller (Panda joints 1 and 3 near alignment: M_ii 30 x it), the 1 kHz derivative loop is
    unstable. The gains are now the effective inertia at each desired pose: the SO-101 follows
    its 30 s trajectory, and on the Panda with joints 1 and 3 aligned M^-1 K_d has a unit
    diagonal, so no mode of the loop is faster than n x 2 wn."""
    from conftest import PANDA_ARM
    m, traj = _so101_and_a_trajectory()
    n = m.n
    arm = SimulatedArm(m.urdf_xml, m.joint_names, JointTruth(*(np.zeros(n),) * 4), nominal=m)
    r = arm.run(traj, 30.0)
    assert np.abs(r.q_true - traj.sample(np.arange(len(r.q_true)) / 1000.0)[0]).max() < 0.005
    panda = RobotModel(panda_urdf, PANDA_ARM)
    arm = SimulatedArm(panda.urdf_xml, PANDA_ARM, JointTruth(*(np.zeros(7),) * 4), nominal=panda)
    q = np.array([[0.0, 0.02, 0.0, -1.5, 0.0, 1.5, 0.0], [0.5, -0.3, 0.2, -2.0, 0.1, 1.0, 0.3]])
    kp, kd = arm._gains(q)
    assert kp.shape == kd.shape == (2, 7)
    import pinocchio as pin
    for k in range(2):
        M = pin.crba(panda.model, panda.data, panda.to_pinocchio_q(q[k]))
        M = np.triu(M) + np.triu(M, 1).T
        A = np.linalg.solve(M, np.diag(kd[k]))
        wn = 2 * np.pi * arm.bandwidth_hz
        np.testing.assert_allclose(np.diag(A), 2 * wn, rtol=1e-9)
        assert np.linalg.eigvals(A).real.max() <= 7 * 2 * wn * (1 + 1e-9)
        if k == 0:      # aligned: M_11 is many times the effective inertia the old gains assumed
            assert M[0, 0] * np.linalg.inv(M)[0, 0] > 10
    assert np.allclose(arm._gains(q[0])[1], kd[0])


def test_a_simulation_that_leaves_the_trajectory_is_an_error(demo_urdf, monkeypatch):
    """The demo arm tracks to 0.006 rad; with the plausibility bound below that the run is refused
    naming the joint and the time (the guard against a bag the truth file does not describe)."""
    import robot_ident.sim.mujoco_arm as mj
    from robot_ident.errors import ModelError
    from robot_ident.excitation import FourierTrajectory
    m = RobotModel(demo_urdf)
    n = m.n
    arm = SimulatedArm(m.urdf_xml, m.joint_names, JointTruth(np.full(n, 0.3), np.full(n, 2.0), np.ones(n),
                                                             np.zeros(n)), nominal=m)
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=3)
    arm.run(traj, 4.0)
    monkeypatch.setattr(mj, "MAX_TRACKING_ERROR", 1e-4)
    with pytest.raises(ModelError, match=r"does not follow the trajectory: joint '\w+' is [0-9.e-]+ rad \(m\) off"):
        arm.run(traj, 4.0)


def test_the_physics_step_follows_the_arms_damping_over_its_inertia(demo_urdf, tmp_path):
    """Issue 29 item 6: the time step is derived from the arm. A light joint with strong
    viscous friction and no rotor (the xArm7's joint7: 2 N*m*s/rad on 1.3e-4 kg*m^2) made the
    explicit damping diverge within milliseconds at the fixed two substeps. Here the demo arm's
    wrist_3 (about 2e-4 kg*m^2) gets 3 N*m*s/rad: two substeps are unstable (MuJoCo's own
    warning), the derived step follows the trajectory."""
    from robot_ident.errors import ModelError
    from robot_ident.excitation import FourierTrajectory
    from robot_ident.sim.mujoco_arm import stable_substeps
    text = demo_urdf.read_text()
    assert text.count('<dynamics damping="0.2" friction="0.4"/>') == 1
    urdf = tmp_path / "damped.urdf"
    urdf.write_text(text.replace('<dynamics damping="0.2" friction="0.4"/>',
                                 '<dynamics damping="3.0" friction="0.0"/>'))
    m = RobotModel(urdf)
    n = m.n
    fv = np.array([m.nominal[m.layout.index(f"{j}.Fv")] for j in m.joint_names])
    fc = np.array([m.nominal[m.layout.index(f"{j}.Fc")] for j in m.joint_names])
    truth = JointTruth(np.zeros(n), fc, fv, np.zeros(n))          # the URDF's own friction, no rotor
    traj = FourierTrajectory.random_within_limits(m.joint_names, m.limits.lower, m.limits.upper, m.limits.velocity,
                                                  np.array([6.0, 6, 8, 10, 10, 10]), seed=3)
    with pytest.raises(ModelError, match="unstable"):
        SimulatedArm(m.urdf_xml, m.joint_names, truth, nominal=m, substeps=2).run(traj, 2.0)
    arm = SimulatedArm(m.urdf_xml, m.joint_names, truth, nominal=m)
    assert arm.substeps > 2 and arm.mj_model.opt.timestep == pytest.approx(1e-3 / arm.substeps)
    r = arm.run(traj, 2.0)          # rotorless joints: the PD is soft, but the run is stable and follows
    assert np.abs(r.q_true - traj.sample(np.arange(len(r.q_true)) / 1000.0)[0]).max() < 0.05
    # the demo arm as shipped keeps the two substeps it always had
    ref = RobotModel(demo_urdf)
    assert SimulatedArm(ref.urdf_xml, ref.joint_names, JointTruth(*(np.full(n, 0.03),) * 2, fv, np.zeros(n))
                        ).substeps == 2
    assert stable_substeps(arm.mj_model, arm.mj_data, 1000.0) == arm.substeps


def test_the_simulated_armature_defaults_to_a_rotor_scaled_to_the_effort_limit(tmp_path):
    """Issue 29 item 6: a `simulation:` section without armature used to simulate rotorless
    joints, and the xArm7 and Z1 of bench/zoo.py could not follow any design (1 N*m of URDF
    Coulomb friction on 1e-4 kg*m^2 wrists). The default is now 1e-3 kg*m^2 per N*m of the URDF
    effort limit within 0.005-0.5, where the model identifies armature; 0 where it does not."""
    from conftest import example_robot_urdf
    from robot_ident.model.robot import FrictionOptions
    from robot_ident.sim.config import ARMATURE_RANGE, DEFAULT_ARMATURE_PER_EFFORT, simulation_config
    joints = [f"joint{i}" for i in range(1, 8)]
    m = RobotModel(example_robot_urdf("xarm_description", "xarm7.urdf"), joints)
    sim = simulation_config({"joints": {"joint7": {"armature": 0.004}}}, m)
    expected = np.clip(DEFAULT_ARMATURE_PER_EFFORT * m.limits.effort, *ARMATURE_RANGE)
    np.testing.assert_allclose(sim.truth.armature[:6], expected[:6])
    assert sim.truth.armature[6] == 0.004 and (sim.truth.armature[:6] > 0.01).all()
    bare = RobotModel(example_robot_urdf("xarm_description", "xarm7.urdf"), joints,
                      friction=FrictionOptions(armature=False))
    assert (simulation_config(None, bare).truth.armature == 0).all()

"""Free-floating space robot: momentum regressor, MuJoCo truth, identifiability, LS and GA."""
import numpy as np
import pinocchio as pin
import pytest

from robot_ident.errors import IdentificationError, ModelError
from robot_ident.mechanisms.floating_base import (FloatingBaseModel, MomentumExperiment, _dual_action, check_identifiability,
                                       ga_bounds, guidance, identify, payload_ga_bounds, rest_to_rest,
                                       stack_momentum_equations)
from robot_ident.demos.space import BodyErrors, SpaceDemoSetup, demo_truth
from robot_ident.sim.space_robot_sim import SpaceRobotSim

from conftest import ROOT

URDF = ROOT / "urdf" / "space_robot.urdf"
Q0 = np.array(SpaceDemoSetup().q0)
BASE3 = ("shoulder_yaw", "shoulder_pitch", "upper_arm_roll")
PAYLOAD4 = ("elbow_pitch", "wrist_pitch", "wrist_yaw", "wrist_roll")


@pytest.fixture(scope="module")
def model():
    return FloatingBaseModel(URDF, payload_frame="tool0")


@pytest.fixture(scope="module")
def truth(model):
    return demo_truth(SpaceDemoSetup(), model)


@pytest.fixture(scope="module")
def base_runs(truth):
    """Noise-free single-joint experiments without payload; the base differs from the URDF."""
    sim = SpaceRobotSim(URDF, base_params=truth[0])
    runs = {j: sim.run(j, Q0, 0.5, 4.0, 0.2, record_hz=25) for j in BASE3}
    return sim, runs


@pytest.fixture(scope="module")
def payload_runs(truth):
    sim = SpaceRobotSim(URDF, base_params=truth[0], payload_params=truth[1])
    runs = {j: sim.run(j, Q0, 0.5, 4.0, 0.2, record_hz=25) for j in PAYLOAD4}
    return sim, runs


def _pinocchio_with_payload(model, theta):
    """Reference Pinocchio model whose inertias are theta's, the payload merged into its parent joint."""
    pm = model.model.copy()
    for k in range(1, pm.njoints):
        pm.inertias[k] = pin.Inertia.FromDynamicParameters(theta[10 * (k - 1): 10 * k])
    fr = pm.frames[pm.getFrameId("tool0")]
    payload = pin.Inertia.FromDynamicParameters(theta[model.body_slice("payload")])
    pm.inertias[fr.parentJoint] = pm.inertias[fr.parentJoint] + fr.placement.act(payload)
    return pm


def test_layout_names_and_nominal(model):
    assert model.bodies[0] == "base" and model.bodies[-1] == "payload"
    assert model.base_link == "base_link"
    assert model.n == 7 and model.n_params == 90
    assert model.names[:2] == ("base.m", "base.mx") and "elbow_pitch.Izz" in model.names
    assert model.nominal[model.names.index("base.m")] == pytest.approx(100.0)
    assert model.nominal[model.names.index("wrist_roll.m")] == pytest.approx(3.5)
    assert not model.nominal[model.body_slice("payload")].any()


def test_momentum_regressor_matches_pinocchio_centroidal_momentum(model, truth):
    rng = np.random.default_rng(3)
    theta = model.nominal.copy()
    theta[model.body_slice("base")] = truth[0]
    theta[model.body_slice("payload")] = truth[1]
    pm = _pinocchio_with_payload(model, theta)
    pd = pm.createData()
    for _ in range(5):
        q = pin.randomConfiguration(pm, -3 * np.ones(pm.nq), 3 * np.ones(pm.nq))
        v = rng.normal(size=pm.nv)
        hg = pin.computeCentroidalMomentum(pm, pd, q, v).vector       # about the COM, world axes
        com = pd.com[0].copy()
        h = model.momentum_regressor_pin(q, v, "world", com) @ theta
        np.testing.assert_allclose(h, hg, atol=1e-10 * np.abs(hg).max())
        # the base-frame form, mapped to the world about the COM, is the same momentum
        hb = model.momentum_regressor_pin(q, v, "base") @ theta
        pin.forwardKinematics(pm, pd, q)
        hw = _dual_action(pin.SE3(np.eye(3), -com) * pd.oMi[1]) @ hb
        np.testing.assert_allclose(hw, hg, atol=1e-10 * np.abs(hg).max())
    # and the measured-signal form equals the Pinocchio-vector form
    q_arm, qd_arm, tw = rng.uniform(-1, 1, model.n), rng.normal(size=model.n), rng.normal(size=6)
    qp, vp = model.pin_state(q_arm, qd_arm, tw)
    np.testing.assert_allclose(model.momentum_regressor(q_arm, qd_arm, tw)[0],
                               model.momentum_regressor_pin(qp, vp), atol=1e-12)


def test_base_mass_column_is_the_base_linear_velocity(model):
    """Column order check by name: d h / d base.m is (v_base, 0) in base coordinates."""
    tw = np.array([0.1, -0.2, 0.3, 0.0, 0.0, 0.0])
    Y = model.momentum_regressor(np.zeros(model.n), np.zeros(model.n), tw)[0]
    np.testing.assert_allclose(Y[:, model.names.index("base.m")], np.r_[tw[:3], 0, 0, 0], atol=1e-15)
    w = np.array([0, 0, 0, 0.0, 0.0, 0.7])
    Y = model.momentum_regressor(np.zeros(model.n), np.zeros(model.n), w)[0]
    np.testing.assert_allclose(Y[:, model.names.index("base.Izz")], [0, 0, 0, 0, 0, 0.7], atol=1e-15)


def test_mujoco_conserves_momentum_and_agrees_with_the_regressor(model, base_runs, truth):
    sim, runs = base_runs
    theta = sim.true_parameters(model)
    np.testing.assert_allclose(theta[model.body_slice("base")], truth[0], rtol=1e-9, atol=1e-12)
    for j, r in runs.items():
        lin, ang = r.momentum_drift()
        assert lin < 1e-9 and ang < 1e-9, (j, lin, ang)            # RK4 at 1 kHz
        e = r.true
        assert np.abs(e.qd[:, model.joint_names.index(j)]).max() > 0.1
        Y = model.momentum_regressor(e.q, e.qd, e.base_twist)
        h = Y @ theta
        scale = np.abs(Y[..., model.columns(model.joint_names)] @ theta[model.columns(model.joint_names)]).max()
        assert np.abs(h).max() < 1e-8 * scale, j
        # a wrong base mass does not conserve momentum: the check can fail
        wrong = theta.copy()
        wrong[model.body_slice("base")] *= 1.01
        assert np.abs(Y @ wrong).max() > 1e-4 * scale


def test_explicit_euler_drifts_more_than_rk4(truth):
    rk4 = SpaceRobotSim(URDF, base_params=truth[0]).run("shoulder_pitch", Q0, 0.5, 2.0, 0.0)
    euler = SpaceRobotSim(URDF, base_params=truth[0], integrator="euler").run("shoulder_pitch", Q0, 0.5, 2.0, 0.0)
    assert max(euler.momentum_drift()) > 100 * max(rk4.momentum_drift())


def test_two_joints_singular_for_the_inertia_three_not(model, base_runs):
    _, runs = base_runs
    theta = model.nominal
    for pair in (BASE3[:2], BASE3[1:], BASE3[::2]):
        exps = [runs[j].measured for j in pair]
        # source C's instantaneous equations: exactly singular (rank 9), the null
        # direction is an inertia combination
        S = stack_momentum_equations(model, exps, ["base"], theta, samples="snapshot")
        rep = check_identifiability(S, raise_on_singular=False)
        assert rep.rank == 9 and not rep.full_rank
        assert all(n.split(".")[1].startswith("I") for n in rep.null_directions[0])
        with pytest.raises(IdentificationError, match="three joints"):
            identify(model, exps, ["base"], theta, samples="snapshot")
        # whole rest-to-rest motions: the base turns about nearly coplanar axes
        with pytest.raises(IdentificationError, match="coplanar"):
            identify(model, exps, ["base"], theta)
    exps = [runs[j].measured for j in BASE3]
    for samples in ("snapshot", "all"):
        S = stack_momentum_equations(model, exps, ["base"], theta, samples=samples)
        rep = check_identifiability(S)
        assert rep.rank == 10 and rep.identifiable and rep.omega_span["base"][2] > 0.05


def test_least_squares_recovers_base_and_payload_on_noiseless_data(model, base_runs, payload_runs, truth):
    sim1, runs1 = base_runs
    known = model.nominal.copy()          # arm from the URDF; the URDF's base is NOT the truth
    assert abs(known[0] - truth[0][0]) > 1.0
    for samples in ("all", "snapshot"):
        est = identify(model, [r.measured for r in runs1.values()], ["base"], known, samples=samples)
        np.testing.assert_allclose(est.body("base"), truth[0], rtol=1e-6, atol=1e-8)
    err = BodyErrors.of(est.body("base"), truth[0])
    assert err.mass < 1e-8 and err.inertia_norm < 1e-7
    assert est.physical()["base"][0]
    bad = identify(model, [r.measured for r in runs1.values()], ["base"], known)
    bad.values[bad.names.index("base.Izz")] = 0.0          # violates the triangle inequality
    assert not bad.physical()["base"][0]
    # stage 2: the base as identified is known, the payload unknown
    sim2, runs2 = payload_runs
    est2 = identify(model, [r.measured for r in runs2.values()], ["payload"], est.into(known, model))
    np.testing.assert_allclose(est2.body("payload"), truth[1], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(sim2.true_parameters(model)[model.body_slice("payload")], truth[1], atol=1e-12)


def test_least_squares_with_velocity_noise(model, truth):
    sim = SpaceRobotSim(URDF, base_params=truth[0])
    runs = [sim.run(j, Q0, 0.5, 4.0, 0.2, record_hz=25, noise=0.001, seed=k) for k, j in enumerate(BASE3)]
    assert np.abs(runs[0].measured.qd - runs[0].true.qd).max() > 0      # noise was added
    est = identify(model, [r.measured for r in runs], ["base"], model.nominal)
    e = BodyErrors.of(est.body("base"), truth[0])
    assert e.mass < 0.01 and e.max_diagonal < 0.01
    assert est.std is not None and np.all(est.std > 0)


def test_scale_comes_from_the_known_parameters(model, base_runs, truth):
    """Momentum is homogeneous: a 2 % heavier arm CAD gives a 2 % heavier base; no known
    parameters at all is refused."""
    _, runs = base_runs
    exps = [r.measured for r in runs.values()]
    est = identify(model, exps, ["base"], 1.02 * model.nominal)
    np.testing.assert_allclose(est.body("base"), 1.02 * truth[0], rtol=1e-6, atol=1e-8)
    with pytest.raises(IdentificationError, match="homogeneous"):
        identify(model, exps, ["base"], np.zeros(model.n_params))


def test_genetic_algorithm_on_noiseless_data(model, base_runs, payload_runs, truth):
    _, runs1 = base_runs
    lo, hi = ga_bounds(model.nominal[model.body_slice("base")])
    est = identify(model, [r.measured for r in runs1.values()], ["base"], model.nominal, method="ga",
                   bounds=(lo, hi), seed=2)
    e = BodyErrors.of(est.body("base"), truth[0])
    assert e.mass < 0.002 and e.max_diagonal < 0.002
    _, runs2 = payload_runs
    known = model.nominal.copy()
    known[model.body_slice("base")] = truth[0]
    plo, phi = payload_ga_bounds(20.0, 0.5)
    est2 = identify(model, [r.measured for r in runs2.values()], ["payload"], known, method="ga",
                    bounds=(plo, phi), seed=2)
    e2 = BodyErrors.of(est2.body("payload"), truth[1])
    assert e2.mass < 0.002 and e2.com_mm < 0.1 and e2.max_diagonal < 0.002
    with pytest.raises(IdentificationError, match="bounds"):
        identify(model, [r.measured for r in runs2.values()], ["payload"], known, method="ga")


def test_guidance_mass_ratios_and_base_speed(model, base_runs):
    sim, runs = base_runs
    theta = sim.true_parameters(model)
    g = guidance(model, theta, [r.true for r in runs.values()])
    mb = theta[0]
    assert g.base_mass == pytest.approx(mb)
    assert g.link_ratios["shoulder_yaw"] == pytest.approx(10.0 / mb)
    assert g.arm_ratio == pytest.approx(46.5 / mb)
    assert g.links_outside_band == []
    # the base speed predicted from the joint rates equals the simulated base twist
    for j, r in runs.items():
        k = r.true.peak_index()
        assert g.base_speed[j]["angular"] == pytest.approx(np.linalg.norm(r.true.base_twist[k, 3:]), rel=1e-6)
        assert g.base_speed[j]["linear"] == pytest.approx(np.linalg.norm(r.true.base_twist[k, :3]), rel=1e-6)
    heavy = theta.copy()
    heavy[model.body_slice("upper_arm_roll")] *= 4.0              # 40 kg on a 94 kg base
    light = theta.copy()
    light[model.body_slice("wrist_roll")] *= 0.5                  # 1.75 kg
    assert guidance(model, heavy).links_outside_band == ["upper_arm_roll"]
    assert guidance(model, light).links_outside_band == ["wrist_roll"]
    assert "outside" in guidance(model, heavy).summary()


def test_rest_to_rest_profile():
    t = np.linspace(0, 2, 2001)
    s, ds, dds = rest_to_rest(t, 2.0, 0.5)
    assert s[0] == 0 and s[-1] == pytest.approx(0.5)
    assert ds[0] == ds[-1] == 0 and dds[0] == pytest.approx(0) and dds[-1] == pytest.approx(0, abs=1e-12)
    np.testing.assert_allclose(np.gradient(s, t), ds, atol=1e-4)


def test_bad_inputs_are_named(model):
    with pytest.raises(ModelError, match="payload frame"):
        FloatingBaseModel(URDF, payload_frame="no_such_frame")
    with pytest.raises(ModelError, match="unknown body"):
        stack_momentum_equations(model, [MomentumExperiment(np.zeros(2), np.zeros((2, 7)), np.zeros((2, 7)),
                                                            np.zeros((2, 6)))], ["nope"], model.nominal)
    with pytest.raises(ValueError, match="non-finite"):
        MomentumExperiment(np.zeros(1), np.full((1, 7), np.nan), np.zeros((1, 7)), np.zeros((1, 6)))


def test_space_demo_command_runs_both_stages(capsys):
    from robot_ident.cli import main
    import robot_ident.cli.commands.demo as demo_cmd
    import robot_ident.demos.space as fbd

    small = dict(duration=3.0, record_hz=20.0, ga_generations=80, ga_rounds=2, ga_population=40)
    orig = fbd.SpaceDemoSetup
    try:
        fbd.SpaceDemoSetup = lambda **kw: orig(**{**small, **kw})
        assert main(["demo", "--robot", "space", "--quiet", "--velocity-noise", "0"]) == 0
    finally:
        fbd.SpaceDemoSetup = orig
    out = capsys.readouterr().out
    assert "stage base" in out and "stage payload" in out and "ga" in out
    assert main(["demo", "--robot", "space", "--velocity-noise", "-1"]) == 2
    assert demo_cmd.run_space is not None

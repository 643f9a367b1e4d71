"""Closed-chain models (robot_ident.mechanisms.closed_chain) against independent references:
closure residuals, finite differences, and MuJoCo's constrained multibody dynamics."""
from pathlib import Path

import numpy as np
import pytest

from robot_ident.model.base import BaseParameters
from robot_ident.mechanisms.closed_chain import (ClosedChainModel, ClosedChainSpec, Closure, finite_difference_G,
                                      load_closed_chain)
from robot_ident.errors import ModelError
from robot_ident.excitation import PolynomialTrajectory
from robot_ident.model.robot import FrictionOptions

ROOT = Path(__file__).resolve().parent.parent
FIVE_BAR = ROOT / "urdf" / "five_bar_closures.yaml"
HYBRID = ROOT / "urdf" / "hybrid5_closures.yaml"
FRICTION = FrictionOptions(coulomb_velocity_scale=0.001)


@pytest.fixture(scope="module")
def five_bar():
    return load_closed_chain(FIVE_BAR, friction=FRICTION)


@pytest.fixture(scope="module")
def hybrid():
    return load_closed_chain(HYBRID, friction=FRICTION)


@pytest.fixture(params=["five_bar", "hybrid"])
def model(request):
    return request.getfixturevalue(request.param)


def _random_actuated(model, n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(model.limits.lower, model.limits.upper, size=(n, model.n))


def _truth(model, seed=3):
    """True parameters: CAD inertias perturbed (physically), friction, armature, offsets."""
    import pinocchio as pin
    rng = np.random.default_rng(seed)
    theta = model.nominal.copy()
    for b in model.layout.body_joints:
        I = model.body_inertia(theta, b)
        s = 1 + rng.uniform(-0.1, 0.1)
        J = pin.Inertia(I.mass * s, I.lever + rng.uniform(-0.01, 0.01, 3), I.inertia * s)
        theta[model.layout.inertial_slice(b)] = J.toDynamicParameters()
    for j in model.joint_names:
        p = model.is_prismatic(j)
        lay = model.layout
        theta[lay.index(f"{j}.Ia")] = 30.0 if p else 0.02
        theta[lay.index(f"{j}.Fc")] = 50.0 if p else 0.3
        theta[lay.index(f"{j}.Fv")] = 250.0 if p else 0.2
        theta[lay.index(f"{j}.off")] = 8.0 if p else 0.1
    return theta


def _excitation(model, seed, duration):
    rng = np.random.default_rng(seed)
    span = model.limits.upper - model.limits.lower
    mid = 0.5 * (model.limits.lower + model.limits.upper)
    # |tau^3 (1-tau)^3 (c0 + c1 tau)| <= (|c0| + |c1|) / 64: excursions of 0.2 to 0.4 span.
    amp = rng.uniform(0.2, 0.4, size=model.n) * rng.choice([-1.0, 1.0], size=model.n) * 64 * span
    c = np.stack([amp, -rng.uniform(0.0, 0.5, size=model.n) * amp], axis=1)
    return PolynomialTrajectory(model.joint_names, duration, mid, c)


# ------------------------------------------------------------------ kinematics
def test_closure_solved_from_random_actuated_poses(model):
    worst = 0.0
    for qa in _random_actuated(model, 60, seed=1):
        q = model.solve_positions(qa)
        r, _ = model.closure_residual(q, jacobian=False)
        worst = max(worst, float(np.abs(r).max()))
        np.testing.assert_array_equal(q[model.ia], qa)      # actuated coordinates untouched
    assert worst < 1e-10


def test_five_bar_stays_in_its_assembly_mode(five_bar):
    for qa in _random_actuated(five_bar, 30, seed=2):
        q = five_bar.solve_positions(qa)
        # elbows out: elbow1 bends positive, elbow2 negative (the home pose's mode)
        assert q[five_bar.tree_index("elbow1")] > 0 > q[five_bar.tree_index("elbow2")]


def test_G_matches_finite_differences(model):
    for qa in _random_actuated(model, 4, seed=4):
        q = model.solve_positions(qa)
        G = model.velocity_map(q)
        Gfd = finite_difference_G(model, qa)
        assert np.abs(G - Gfd).max() < 1e-7 * max(1.0, np.abs(G).max())
        # actuated rows are the identity, and G spans motions that keep the loops closed
        np.testing.assert_allclose(G[model.ia], np.eye(model.n), atol=0)
        _, J = model.closure_residual(q)
        assert np.abs(J @ G).max() < 1e-10


def test_passive_velocities_and_accelerations_match_finite_differences(model):
    T = np.linspace(0.0, 1.0, 1001)
    lo, hi = model.limits.lower, model.limits.upper
    mid, half = 0.5 * (lo + hi), 0.3 * (hi - lo)
    w = np.arange(1, model.n + 1)
    qa = mid + half * np.sin(np.outer(T, w) * 2.0)
    qda = half * 2.0 * w * np.cos(np.outer(T, w) * 2.0)
    qdda = -half * (2.0 * w) ** 2 * np.sin(np.outer(T, w) * 2.0)
    q, v, a = model.passive_states(qa, qda, qdda)
    vfd = np.gradient(q, T, axis=0, edge_order=2)
    afd = np.gradient(v, T, axis=0, edge_order=2)
    inner = slice(5, -5)
    scale_v, scale_a = np.abs(v).max(), np.abs(a).max()
    assert np.abs(vfd - v)[inner].max() < 1e-4 * scale_v
    assert np.abs(afd - a)[inner].max() < 1e-4 * scale_a


def test_unreachable_pose_is_a_model_error(five_bar):
    # base joints 0.3 m apart, links 0.3 + 0.4: with both proximal links pointing outward
    # the elbows are 0.9 m apart, farther than the two distal links can reach.
    with pytest.raises(ModelError, match="cannot be solved|singular"):
        five_bar.solve_positions(np.array([-1.5707963, 1.5707963]))


def test_singular_pose_is_a_model_error(five_bar):
    # elbows exactly 0.8 m apart: the distal links are stretched in line, the passive joints
    # cannot move the tip along the line -> J_p loses rank.
    s = np.arcsin((0.4 - 0.15) / 0.3)
    with pytest.raises(ModelError, match="singular|cannot be solved"):
        five_bar.solve_positions(np.array([-s, s]))


def test_bad_closure_description_errors():
    with pytest.raises(ModelError, match="kind"):
        Closure("x", "a", "b", kind="hinge")
    spec = ClosedChainSpec.from_yaml(FIVE_BAR)
    with pytest.raises(ModelError, match="no_such_link"):
        ClosedChainModel(spec.urdf, spec.actuated, [Closure("tip", "distal1", "no_such_link")], spec.home)
    with pytest.raises(ModelError, match="not a movable joint"):
        ClosedChainModel(spec.urdf, ("act1", "nope"), spec.closures, spec.home)
    with pytest.raises(ModelError, match="differ"):
        ClosedChainModel(spec.urdf, spec.actuated, spec.closures, spec.home, tie={"prox": ["act1", "elbow1"]})


# ------------------------------------------------------------------ regressor
def test_tied_limbs_regressor_is_the_full_one_times_the_tie_map(hybrid):
    full = load_closed_chain(HYBRID, friction=FRICTION, tie_limbs=False)
    assert full.layout.n_inertial == 120 and hybrid.layout.n_inertial == 80
    rng = np.random.default_rng(5)
    qa = _random_actuated(hybrid, 5, seed=6)
    qd, qdd = rng.normal(size=qa.shape) * 0.05, rng.normal(size=qa.shape) * 0.2
    Yt = hybrid.regressor(qa, qd, qdd)
    Yf = full.regressor(qa, qd, qdd)
    ni_t, ni_f = hybrid.layout.n_inertial, full.layout.n_inertial
    np.testing.assert_allclose(Yt[:, :ni_t], Yf[:, :ni_f] @ hybrid.tie_matrix, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(Yt[:, ni_t:], Yf[:, ni_f:], atol=0)
    # the tied CAD vector expands to the untied one
    np.testing.assert_allclose(hybrid.full_inertial(hybrid.nominal), full.nominal[:ni_f], rtol=1e-12)


def test_regressor_matches_rnea_projection_and_sample_major_rows(hybrid):
    rng = np.random.default_rng(7)
    qa = _random_actuated(hybrid, 3, seed=8)
    qd, qdd = rng.normal(size=qa.shape) * 0.05, rng.normal(size=qa.shape) * 0.2
    theta = _truth(hybrid)
    np.testing.assert_allclose(hybrid.efforts(qa, qd, qdd, theta), hybrid.inverse_dynamics(qa, qd, qdd, theta),
                               rtol=1e-9, atol=1e-8)
    Y = hybrid.regressor(qa, qd, qdd)
    Y1 = hybrid.regressor(qa[1], qd[1], qdd[1])
    np.testing.assert_array_equal(Y[hybrid.n:2 * hybrid.n], Y1)


@pytest.mark.parametrize("name,duration", [("five_bar", 3.0), ("hybrid", 3.0)])
def test_virtual_work_regressor_equals_mujoco_actuator_efforts(request, name, duration):
    from robot_ident.sim.closed_chain_sim import ClosedChainSim
    from robot_ident.sim.mujoco_arm import SimNoise
    model = request.getfixturevalue(name)
    theta = _truth(model)
    sim = ClosedChainSim(model, theta)
    run = sim.run(_excitation(model, 11, duration), noise=SimNoise(0.0, 0.0, 0.0))
    assert run.max_violation < 1e-6              # MuJoCo keeps the loops closed (m)
    Y = model.regressor(run.q_true, run.qd_true, run.qdd_true)
    pred = (Y @ theta).reshape(-1, model.n)
    off = theta[[model.layout.index(f"{j}.off") for j in model.joint_names]]
    pred -= off                                   # the offset is a sensor bias, not a force
    # outside the Coulomb transitions (model: tanh(qd / 1e-3) within 5e-5 of sign(qd) from 5e-3
    # on; MuJoCo's friction loss saturates from a few mm/s or mrad/s on)
    moving = np.abs(run.qd_true) > 5e-3
    for k, j in enumerate(model.joint_names):
        assert moving[:, k].sum() > 0.3 * len(run.qd_true), j
        e = (pred - run.effort_true)[moving[:, k], k]
        scale = np.sqrt(np.mean(run.effort_true[:, k] ** 2))
        assert np.sqrt(np.mean(e ** 2)) < 1e-4 * scale, (j, np.sqrt(np.mean(e ** 2)), scale)
    # and a wrong parameter vector does not fit (the check can fail)
    wrong = theta.copy()
    wrong[model.layout.index(f"{model.layout.body_joints[0]}.m")] *= 1.5
    e_wrong = (Y @ wrong).reshape(-1, model.n) - off - run.effort_true
    assert np.abs(e_wrong).max() > 1e-3 * np.abs(run.effort_true).max()


def test_base_parameters_and_wls_recover_truth_from_mujoco(five_bar):
    """Noise-free MuJoCo data identify every base parameter of the five-bar."""
    from robot_ident.estimation import build_problem, wls
    from robot_ident.data.signals import ProcessedData
    from robot_ident.sim.closed_chain_sim import ClosedChainSim
    from robot_ident.sim.mujoco_arm import SimNoise
    theta = _truth(five_bar)
    base = BaseParameters.from_model(five_bar, n_samples=150)
    assert 0 < base.size < five_bar.layout.size
    sim = ClosedChainSim(five_bar, theta)
    runs = [sim.run(_excitation(five_bar, s, 3.0), noise=SimNoise(0.0, 0.0, 0.0)) for s in (21, 22, 23)]
    q = np.concatenate([r.q_true for r in runs])[::5]
    qd = np.concatenate([r.qd_true for r in runs])[::5]
    qdd = np.concatenate([r.qdd_true for r in runs])[::5]
    eff = np.concatenate([r.recording.effort for r in runs])[::5]
    data = ProcessedData(np.arange(len(q)) * 5e-3, five_bar.joint_names, q, qd, qdd, eff, eff)
    res = wls(build_problem(five_bar, base, data, moving_threshold=5e-3))
    true_b = base.project(theta)
    rel = np.abs(res.values - true_b) / np.maximum(np.abs(true_b), 1e-3 * np.abs(true_b).max())
    assert rel.max() < 2e-3, [(n, r) for n, r in zip(base.names, rel) if r > 2e-3]


# ------------------------------------------------------------------ excitation
def test_design_excitation_accepts_closed_chain_models(five_bar, hybrid):
    from robot_ident.excitation import DesignSpec, LimitSpec, design_excitation
    for model, acc, evals in ((five_bar, (8.0, 8.0), 400), (hybrid, (0.3, 0.3, 0.3, 3.0, 3.0), 60)):
        limits = LimitSpec.from_model(model, acc)
        base = BaseParameters.from_model(model, n_samples=120, seed=1)
        spec = DesignSpec(family="polynomial7", optimizer="ga", duration=4.0, max_evals=evals, max_time=None,
                          n_samples=30, n_constraint=60, n_evaluation=60, seed=2)
        res = design_excitation(model, limits, spec, base)
        assert res.valid and np.isfinite(res.cond) and res.cond > 1
        q, _, _ = res.trajectory.sample(np.linspace(0, 4.0, 200))
        b = limits.bounds()
        assert (q >= b.lower - 1e-9).all() and (q <= b.upper + 1e-9).all()   # strokes respected
        # the trajectory is assemblable everywhere: the closures solve along it
        for qa in q[::20]:
            r, _ = model.closure_residual(model.solve_positions(qa), jacobian=False)
            assert np.abs(r).max() < 1e-10


# ------------------------------------------------------------------ pose closure
def _welded_five_bar(tmp_path):
    """The five-bar closed by a weld instead: a tip link on a revolute joint at the end of
    distal 2 is welded (full pose) to the end of distal 1 (3 passive joints)."""
    text = (ROOT / "urdf" / "five_bar.urdf").read_text()
    extra = """  <joint name="tip2" type="revolute">
    <parent link="distal2"/>
    <child link="tip_link"/>
    <origin xyz="0 0 0.4" rpy="0 0 0"/>
    <axis xyz="0 1 0"/>
    <limit lower="-3.1" upper="3.1" effort="10" velocity="10"/>
  </joint>
  <link name="tip_link">
    <inertial><origin xyz="0.02 0 0.01" rpy="0 0 0"/><mass value="0.3"/>
      <inertia ixx="2e-4" ixy="0" ixz="0" iyy="3e-4" iyz="0" izz="2e-4"/></inertial>
  </link>
</robot>"""
    urdf = tmp_path / "five_bar_weld.urdf"
    urdf.write_text(text.replace("</robot>", extra))
    closure = Closure("tip_weld", "distal1", "tip_link", point_a=(0, 0, 0.4), kind="pose")
    home = {"act1": -0.5, "elbow1": 1.33, "act2": 0.5, "elbow2": -1.33, "tip2": 1.65}
    return ClosedChainModel(str(urdf), ("act1", "act2"), [closure], home, FRICTION)


def test_pose_closure_solves_and_matches_mujoco_weld(tmp_path, five_bar):
    from robot_ident.sim.closed_chain_sim import ClosedChainSim
    from robot_ident.sim.mujoco_arm import SimNoise
    model = _welded_five_bar(tmp_path)
    assert model.nc == 6 and len(model.passive_names) == 3
    for qa in _random_actuated(model, 10, seed=31):
        q = model.solve_positions(qa)
        r, _ = model.closure_residual(q, jacobian=False)
        assert np.abs(r).max() < 1e-10
        # the loop geometry is the five-bar's: same elbows
        q5 = five_bar.solve_positions(qa)
        assert abs(q[model.tree_index("elbow1")] - q5[five_bar.tree_index("elbow1")]) < 1e-9
        G = model.velocity_map(q)
        assert np.abs(G - finite_difference_G(model, qa)).max() < 1e-7 * max(1.0, np.abs(G).max())
    theta = _truth(model)
    run = ClosedChainSim(model, theta).run(_excitation(model, 12, 3.0), noise=SimNoise(0.0, 0.0, 0.0))
    assert run.max_violation < 1e-6
    pred = model.efforts(run.q_true, run.qd_true, run.qdd_true, theta)
    pred -= theta[[model.layout.index(f"{j}.off") for j in model.joint_names]]
    moving = np.abs(run.qd_true) > 5e-3
    for k in range(model.n):
        e = (pred - run.effort_true)[moving[:, k], k]
        assert np.sqrt(np.mean(e ** 2)) < 1e-4 * np.sqrt(np.mean(run.effort_true[:, k] ** 2))


# ------------------------------------------------------------------ demo
def test_hybrid_demo_identifies_within_target_on_held_out_data():
    from robot_ident.demos.hybrid import HybridDemoSetup, run_hybrid_demo
    o = run_hybrid_demo(HybridDemoSetup(segments=3, validation_segments=1, design_evals=0,
                                        methods=("wls", "sobol-ls")))
    assert o.model.layout.size == 100 and 0 < o.base.size < 100
    assert o.max_violation < 1e-6
    assert sum(o.class_counts.values()) == 80 and o.class_counts["high"] == 24
    wls_ratio = o.outcomes["wls"].validation.noise_ratio
    assert (wls_ratio <= 1.3).all(), wls_ratio
    assert (wls_ratio >= 0.8).all(), wls_ratio        # cannot beat the noise: the figure is honest
    assert (o.outcomes["sobol-ls"].validation.noise_ratio <= 2.0).all()


def test_cli_accepts_hybrid5():
    from robot_ident.cli import build_parser
    args = build_parser().parse_args(["demo", "--robot", "hybrid5"])
    assert args.robot == "hybrid5"

"""Excitation design: criteria, gradients, dense limit check, optimisers, config, CLI."""
import numpy as np
import pytest
import yaml

from robot_ident.model.base import BaseParameters
from robot_ident.errors import ConfigError, TrajectoryError
from robot_ident.excitation import FourierTrajectory, LimitSpec, Margins, check_trajectory
from robot_ident.excitation.config import parse_excitation_config
from robot_ident.excitation.designer import DesignSpec, design_excitation, make_parameterisation
from robot_ident.excitation.optimizers import OptimizerResult, make_optimizer
from robot_ident.excitation.parameterisation import (FourierParameters, JointMovesParameters,
                                                     ModifiedFourierParameters, PolynomialParameters)
from robot_ident.excitation.problem import Budget, ExcitationProblem
from robot_ident.excitation.trajectory_file import load_trajectory
from robot_ident.model.robot import RobotModel

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow")
ACC = {"shoulder_pan": 8.0, "shoulder_lift": 8.0, "elbow": 10.0, "wrist_1": 12.0, "wrist_2": 12.0,
       "wrist_3": 12.0}


@pytest.fixture(scope="module")
def small(demo_urdf):
    model = RobotModel(demo_urdf, JOINTS)
    base = BaseParameters.from_model(model)
    limits = LimitSpec.from_model(model, ACC, Margins(position=0.05, velocity=0.05, acceleration=0.05))
    return model, base, limits


def _problem(small, criterion="cond", harmonics=2, param=None, **kw):
    model, base, limits = small
    param = param or FourierParameters(JOINTS, 0.2 * np.pi, harmonics)
    return ExcitationProblem(model, base, param, limits, criterion, n_samples=kw.pop("n_samples", 40),
                             n_constraint=kw.pop("n_constraint", 60), **kw)


# ---------------------------------------------------------------------------- criteria
@pytest.mark.parametrize("criterion", ["cond", "logdet"])
def test_criterion_values_match_the_model_regressor(small, criterion):
    model, base, _ = small
    pr = _problem(small, criterion)
    x = pr.random_start(np.random.default_rng(1))
    q, qd, qdd = pr.param.build(x).sample(pr.t_opt)
    W = base.regressor(model.regressor(q, qd, qdd))       # the model's own path, not the fast one
    f = pr.value(x)
    if criterion == "cond":
        assert np.exp(f) == pytest.approx(np.linalg.cond(W), rel=1e-9)
    else:
        sign, ld = np.linalg.slogdet(W.T @ W / len(pr.t_opt))
        assert sign > 0 and -f == pytest.approx(ld, rel=1e-9)


@pytest.mark.parametrize("criterion", ["cond", "logdet"])
def test_weighted_criterion_scales_rows(small, criterion):
    model, base, _ = small
    w = np.array([1.0, 3.0, 0.5])
    pr = _problem(small, criterion, joint_weights=w)
    x = pr.random_start(np.random.default_rng(2))
    q, qd, qdd = pr.param.build(x).sample(pr.t_opt)
    W = base.regressor(model.regressor(q, qd, qdd)) * np.tile(w, len(pr.t_opt))[:, None]
    expect = np.log(np.linalg.cond(W)) if criterion == "cond" else -np.linalg.slogdet(W.T @ W / len(pr.t_opt))[1]
    assert pr.value(x) == pytest.approx(expect, rel=1e-9)


@pytest.mark.parametrize("criterion", ["cond", "logdet"])
@pytest.mark.parametrize("family", ["fourier", "modified_fourier", "polynomial7"])
def test_gradient_matches_central_differences(small, criterion, family):
    model, base, limits = small
    spec = DesignSpec(family=family, harmonics=2, start_pose=(0.1, -0.2, 0.3), duration=6.0)
    pr = _problem(small, criterion, param=make_parameterisation(spec, JOINTS, limits))
    x = pr.random_start(np.random.default_rng(3))
    f, g = pr.value_and_grad(x)
    rng = np.random.default_rng(4)
    for _ in range(3):
        d = rng.normal(size=x.size)
        # Small step: the Coulomb column tanh(qd / 0.01) is strongly curved near qd = 0.
        d *= 1e-6 * np.linalg.norm(x) / np.linalg.norm(d)
        fd = (pr.value(x + d) - pr.value(x - d)) / 2
        assert g @ d == pytest.approx(fd, rel=5e-5)


def test_basis_reproduces_the_trajectory_states(small):
    model, base, limits = small
    for par in (FourierParameters(JOINTS, 0.5, 3), ModifiedFourierParameters(JOINTS, 0.5, 3, [0, 0.1, 0.2]),
                PolynomialParameters(JOINTS, 5.0, [0, 0.1, 0.2]), JointMovesParameters(JOINTS, [0, 0.1, 0.2])):
        x = np.random.default_rng(5).normal(size=par.n_vars)
        t = np.linspace(0, par.duration, 17)
        off, B = par.basis(t)
        for o, Bm, s in zip(off, B, par.build(x).sample(t)):
            np.testing.assert_allclose(o + Bm @ x, s, rtol=1e-10, atol=1e-10)
        assert np.array_equal(par.to_vector(par.build(x)), x)


# ------------------------------------------------------------------------ limits
def test_dense_check_catches_a_violation_between_optimisation_samples(small):
    """A velocity peak that falls between constraint-grid points: the grid constraints
    hold, the dense check does not, and the designer never returns it as valid."""
    model, base, _ = small
    T = 10.0
    # One fast harmonic per joint, phased so the velocity peaks fall mid-way between grid points.
    grid = np.linspace(0, T, 61)                   # step 1/6 s; |qd| peaks every 1 s
    t_peak = 0.5 * (grid[7] + grid[8])             # 1.25 s, 2.25 s, ...: never on the grid
    wf, L = 2 * np.pi / T, 5
    a = np.zeros((3, L))
    b = np.zeros((3, L))
    w5 = wf * L
    a[:, -1] = 1.0 * np.cos(w5 * t_peak)   # qd = A cos(w5 (t - t_peak))
    b[:, -1] = 1.0 * np.sin(w5 * t_peak)
    tr = FourierTrajectory(JOINTS, wf, np.zeros(3), a, b)
    _, qd_grid, _ = tr.sample(grid)
    _, qd_dense, _ = tr.sample(np.linspace(0, T, 20001))
    vmax_grid, vmax_dense = np.abs(qd_grid).max(), np.abs(qd_dense).max()
    assert vmax_dense > vmax_grid * 1.001
    vlim = 0.5 * (vmax_grid + vmax_dense)          # between the two
    limits = LimitSpec(JOINTS, [-3.0] * 3, [3.0] * 3, [vlim] * 3, [100.0] * 3, margins=Margins(0, 0, 0, 0))
    par = FourierParameters(JOINTS, wf, L)
    pr = ExcitationProblem(model, base, par, limits, n_samples=40, n_constraint=61)
    x = par.to_vector(tr)
    assert pr.kinematic_excess(x) == 0.0                           # the grid says: fine
    report = check_trajectory(tr, limits, model)
    assert not report.valid
    bad = report.violations()
    assert {r["quantity"] for r in bad} == {"velocity"}
    assert all(np.min(np.abs(grid - r["time"])) > 1e-3 for r in bad)   # found off the grid

    class Fixed:                                  # an "optimiser" returning exactly this vector
        def run(self, problem, budget, seed=0):
            return OptimizerResult("fixed", x.copy(), 0.0, 0.0, 0, 0.0)

    import robot_ident.excitation.designer as designer
    orig = designer.make_optimizer
    designer.make_optimizer = lambda name, **kw: Fixed()
    try:
        res = design_excitation(model, limits, DesignSpec(harmonics=L, base_frequency=wf, max_evals=1),
                                base=base, problem=pr)
    finally:
        designer.make_optimizer = orig
    assert res.report.valid
    # Independent, finer check of what was returned.
    _, qd_r, _ = res.trajectory.sample(np.linspace(0, T, 50001))
    assert np.abs(qd_r).max() <= vlim


def test_effort_limits_are_checked_with_the_nominal_model(small):
    model, base, limits = small
    pr = _problem(small)
    tr = pr.param.build(pr.random_start(np.random.default_rng(6)))
    t = np.linspace(0, tr.duration, 501)
    tau = model.efforts(*tr.sample(t))
    peak = np.abs(tau).max(0)
    eff_limits = LimitSpec(JOINTS, limits.lower, limits.upper, limits.velocity, limits.acceleration,
                           effort=peak / 0.9 * np.array([2.0, 2.0, 0.9]), margins=Margins(0.05, 0.05, 0.05, 0.1))
    rep = check_trajectory(tr, eff_limits, model)
    eff = {r["joint"]: r for r in rep.rows if r["quantity"] == "effort"}
    assert eff["shoulder_pan"]["ok"] and eff["shoulder_lift"]["ok"] and not eff["elbow"]["ok"]
    assert eff["elbow"]["worst"] >= peak[2] * 0.999 and not rep.valid


def test_design_with_effort_limits_keeps_nominal_efforts_inside(small):
    """Effort bounds below what an unconstrained design uses: the result respects them
    on the dense grid (nominal model)."""
    model, base, limits = small
    free = design_excitation(model, limits, DesignSpec(harmonics=2, max_evals=1500, max_time=None,
                                                       n_samples=30, n_constraint=60,
                                                       optimizer_options={"maxiter": 30}), base=base)
    t = np.linspace(0, free.trajectory.duration, 2001)
    peak = np.abs(model.efforts(*free.trajectory.sample(t))).max(0)
    gravity = np.abs(model.efforts(*free.trajectory.sample(t)[:1], np.zeros((len(t), 3)),
                                   np.zeros((len(t), 3)))).max(0)
    bound = np.maximum(0.8 * peak, 1.3 * gravity)            # tighter than the free design
    assert np.any(peak > bound)                              # the free design would violate
    eff_limits = LimitSpec(JOINTS, limits.lower, limits.upper, limits.velocity, limits.acceleration,
                           effort=bound / 0.9, margins=limits.margins)
    spec = DesignSpec(harmonics=2, max_evals=1500, max_time=None, n_samples=30, n_constraint=60,
                      optimizer_options={"maxiter": 30})
    res = design_excitation(model, eff_limits, spec, base=base)
    assert res.report.valid
    assert {r["quantity"] for r in res.report.rows} >= {"effort"}
    tau = model.efforts(*res.trajectory.sample(np.linspace(0, res.trajectory.duration, 4001)))
    assert np.all(np.abs(tau).max(0) <= bound * (1 + 1e-9))


def test_start_pose_is_checked(small):
    model, _, limits = small
    tr = FourierTrajectory(JOINTS, 0.5, np.zeros(3), np.zeros((3, 1)), np.full((3, 1), 0.1))
    rep = check_trajectory(tr, limits, model, start=np.zeros(3))
    assert not rep.valid and {r["quantity"] for r in rep.violations()} == {"start_pose"}


# -------------------------------------------------------------------- optimisers
@pytest.mark.parametrize("name", ["qga", "ga", "pso"])
def test_population_methods_improve_on_their_starting_population(small, name):
    pr = _problem(small)
    opts = {"qga": {"pop_size": 10}, "ga": {"pop_size": 20}, "pso": {"pop_size": 20}}[name]
    res = make_optimizer(name, **opts).run(pr, Budget(max_evals=500), seed=11)
    assert res.f < res.initial_f - 0.05          # log-cond improvement of > 5 %
    assert res.n_evals >= 500
    assert pr.kinematic_excess(res.x) <= 1e-12
    assert res.f == pytest.approx(pr.value(res.x), rel=1e-12)


def test_optimisers_are_reproducible_with_a_seed(small):
    runs = [make_optimizer("qga", pop_size=8).run(_problem(small), Budget(max_evals=120), seed=5)
            for _ in range(2)]
    assert np.array_equal(runs[0].x, runs[1].x) and runs[0].f == runs[1].f
    other = make_optimizer("qga", pop_size=8).run(_problem(small), Budget(max_evals=120), seed=6)
    assert not np.array_equal(other.x, runs[0].x)


def test_primary_method_improves_and_respects_the_grid_constraints(small):
    pr = _problem(small)
    res = make_optimizer("slsqp", maxiter=40).run(pr, Budget(max_evals=4000), seed=0)
    assert res.f < res.initial_f - 0.2      # initial: the best of 20 random feasible points
    assert pr.kinematic_excess(res.x) <= 1e-9


@pytest.mark.parametrize("family", ["modified_fourier", "polynomial7", "joint_moves"])
def test_design_other_families_returns_checked_trajectory_at_rest(small, family):
    model, base, limits = small
    start = (0.2, -0.3, 0.4)
    spec = DesignSpec(family=family, harmonics=2, start_pose=start, duration=6.0, max_evals=300,
                      max_time=None, optimizer="slsqp", n_samples=30, n_constraint=60,
                      optimizer_options={"maxiter": 10})
    res = design_excitation(model, limits, spec, base=base)
    assert res.report.valid and np.isfinite(res.cond)
    q, qd, qdd = res.trajectory.sample([0.0, res.trajectory.duration])
    np.testing.assert_allclose(q[0], start, atol=1e-12)
    np.testing.assert_allclose(qd, 0.0, atol=1e-10)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-10)


def test_unreachable_start_pose_is_refused(small):
    model, base, limits = small
    with pytest.raises(TrajectoryError, match="start pose"):
        design_excitation(model, limits, DesignSpec(family="modified_fourier", start_pose=(0, 2.5, 0)), base=base)


# ------------------------------------------------------------------------ config
def _cfg(**ex):
    e = {"acceleration_limits": dict(ACC)}
    e.update(ex)
    return {"robot_ident": {"ros__parameters": {"joints": list(JOINTS), "excitation": e}}}


def test_config_reads_excitation_keys():
    cfg = parse_excitation_config(_cfg(optimizer="qga", criterion="logdet", harmonics=3, base_frequency=0.5,
                                       margins={"position": 0.1, "velocity": 0.2},
                                       start_pose={"shoulder_pan": 0.1, "shoulder_lift": 0.2, "elbow": 0.3}))
    assert cfg.joints == JOINTS and cfg.margins.position == 0.1 and cfg.margins.velocity == 0.2
    spec = cfg.design_spec(("elbow", "shoulder_pan", "shoulder_lift"))
    assert spec.optimizer == "qga" and spec.criterion == "logdet" and spec.harmonics == 3
    assert spec.base_frequency == 0.5 and spec.start_pose == (0.3, 0.1, 0.2)
    assert cfg.acceleration_limits["elbow"] == 10.0


def test_config_dotted_keys_and_shared_acceleration_limits():
    doc = {"robot_ident": {"ros__parameters": {"excitation.harmonics": 4, "acceleration_limits": {"a": 2.0}}}}
    cfg = parse_excitation_config(doc)
    assert cfg.spec_kwargs["harmonics"] == 4 and cfg.acceleration_limits == {"a": 2.0}


@pytest.mark.parametrize("ex, key", [
    ({"harmonics": -1}, "excitation.harmonics"),
    ({"harmonics": 2.5}, "excitation.harmonics"),
    ({"optimizer": "annealing"}, "excitation.optimizer"),
    ({"criterion": "trace"}, "excitation.criterion"),
    ({"margins": {"velocity": 1.5}}, "excitation.margins.velocity"),
    ({"acceleration_limits": {"elbow": -1}}, "excitation.acceleration_limits.elbow"),
    ({"base_frequency": "fast"}, "excitation.base_frequency"),
    ({"harmonix": 5}, "harmonix"),
])
def test_config_errors_name_the_key(ex, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_excitation_config(_cfg(**ex))


# --------------------------------------------------------------------------- CLI
def test_cli_design_writes_a_checked_trajectory(tmp_path, demo_urdf, capsys):
    from robot_ident.cli import main
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(_cfg(harmonics=2, samples=30, constraint_points=50)))
    out = tmp_path / "traj.yaml"
    rc = main(["design", "--urdf", str(demo_urdf), "--config", str(cfg), "--output", str(out),
               "--optimizer", "qga", "--max-evals", "200", "--seed", "3"])
    assert rc == 0
    tf = load_trajectory(out)
    assert tf.trajectory.joint_names == JOINTS and tf.report.valid
    assert tf.optimizer["name"] == "qga" and tf.criterion["name"] == "cond"
    model = RobotModel(demo_urdf, JOINTS)
    rep = check_trajectory(tf.trajectory, LimitSpec.from_model(model, ACC, Margins()), model, dt=5e-4)
    assert rep.valid
    assert "cond" in capsys.readouterr().out


def test_cli_design_missing_acceleration_limit_names_the_key(tmp_path, demo_urdf, capsys):
    from robot_ident.cli import main
    doc = _cfg()
    del doc["robot_ident"]["ros__parameters"]["excitation"]["acceleration_limits"]["elbow"]
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    rc = main(["design", "--urdf", str(demo_urdf), "--config", str(cfg), "--output", str(tmp_path / "t.yaml")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "acceleration_limits" in err and "elbow" in err
    assert not (tmp_path / "t.yaml").exists()

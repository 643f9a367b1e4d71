"""Fast excitation design: the adjoint-order gradient, eigenvalue gradients, the minimax
(epigraph) SLSQP descent."""
import numpy as np
import pytest

from robot_ident.excitation import LimitSpec, Margins
from robot_ident.excitation.designer import DesignSpec, design_excitation
from robot_ident.excitation.fast_gradient import applies, eigen_log_gradients
from robot_ident.excitation.optimizers import make_optimizer
from robot_ident.excitation.parameterisation import FourierParameters
from robot_ident.excitation.problem import Budget, ExcitationProblem
from robot_ident.model.base import BaseParameters
from robot_ident.model.robot import FrictionOptions, RobotModel

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1")
ACC = {"shoulder_pan": 8.0, "shoulder_lift": 8.0, "elbow": 10.0, "wrist_1": 12.0}


@pytest.fixture(scope="module")
def setup(demo_urdf):
    model = RobotModel(demo_urdf, JOINTS)        # inertial + armature, Coulomb, viscous, offset
    base = BaseParameters.from_model(model)
    limits = LimitSpec.from_model(model, ACC, Margins(position=0.05, velocity=0.05, acceleration=0.05))
    return model, base, limits


def _problem(setup, criterion="cond", n_samples=30, **kw):
    model, base, limits = setup
    param = FourierParameters(JOINTS, 0.2 * np.pi, 2)
    return ExcitationProblem(model, base, param, limits, criterion, n_samples=n_samples, n_constraint=60, **kw)


def _states(pr, seed):
    x = pr.random_start(np.random.default_rng(seed))
    q, qd, qdd = pr.states(x)
    qd[0, 1] = 1e-4            # one velocity near zero: the Coulomb tanh column's curved part
    return q, qd, qdd


@pytest.mark.parametrize("criterion,smooth", [("cond", 0.0), ("cond", 16.0), ("logdet", 0.0)])
def test_adjoint_gradient_equals_the_reference_dY_path(setup, criterion, smooth):
    model, _, _ = setup
    pr = _problem(setup, criterion, joint_weights=[1.0, 2.0, 0.5, 3.0])
    ev = pr.evaluator
    assert applies(ev)
    q, qd, qdd = _states(pr, 1)
    fa, ga, ta, dta = ev.objective_with_state_gradient(q, qd, qdd, criterion, model.nominal, smooth)
    fr, gr, tr_, dtr = ev.objective_with_state_gradient(q, qd, qdd, criterion, model.nominal, smooth,
                                                        adjoint=False)
    assert fa == fr
    np.testing.assert_allclose(ga, gr, rtol=0, atol=1e-6 * np.abs(gr).max())
    np.testing.assert_allclose(ta, tr_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dta, dtr, rtol=0, atol=1e-6 * np.abs(dtr).max())


def test_adjoint_gradient_matches_central_differences_in_the_states(setup):
    pr = _problem(setup, "cond")
    ev = pr.evaluator
    q, qd, qdd = _states(pr, 2)
    _, gz, _, _ = ev.objective_with_state_gradient(q, qd, qdd, "cond", None, 16.0)
    rng = np.random.default_rng(3)
    d = rng.normal(size=(3,) + q.shape) * 1e-5

    def f_at(s):
        return ev.objective_with_state_gradient(q + s * d[0], qd + s * d[1], qdd + s * d[2], "cond",
                                                None, 16.0)[0]

    fd = (f_at(1.0) - f_at(-1.0)) / 2
    n = q.shape[1]
    lin = np.sum(gz[:, :n] * d[0]) + np.sum(gz[:, n:2 * n] * d[1]) + np.sum(gz[:, 2 * n:] * d[2])
    assert lin == pytest.approx(fd, rel=1e-4)


@pytest.mark.parametrize("fast,rigid", [(True, False), (False, False), (True, True)])
def test_eigenvalue_gradients_match_central_differences(setup, demo_urdf, fast, rigid):
    """d log lam_i / dx for the extreme eigenvalues, on the fast (adjoint) path and on the
    general dY path, against central differences of numpy's eigenvalues; also for a model
    with rigid-body parameters only (no actuator columns)."""
    if rigid:
        model = RobotModel(demo_urdf, JOINTS, friction=FrictionOptions(armature=False, coulomb=False,
                                                                       viscous=False, offset=False))
        setup = (model, BaseParameters.from_model(model), setup[2])
    pr = _problem(setup, "cond")
    ev = pr.evaluator
    if not fast:
        ev._perm = None            # force the general path (as for coupled or continuous joints)
        assert not applies(ev)
    x = pr.random_start(np.random.default_rng(4))
    p = len(pr.base.independent)
    idx = np.r_[np.arange(p - 3, p), np.arange(3)]
    _, gz = eigen_log_gradients(ev, *pr.states(x), idx)
    gx = np.einsum("szm,szk->mk", gz, pr._Bz)

    def loglam(xx):
        W = ev.base_regressor(*pr.states(xx))
        return np.log(np.linalg.eigvalsh(W.T @ W))[idx]

    rng = np.random.default_rng(5)
    for _ in range(2):
        d = rng.normal(size=x.size)
        d *= 1e-6 * np.linalg.norm(x) / np.linalg.norm(d)
        fd = (loglam(x + d) - loglam(x - d)) / 2
        np.testing.assert_allclose(gx @ d, fd, rtol=1e-4, atol=1e-6 * np.abs(fd).max())


def test_minimax_descent_improves_respects_the_grid_and_is_reproducible(setup):
    pr = _problem(setup, "cond")
    res = make_optimizer("slsqp").run(pr, Budget(max_evals=1500), seed=0)
    assert res.info["form"] == "minimax"
    assert res.f < res.initial_f - 0.1            # initial: the best of 20 random feasible points
    assert pr.kinematic_excess(res.x) <= 1e-9
    assert res.f == pytest.approx(pr.value(res.x), rel=1e-12)     # reported on the problem's own grid
    again = make_optimizer("slsqp").run(_problem(setup, "cond"), Budget(max_evals=1500), seed=0)
    assert np.array_equal(res.x, again.x)


def test_minimax_beats_the_surrogate_at_equal_evaluations(setup):
    """The reason it is the default: same starts, same evaluation budget, lower cond on a
    dense grid (1000 samples, not the optimisation grid)."""
    conds = {}
    for form in ("minimax", "surrogate"):
        pr = _problem(setup, "cond")
        res = make_optimizer("slsqp", form=form).run(pr, Budget(max_evals=2000), seed=1)
        conds[form] = pr.criterion_report(res.x, 1000)[0]
    assert conds["minimax"] < conds["surrogate"]


def test_short_default_design_returns_a_checked_trajectory(setup):
    model, base, limits = setup
    spec = DesignSpec(harmonics=2, max_evals=1500, max_time=None, n_samples=30, n_constraint=60)
    assert spec.optimizer == "slsqp"
    res = design_excitation(model, limits, spec, base=base)
    assert res.report.valid and res.optimizer.info["form"] == "minimax"
    assert np.isfinite(res.cond) and res.cond < np.exp(res.optimizer.initial_f)
    t = np.linspace(0, res.trajectory.duration, 20001)        # independent, finer than the 1 ms check
    q, qd, qdd = res.trajectory.sample(t)
    b = limits.bounds()
    assert np.all(q >= b.lower - 1e-12) and np.all(q <= b.upper + 1e-12)
    assert np.all(np.abs(qd) <= b.velocity + 1e-12) and np.all(np.abs(qdd) <= b.acceleration + 1e-12)


def test_logdet_keeps_the_smooth_descent(setup):
    pr = _problem(setup, "logdet")
    res = make_optimizer("slsqp", maxiter=30).run(pr, Budget(max_evals=1500), seed=0)
    assert "form" not in res.info and res.f < res.initial_f


def test_adjoint_gradient_without_actuator_columns(demo_urdf, setup):
    model = RobotModel(demo_urdf, JOINTS, friction=FrictionOptions(armature=False, coulomb=False,
                                                                   viscous=False, offset=False))
    pr = _problem((model, BaseParameters.from_model(model), setup[2]), "cond")
    q, qd, qdd = _states(pr, 7)
    _, ga, _, dta = pr.evaluator.objective_with_state_gradient(q, qd, qdd, "cond", model.nominal, 16.0)
    _, gr, _, dtr = pr.evaluator.objective_with_state_gradient(q, qd, qdd, "cond", model.nominal, 16.0,
                                                                  adjoint=False)
    np.testing.assert_allclose(ga, gr, rtol=0, atol=1e-6 * np.abs(gr).max())
    np.testing.assert_allclose(dta, dtr, rtol=0, atol=1e-6 * np.abs(dtr).max())


@pytest.mark.parametrize("form", ["auto", "minimax"])
def test_effort_constraints_pick_the_descent_and_are_kept(setup, form):
    """auto: effort (like collision) constraints keep the surrogate descent; a forced
    minimax descent keeps the nominal efforts inside their bound too."""
    model, base, limits = setup
    pr0 = _problem(setup, "cond")
    x0 = pr0.random_start(np.random.default_rng(8))
    tau0 = np.abs(model.efforts(*pr0.states(x0))).max(0)
    eff = LimitSpec(JOINTS, limits.lower, limits.upper, limits.velocity, limits.acceleration,
                    effort=3.0 * tau0, margins=limits.margins)
    pr = ExcitationProblem(model, base, FourierParameters(JOINTS, 0.2 * np.pi, 2), eff, "cond", n_samples=30,
                           n_constraint=60)
    assert pr.effort_bound is not None
    res = make_optimizer("slsqp", form=form, maxiter=20).run(pr, Budget(max_evals=800), seed=0)
    assert res.info.get("form") == ("minimax" if form == "minimax" else None)
    assert pr.effort_excess(res.x) == 0 and pr.kinematic_excess(res.x) <= 1e-9
    assert res.f < res.initial_f


@pytest.mark.parametrize("factor,dropped", [(1.02, True), (0.9, False)])
def test_implied_acceleration_rows_leave_the_feasible_set_unchanged(setup, factor, dropped):
    """The optimiser's QP leaves out a joint's acceleration rows only where its velocity
    rows imply them (Bernstein's inequality). Acceleration limits just above (1.02 x) and
    below (0.9 x) L wf times the velocity limit. Checked by linear programming: the
    largest qdd any coefficient vector satisfying the reduced rows can reach, on a 1 ms
    grid between the constraint points, stays within the acceleration limit (a rule that
    dropped the rows at 0.9 x would let the LP reach 112 % of it)."""
    from scipy.optimize import linprog
    model, base, _ = setup
    L, wf = 3, 0.2 * np.pi
    margins = Margins(position=0.05, velocity=0.05, acceleration=0.05)
    vel = LimitSpec.from_model(model, {j: 1.0 for j in JOINTS}, margins).velocity
    acc = {j: factor * L * wf * v for j, v in zip(JOINTS, vel)}
    limits = LimitSpec.from_model(model, acc, margins)
    param = FourierParameters(JOINTS, wf, L)
    pr = ExcitationProblem(model, base, param, limits, "cond", n_samples=30, n_constraint=60)
    A, b = pr.linear_constraints()
    Ar, br = pr.linear_constraints(implied=True)
    implied = param.acceleration_implied(pr.bounds, float(np.diff(pr.t_con).max()))
    assert implied.all() == dropped and implied.any() == dropped
    assert len(Ar) == (len(A) * 2 // 3 if dropped else len(A))
    # dropped: the sup between the constraint points; kept: the rows themselves hold the
    # limit on the grid (the designer's dense check handles what lies between)
    t = np.arange(0.0, param.duration, 1e-3) if dropped else pr.t_con
    (_, _, qdd0), (_, _, Bqdd) = param.basis(t)
    lo, hi = pr.box
    for j in range(len(JOINTS)):
        g = Bqdd[:, j, :]
        k = int(np.argmax(np.abs(g).sum(1)))          # the time the joint's qdd reacts most to x
        res = linprog(-g[k], A_ub=Ar, b_ub=br, bounds=list(zip(lo, hi)), method="highs")
        assert res.status == 0
        reach = np.abs(qdd0[:, j] + g @ res.x).max() / pr.bounds.acceleration[j]
        assert reach <= 1 + 1e-9, (JOINTS[j], reach)
        if dropped:       # tight: the velocity rows alone nearly reach the limit
            assert reach > 0.95, (JOINTS[j], reach)


def test_families_that_are_not_trigonometric_polynomials_keep_their_acceleration_rows(setup):
    """Only the plain Fourier series qualifies (Bernstein's inequality is about
    trigonometric polynomials): the modified series adds a quintic (rest at both ends),
    the others are polynomials or moves; all keep their acceleration rows, also at 1.02x
    the Fourier threshold."""
    from robot_ident.excitation.designer import DesignSpec, make_parameterisation
    model, base, _ = setup
    L, wf = 3, 0.2 * np.pi
    margins = Margins(position=0.05, velocity=0.05, acceleration=0.05)
    vel = LimitSpec.from_model(model, {j: 1.0 for j in JOINTS}, margins).velocity
    limits = LimitSpec.from_model(model, {j: 1.02 * L * wf * v for j, v in zip(JOINTS, vel)}, margins)
    for family in ("modified_fourier", "polynomial7", "joint_moves"):
        param = make_parameterisation(DesignSpec(family=family, harmonics=L, base_frequency=wf), JOINTS, limits)
        pr = ExcitationProblem(model, base, param, limits, "cond", n_samples=30, n_constraint=60)
        assert not param.acceleration_implied(pr.bounds, float(np.diff(pr.t_con).max())).any(), family
        assert len(pr.linear_constraints(implied=True)[0]) == len(pr.linear_constraints()[0]), family


def test_design_progress_says_how_long_is_left_and_never_more_than_the_budget():
    """Issue 29 item 5: `design` shows progress with an ETA; a phase's share never reads
    above 100 % (an optimiser's last step may end past the budget: "139 %" was seen)."""
    from types import SimpleNamespace

    from robot_ident.excitation.search import Tracker
    lines = []
    problem = SimpleNamespace(progress=lines.append, progress_at=-1e9, criterion="cond", n_evals=40, elapsed=10.0,
                              used_fraction=lambda: 0.25)
    t = Tracker(problem)
    t.offer(np.log(57.0), np.zeros(2))
    assert lines[-1] == "best cond 57 so far, 40 evaluations, 25 % of this phase's budget, about 30 s left"
    problem.used_fraction, problem.progress_at = (lambda: 1.39), -1e9
    t.offer(np.log(50.0), np.zeros(2))
    assert lines[-1].endswith("100 % of this phase's budget, finishing its last step")

"""Physically consistent, robust, recursive and sensitivity + GA estimators, checked
against known truth."""
import numpy as np
import pinocchio as pin
import pytest

from conftest import random_states
from robot_ident.estimation import build_problem, irls, physically_consistent, recursive_estimate, sensitivity_ga, wls
from robot_ident.estimation.physical import (dynamic_from_log_cholesky, is_physical, log_cholesky_from_dynamic,
                                             pseudo_inertia)
from robot_ident.io.urdf_export import write_parameters
from robot_ident.model.robot import RobotModel
from robot_ident.estimation.sensitivity import classify, sobol_indices
from robot_ident.data.signals import ProcessedData


def truth_theta(model, seed=0):
    """A physical arm that differs from the CAD (masses +-20 %, a payload on the last body)."""
    rng = np.random.default_rng(seed)
    theta = model.nominal.copy()
    for b in model.layout.body_joints:
        I = model.body_inertia(theta, b)
        f = 1 + rng.uniform(-0.2, 0.2)
        theta[model.layout.inertial_slice(b)] = pin.Inertia(I.mass * f, I.lever + rng.uniform(-0.01, 0.01, 3),
                                                            I.inertia * f).toDynamicParameters()
    last = model.layout.inertial_slice(model.layout.body_joints[-1])
    theta[last] += pin.Inertia(1.0, np.array([0.0, 0.1, 0.0]), np.eye(3) * 1e-3).toDynamicParameters()
    for j in model.joint_names:
        theta[model.layout.index(f"{j}.Fc")] *= 1.3
        theta[model.layout.index(f"{j}.Ia")] = 0.05
        theta[model.layout.index(f"{j}.off")] = 0.1
    return theta


def synthetic(model, theta, n=600, rel_noise=0.01, seed=1, outliers=0.0):
    q, qd, qdd = random_states(model, n, seed=seed, vel=1.5, acc=6)
    tau = model.efforts(q, qd, qdd, theta)
    rng = np.random.default_rng(seed + 7)
    sigma = rel_noise * np.sqrt(np.mean(tau ** 2, axis=0))
    meas = tau + rng.normal(size=tau.shape) * sigma
    if outliers:
        hit = rng.random(tau.shape) < outliers
        # one-sided glitches (e.g. a current sensor saturating), 100 noise std high
        meas[hit] += 100 * np.broadcast_to(sigma, tau.shape)[hit]
    return ProcessedData(np.arange(n) * 0.01, model.joint_names, q, qd, qdd, meas, meas), sigma


def validation_ratio(result, model, theta, sigma, seed=50):
    data, _ = synthetic(model, theta, n=400, rel_noise=0.0, seed=seed)
    pred = result.predict(model, data.q, data.qd, data.qdd)
    return np.sqrt(np.mean((pred - data.effort) ** 2, axis=0) + sigma ** 2) / sigma


# ------------------------------------------------------------------ log-Cholesky
def test_log_cholesky_map_matches_pinocchio_and_finite_differences():
    rng = np.random.default_rng(0)
    for _ in range(5):
        eta = rng.normal(size=10)
        theta, jac = dynamic_from_log_cholesky(eta)
        if hasattr(pin, "LogCholeskyParameters"):
            lc = pin.LogCholeskyParameters(eta)
            np.testing.assert_allclose(theta, lc.toDynamicParameters(), atol=1e-12)
            np.testing.assert_allclose(jac, lc.calculateJacobian(), atol=1e-10)
        h = 1e-7
        fd = np.array([(dynamic_from_log_cholesky(eta + h * e)[0] - theta) / h for e in np.eye(10)]).T
        np.testing.assert_allclose(jac, fd, atol=1e-5 * max(1, np.abs(jac).max()))
        np.testing.assert_allclose(log_cholesky_from_dynamic(theta), eta, atol=1e-9)
        assert is_physical(theta)


def test_pseudo_inertia_detects_triangle_inequality_violation():
    # principal moments 1, 1, 3 about the centre of mass: 1 + 1 < 3
    bad = pin.Inertia(1.0, np.zeros(3), np.diag([1.0, 1.0, 3.0])).toDynamicParameters()
    assert np.linalg.eigvalsh(pseudo_inertia(bad))[0] < 0 and not is_physical(bad)


# --------------------------------------------------------- physically consistent
def test_physical_estimate_is_feasible_even_from_infeasible_cad(model, base):
    theta = truth_theta(model)
    data, sigma = synthetic(model, theta)
    problem = build_problem(model, base, data)
    bad_prior = problem.prior.copy()
    bad_prior[model.layout.inertial_slice("elbow")][0] = -2.0                         # negative mass
    sl = model.layout.inertial_slice("wrist_1")
    bad_prior[sl] = pin.Inertia(1.0, np.zeros(3), np.diag([1e-3, 1e-3, 5e-3])).toDynamicParameters()  # triangle
    problem.prior = bad_prior
    res = physically_consistent(problem)
    for b in model.layout.body_joints:
        assert is_physical(res.standard_values[model.layout.inertial_slice(b)]), b
    for name in model.layout.names[60:]:
        if name.rsplit(".", 1)[1] in ("Ia", "Fc", "Fv"):
            assert res.standard_values[model.layout.index(name)] >= 0, name
    ref = wls(build_problem(model, base, data))
    r_phys = validation_ratio(res, model, theta, sigma)
    r_wls = validation_ratio(ref, model, theta, sigma)
    assert np.all(r_phys <= 1.05 * r_wls), (r_phys, r_wls)


def test_identified_urdf_reproduces_the_estimators_efforts(model, base):
    theta = truth_theta(model, seed=3)
    data, _ = synthetic(model, theta, seed=4)
    res = physically_consistent(build_problem(model, base, data))
    xml, report = write_parameters(model, res.standard_values)
    assert not report.kept_cad
    loaded = RobotModel(xml)                       # loads in Pinocchio
    np.testing.assert_allclose(loaded.nominal[:60], res.standard_values[:60], atol=1e-9)
    # The URDF carries the inertias, Coulomb and viscous friction; armature and offsets
    # are in result.yaml. Together they reproduce the estimator's prediction.
    th = loaded.nominal.copy()
    for j in model.joint_names:
        for s in ("Ia", "off"):
            th[loaded.layout.index(f"{j}.{s}")] = res.standard_values[model.layout.index(f"{j}.{s}")]
    q, qd, qdd = random_states(model, 30, seed=9)
    np.testing.assert_allclose(loaded.efforts(q, qd, qdd, th), res.predict(model, q, qd, qdd), atol=1e-8)


# ------------------------------------------------------------------------ robust
def test_robust_estimator_resists_outliers_where_wls_does_not(model, base):
    theta = truth_theta(model, seed=5)
    data, sigma = synthetic(model, theta, n=800, outliers=0.01, seed=6)
    problem = build_problem(model, base, data)
    r_rob = validation_ratio(irls(problem), model, theta, sigma)
    r_wls = validation_ratio(wls(problem), model, theta, sigma)
    assert np.all(r_rob <= 1.3), r_rob
    assert np.any(r_wls > 1.3), r_wls


# --------------------------------------------------------------------- recursive
def test_rls_converges_to_batch_wls(model, base):
    theta = truth_theta(model, seed=8)
    data, _ = synthetic(model, theta, n=800, seed=9)
    problem = build_problem(model, base, data)
    batch = wls(problem)
    online = recursive_estimate(problem, sigma=batch.joint_sigma)
    good = batch.relative_std < 5
    assert good.sum() > 20
    rel = np.abs(online.values - batch.values)[good] / np.abs(batch.values[good])
    assert rel.max() < 0.01, rel.max()


# ---------------------------------------------------------------- sensitivity
def test_sobol_indices_of_a_linear_model_match_the_analytic_values():
    a = np.array([1.0, -2.0, 0.5, 0.0, 3.0])
    lo = np.array([0.0, -1.0, 2.0, 0.0, 1.0])
    hi = np.array([1.0, 1.0, 4.0, 1.0, 1.5])
    var = a ** 2 * (hi - lo) ** 2 / 12
    exact = var / var.sum()
    names = [f"x{i}" for i in range(5)]
    scalar = sobol_indices(lambda X: X @ a, names, lo, hi, n=4096, seed=1)          # SALib's analyze
    np.testing.assert_allclose(scalar.S1, exact, atol=0.02)
    np.testing.assert_allclose(scalar.ST, exact, atol=0.02)
    # Vector output y_k = c_k * (a . x): every output has the same indices.
    c = np.array([1.0, 2.0, -0.5])
    vec = sobol_indices(lambda X: np.outer(X @ a, c), names, lo, hi, n=4096, seed=1)
    np.testing.assert_allclose(vec.S1, exact, atol=0.02)
    np.testing.assert_allclose(vec.ST, exact, atol=0.02)
    assert vec.ST[3] == 0.0


def test_classification_follows_the_configured_fractions():
    st = np.array([0.5, 0.01, 0.2, 0.0, 0.05, 0.3, 0.001, 0.1, 0.02, 0.0])
    cls = classify(st, 0.3, 0.2)
    assert list(np.flatnonzero(cls == "high")) == [0, 2, 5]
    assert set(np.flatnonzero(cls == "zero")) == {3, 9}
    assert (cls == "low").sum() == 5
    cls2 = classify(st, 0.5, 0.1)
    assert (cls2 == "high").sum() == 5 and (cls2 == "zero").sum() == 1


def test_sensitivity_ga_recovers_a_model_whose_low_parameters_are_at_cad(model, base):
    """When the CAD is right for the parameters the GA does not estimate, source A's
    pipeline recovers the others: here the truth differs from the CAD only in friction,
    offsets and the masses the Sobol analysis ranks high."""
    theta = model.nominal.copy()
    for j in model.joint_names:
        theta[model.layout.index(f"{j}.Fc")] *= 1.4
        theta[model.layout.index(f"{j}.Fv")] *= 0.7
        theta[model.layout.index(f"{j}.off")] = 0.2
    data, sigma = synthetic(model, theta, n=500, seed=12)
    problem = build_problem(model, base, data)
    exact = sensitivity_ga(problem, solver="ls")
    assert exact.extra["class_counts"] == {"high": 18, "low": 30, "zero": 12}
    assert np.all(validation_ratio(exact, model, theta, sigma) < 1.1)
    for j in model.joint_names:
        k = model.layout.index(f"{j}.Fc")
        assert exact.standard_values[k] == pytest.approx(theta[k], rel=0.02)
    ga = sensitivity_ga(problem, generations=200, seed=2)
    assert ga.extra["class_counts"] == exact.extra["class_counts"]
    # The GA improves on its starting population by orders of magnitude, and does not
    # beat the exact optimum of the same objective.
    assert ga.extra["weighted_cost"] < 1e-2 * ga.extra["initial_population_best_cost"]
    assert ga.extra["weighted_cost"] >= exact.extra["weighted_cost"] * (1 - 1e-9)


def test_interior_point_reaches_an_optimum_on_the_feasibility_boundary():
    """min |theta - target|^2 over a physical body, with an infeasible target (negative
    principal moment about the centre of mass): the optimum is on the boundary. No
    feasible direction from the returned point lowers the cost (first-order optimality)."""
    from robot_ident.estimation import lmi_barrier
    from robot_ident.estimation.physical import _pseudo_basis
    target = pin.Inertia(2.0, np.array([0.1, 0.0, 0.05]), np.diag([0.02, 0.03, 0.01])).toDynamicParameters()
    target[9] -= 0.03                                 # Izz about the centre of mass becomes -0.02
    assert not is_physical(target)
    start = pin.Inertia(1.0, np.zeros(3), np.eye(3) * 0.01).toDynamicParameters()
    body = lmi_barrier.LMIBlock(np.arange(10), _pseudo_basis(), np.zeros((4, 4)))     # pseudo-inertia >= 0
    theta = lmi_barrier.solve(lmi_barrier.BarrierProblem(np.eye(10), target, [body], None, None), start, gap=1e-10).x
    assert is_physical(theta)
    ev = np.linalg.eigvalsh(pseudo_inertia(theta))
    assert ev[0] < 1e-6 * ev[-1]                     # on the boundary
    f = lambda th: np.sum((th - target) ** 2)  # noqa: E731
    rng = np.random.default_rng(0)
    for _ in range(300):
        cand = theta + 1e-3 * rng.normal(size=10)
        if np.linalg.eigvalsh(pseudo_inertia(cand))[0] >= 0:
            assert f(cand) >= f(theta) - 1e-9

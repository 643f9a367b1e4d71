"""Source A's pipeline: Sobol sensitivity classes, then a genetic algorithm.

1. Sobol indices of the inertial part of the effort model (every joint at a subset of
   the identification samples) with respect to each standard inertial parameter,
   each ranging over CAD +- `rel_range` x a typical magnitude of its kind (mass: the CAD
   mass; first moments: 5 % of it in metres; inertias: 2.5e-3 m^2 of it, or the CAD
   value when larger).
2. Classes by total index: high (top 30 %), zero (bottom 20 %), low (the rest).
3. Zero- and low-sensitivity parameters stay at their CAD values; the high ones and
   every actuator parameter (armature, Coulomb, viscous, offset) are estimated by a
   genetic algorithm (pymoo GA) minimising the weighted squared effort error, searching
   CAD +- `search_range` typical magnitudes (wider than the Sobol range: a payload can
   triple the last link's mass).

Search ranges for actuator terms come from the data: a term's upper bound is the
value at which it alone would explain the joint's whole effort RMS (armature, Coulomb
and viscous are non-negative; offsets are symmetric).
The data are compressed once by a QR decomposition of the weighted standard
regressor, so a whole population is evaluated with one matrix product.
Standard deviations: linearised, s^2 (W_f^T S^-2 W_f)^-1 over the free parameters.
"""
from __future__ import annotations

import numpy as np

from ..errors import IdentificationError
from .least_squares import _per_joint, wls
from .physical import _parameter_scale
from .problem import IdentificationProblem, require_rows
from .result import IdentificationResult
from .sensitivity import classify, sobol_indices
from .uncertainty import hac_covariance


def _actuator_bounds(problem: IdentificationProblem, names) -> tuple[np.ndarray, np.ndarray]:
    Ws, y, joint = problem.W_standard, problem.y, problem.joint_of_row
    lo, hi = [], []
    for name in names:
        col = problem.layout.index(name)
        j, sym = name.rsplit(".", 1)
        rows = joint == problem.joint_names.index(j)
        y_rms = np.sqrt(np.mean(y[rows] ** 2))
        c_rms = np.sqrt(np.mean(Ws[rows, col] ** 2))
        ub = y_rms / c_rms if c_rms > 0 else 0.0
        if sym == "off":
            lo.append(-ub)
            hi.append(ub)
        else:
            lo.append(0.0)
            hi.append(ub)
    return np.array(lo), np.array(hi)


def sensitivity_ga(problem: IdentificationProblem, high_fraction: float = 0.3, zero_fraction: float = 0.2,
                   rel_range: float = 0.5, search_range: float = 3.0, sobol_n: int = 512, sobol_rows: int = 240,
                   pop_size: int = 120, generations: int = 400, seed: int = 0,
                   solver: str = "ga") -> IdentificationResult:
    """solver 'ga': source A's genetic algorithm; 'ls': the same objective and bounds solved
    exactly (bounded linear least squares), to tell the GA's convergence from the method's
    own limit (low-sensitivity parameters held at CAD values)."""
    from pymoo.algorithms.soo.nonconvex.ga import GA
    from pymoo.core.problem import Problem
    from pymoo.optimize import minimize

    require_rows(problem, f"sobol-{solver}")
    if problem.W_standard is None or problem.layout is None or problem.prior is None:
        raise IdentificationError("the sensitivity + GA estimator needs the standard regressor and the CAD prior")
    layout = problem.layout
    nb = len(layout.body_joints)
    ni = 10 * nb
    prior = problem.prior
    scale = _parameter_scale(prior, nb)

    # 1-2. Sobol classes of the inertial parameters.
    rows = np.linspace(0, problem.n_rows - 1, min(sobol_rows, problem.n_rows)).astype(int)
    Wi = problem.W_standard[rows, :ni]
    lo_i = prior[:ni] - rel_range * scale[:ni]
    hi_i = prior[:ni] + rel_range * scale[:ni]
    idx = sobol_indices(lambda X: X @ Wi.T, layout.names[:ni], lo_i, hi_i, n=sobol_n, seed=seed)
    classes = classify(idx.ST, high_fraction, zero_fraction)

    # 3. GA on the high inertial parameters and all actuator parameters.
    first = wls(problem)
    w = 1.0 / first.joint_sigma[problem.joint_of_row]
    Q, R = np.linalg.qr(problem.W_standard * w[:, None], mode="reduced")
    z = Q.T @ (problem.y * w)
    rest_ss = float(np.sum((problem.y * w) ** 2) - z @ z)
    free = np.concatenate([np.flatnonzero(classes == "high"), np.arange(ni, layout.size)])
    act_names = layout.names[ni:]
    lo_a, hi_a = _actuator_bounds(problem, act_names)
    high = classes == "high"
    xl = np.concatenate([(prior[:ni] - search_range * scale[:ni])[high], lo_a])
    xu = np.concatenate([(prior[:ni] + search_range * scale[:ni])[high], hi_a])
    degenerate = np.flatnonzero(~(xu > xl))
    if degenerate.size:
        raise IdentificationError(f"empty GA search range for {layout.names[free[degenerate[0]]]!r} "
                                  "(the joint's data do not excite it)")
    theta_fixed = prior.copy()

    class _Cost(Problem):
        def __init__(self):
            super().__init__(n_var=free.size, n_obj=1, xl=xl, xu=xu)

        def _evaluate(self, X, out, *args, **kwargs):
            T = np.repeat(theta_fixed[None, :], X.shape[0], axis=0)
            T[:, free] = X
            E = T @ R.T - z
            out["F"] = np.sum(E * E, axis=1)

    Rf = R[:, free]
    rhs = z - R @ theta_fixed + Rf @ theta_fixed[free]
    if solver == "ga":
        # Best of a uniform random population like the GA's initial one, to show the gain.
        X0 = np.random.default_rng(seed).uniform(xl, xu, size=(pop_size, free.size))
        res_extra = {"ga_generations": generations, "ga_population": pop_size,
                     "initial_population_best_cost": float(np.min(np.sum((X0 @ Rf.T - rhs) ** 2, axis=1))) + rest_ss}
        algo = GA(pop_size=pop_size, eliminate_duplicates=True)
        sol = minimize(_Cost(), algo, ("n_gen", generations), seed=seed, verbose=False, save_history=False)
        x_free = np.atleast_2d(sol.X)[0]
    elif solver == "ls":
        from scipy.optimize import lsq_linear
        x_free = lsq_linear(Rf, rhs, bounds=(xl, xu)).x
        res_extra = {}
    else:
        raise IdentificationError(f"unknown sensitivity solver {solver!r}; use 'ga' or 'ls'")
    theta = theta_fixed.copy()
    theta[free] = x_free
    cost = float(np.sum((Rf @ x_free - rhs) ** 2))

    M = problem.n_rows
    P = problem.base.projection
    G = P[:, free]
    values = P @ theta
    r = problem.y - problem.W @ values
    # autocorrelation-consistent sandwich of the weighted problem in the free parameters
    cov_free, hac = hac_covariance(problem.W_standard[:, free] * w[:, None], r * w, np.linalg.pinv(Rf.T @ Rf),
                                   problem.sample_of_row, problem.joint_of_row, len(problem.joint_names))
    cov = G @ cov_free @ G.T
    rms, sig = _per_joint(problem, r)
    res = IdentificationResult(method=f"sobol-{solver}", base=problem.base, values=values,
                               std=np.sqrt(np.clip(np.diag(cov), 0, None)), covariance=cov,
                               condition_number=first.condition_number, n_samples=problem.n_samples,
                               n_rows=M, joint_names=problem.joint_names, residual_rms=rms, joint_sigma=sig,
                               standard_values=theta)
    res.extra.update(res_extra)
    res.extra.update(hac)
    counts = {c: int(np.sum(classes == c)) for c in ("high", "low", "zero")}
    res.extra.update({
        "sensitivity": {n: {"S1": float(a), "ST": float(b), "class": str(c)}
                        for n, a, b, c in zip(idx.names, idx.S1, idx.ST, classes)},
        "class_counts": counts, "sobol_evaluations": idx.n_evaluations,
        "solver": solver, "weighted_cost": cost + rest_ss,
        "wls_weighted_cost": float(np.sum(((problem.y - problem.W @ first.values) * w) ** 2)),
    })
    return res

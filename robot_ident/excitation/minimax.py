"""One SLSQP descent of log cond in its epigraph (minimax) form.

log cond(W) = 1/2 (log lam_max - log lam_min) with lam the eigenvalues of W^T W. It is
not smooth where the extreme eigenvalues cross, which is exactly where a good design
ends up (several singular values clustered at both ends). Instead of smoothing it (the
p-norm surrogate of `MultiStartSLSQP(form="surrogate")`, whose minimiser is biased and
whose curvature grows with p), the descent works on

    minimise  u - l   over (x, u, l)
    subject to  2 u - log lam_i(x) >= 0   for the kt largest eigenvalues,
                log lam_i(x) - 2 l >= 0   for the kb smallest,
                A x <= b (limits on the constraint grid), efforts, collisions,

whose constraints are smooth wherever the eigenvalues are distinct; SLSQP's active
set then handles the crossing eigenvalues (the standard SQP treatment of eigenvalue
minimax problems). Constraining kt, kb > 1 ranked eigenvalues gives the QP a view of
the ones about to become extreme. Measured on the Panda (69 base parameters, 50
samples, same start): this descent reached cond 31.4 (on its grid) after 4.7 s CPU; the
surrogate descent (p = 64) was at 33.9 then and first got below 31.5 after 19.7 s.

Evaluations are lazy: SLSQP's line search asks for constraint values only (one
regressor per sample, charged 1 evaluation), the Jacobian only at accepted iterates
(3n + 1 regressors per sample via `fast_gradient.eigen_log_gradients`); on the Panda
SLSQP asked for 353 values and 98 Jacobians in one profiled run.
"""
from __future__ import annotations

import warnings

import numpy as np

from .fast_gradient import eigen_log_gradients


class StopDescent(Exception):
    """Raised from inside the SLSQP callbacks to end a descent (budget phase over or stalled)."""


def minimax_descent(problem, x0, extra_cons, stop, on_point, kt: int = 10, kb: int = 10,
                    maxiter: int = 3000, ftol: float = 1e-9, stall: int = 100, stall_tol: float = 2e-3):
    """Descend log cond from x0 (feasible) on the problem's current optimisation grid.

    ``extra_cons``: SLSQP inequality constraints in x (effort, collision); ``stop()``
    ends the descent; ``on_point(log_cond, x)`` sees every evaluated point. The descent
    also ends when the best log cond improved by less than ``stall_tol`` over the last
    ``stall`` evaluations (then a new start is a better use of the time)."""
    from scipy.optimize import minimize

    lo, hi = problem.box
    span = np.maximum(hi - lo, 1e-12)
    K = len(lo)
    p = len(problem.base.independent)
    kt, kb = min(int(kt), p), min(int(kb), p)
    idx = np.r_[np.arange(p - kt, p), np.arange(kb)]
    A, b = problem.reduced_constraints_cached
    ev = problem.evaluator
    cache, best_hist = {}, []

    def x_of(z):
        return lo + span * z[:K]

    def values(z):
        x = x_of(z)
        key = x.tobytes()
        if cache.get("vk") == key:
            return cache["vv"]
        if stop():
            raise StopDescent()
        problem._spend(1)
        q, qd, qdd = problem.states(x)
        W = ev.base_regressor(q, qd, qdd)
        lam = np.linalg.eigvalsh(W.T @ W) if np.isfinite(W).all() else np.full(p, np.nan)
        ok = lam[0] > lam[-1] * 1e-14
        f = 0.5 * float(np.log(lam[-1] / lam[0])) if ok else np.inf
        on_point(f, x)
        best_hist.append(min(f, best_hist[-1]) if best_hist else f)
        if stall and len(best_hist) > stall and best_hist[-stall - 1] - best_hist[-1] < stall_tol:
            raise StopDescent()
        v = np.log(lam[idx]) if ok else None
        cache.update(vk=key, vv=v)
        return v

    def gradients(z):
        x = x_of(z)
        key = x.tobytes()
        if cache.get("gk") == key:
            return cache["gv"]
        if stop():
            raise StopDescent()
        problem._spend(3 * problem.n + 1)
        q, qd, qdd = problem.states(x)
        _, gz = eigen_log_gradients(ev, q, qd, qdd, idx)
        gv = None if gz is None else np.einsum("szm,szk->mk", gz, problem._Bz) * span
        cache.update(gk=key, gv=gv)
        return gv

    def eig_fun(z):
        v = values(z)
        if v is None:
            return -np.ones(kt + kb)
        return np.r_[2.0 * z[K] - v[:kt], v[kt:] - 2.0 * z[K + 1]]

    def eig_jac(z):
        J = np.zeros((kt + kb, K + 2))
        g = gradients(z)
        if g is None:
            return J
        J[:kt, :K], J[:kt, K] = -g[:kt], 2.0
        J[kt:, :K], J[kt:, K + 1] = g[kt:], -2.0
        return J

    Az = np.hstack([A * span, np.zeros((len(A), 2))])
    bz = b - A @ lo
    cons = [{"type": "ineq", "fun": lambda z: bz - Az @ z, "jac": lambda z: -Az},
            {"type": "ineq", "fun": eig_fun, "jac": eig_jac}]
    for c in extra_cons:
        cons.append({"type": "ineq", "fun": (lambda z, c=c: c["fun"](x_of(z))),
                     "jac": (lambda z, c=c: _pad(c["jac"](x_of(z)) * span))})
    q, qd, qdd = problem.states(x0)
    W = ev.base_regressor(q, qd, qdd)
    lam = np.linalg.eigvalsh(W.T @ W)
    if not lam[0] > lam[-1] * 1e-14:
        return
    z0 = np.r_[(x0 - lo) / span, 0.5 * np.log(lam[-1]), 0.5 * np.log(lam[0])]
    c = np.zeros(K + 2)
    c[K], c[K + 1] = 1.0, -1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            minimize(lambda z: (z[K] - z[K + 1], c), z0, jac=True, method="SLSQP", constraints=cons,
                     options={"maxiter": maxiter, "ftol": ftol})
        except StopDescent:
            pass


def _pad(J):
    """A constraint Jacobian in x, with zero columns for (u, l)."""
    return np.hstack([J, np.zeros((J.shape[0], 2))])


def run_minimax(opt, problem, budget, seed):
    """`MultiStartSLSQP.run` for ``form="minimax"`` and the cond criterion: starts (each
    the best of ``opt.screen`` random feasible points) descended by `minimax_descent` on a
    grid ``opt.grid_factor`` times the problem's samples (the finer grid leaves the
    optimiser less room to place the weak directions between samples, which the dense
    1000-sample cond would see), each finished by a short descent of the smooth surrogate
    (``opt.finish_smooth``, p = 16: it moved some small problems off the point where the
    minimax descent stalled), until the budget is spent. The returned objective and
    start value are log cond on the problem's own grid."""
    from .problem import BudgetExhausted
    from .search import Tracker, run_recorder, screened_start

    rng = np.random.default_rng(seed)
    problem.start(budget)
    tr = Tracker(problem)
    A, b = problem.linear_constraints_cached
    Ar, br = problem.reduced_constraints_cached
    extra = []
    if problem.effort_bound is not None:
        extra.append({"fun": lambda x: problem.effort_constraints(x)[0],
                      "jac": lambda x: problem.effort_constraints(x)[1]})
    if problem.collision is not None:
        extra.append({"fun": problem.collision.values, "jac": problem.collision.jacobian})
    problem.smooth = 0.0
    n0 = len(problem.t_opt)
    n_fine = n0 * max(1, int(opt.grid_factor))
    problem.set_samples(n_fine)
    starts, first = 0, None
    try:
        while not problem.exhausted():
            x0, _, admissible = screened_start(problem, rng, opt.screen, tr)
            starts += 1
            if admissible:
                first = x0 if first is None else first
            run, on_point = run_recorder(problem, tr, lambda x: opt._feasible(problem, x, A, b))

            try:
                minimax_descent(problem, x0, extra, problem.exhausted, on_point, opt.kt, opt.kb,
                                opt.minimax_maxiter, opt.minimax_ftol, opt.stall)
                if opt.finish_smooth and run["x"] is not None:
                    from .search import PhaseOver
                    cons = [{"type": "ineq", "fun": lambda x: br - Ar @ x, "jac": lambda x: -Ar}]
                    cons += [{"type": "ineq", **c} for c in extra]
                    problem.smooth = opt.finish_smooth
                    try:
                        opt._local(problem, run["x"], cons, problem.exhausted, on_point)
                    except PhaseOver:
                        pass
                    finally:
                        problem.smooth = 0.0
            finally:
                if run["x"] is not None:
                    xr = problem.repair(run["x"])
                    if problem.collision_excess(xr) > 0:
                        xr = run["x"]
                    tr.offer(run["f"] if np.array_equal(xr, run["x"]) else opt._value_free(problem, xr), xr)
    except BudgetExhausted:
        pass
    finally:
        problem.set_samples(n0)
    if tr.best_x is not None:          # both reported on the problem's own grid
        tr.best_f = opt._value_free(problem, tr.best_x)
    if first is not None:
        tr.initial_f = opt._value_free(problem, first)
    return tr.result(opt.name, {"starts": starts, "form": "minimax", "grid": n0 * max(1, int(opt.grid_factor))})

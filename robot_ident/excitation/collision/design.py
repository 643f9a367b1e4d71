"""The designer's side of the collision constraints: start-pose clearance, and the rounds
of dense check + added samples + local SLSQP that make the returned trajectory keep
the margin on the dense grid (see designer.py)."""
from __future__ import annotations

import numpy as np

from ...errors import TrajectoryError
from .check import report_from_distances


def check_start_clearance(cm, param, spec):
    """A family that starts at a fixed pose cannot move away from a collision there."""
    start = getattr(param, "start", None)
    if spec.family == "fourier" or start is None:
        return
    d = cm.clearances(np.asarray(start, dtype=float)[None])[0]
    if d.size and (d - cm.margins).min() < 0:
        p = int(np.argmin(d - cm.margins))
        raise TrajectoryError(f"the start pose is closer than the collision margin: {cm.pair_label(p)} at "
                              f"{d[p]:.3g} m (margin {cm.margins[p]:.3g} m); give excitation.start_pose elsewhere")


def clear_start_pose(cm, start: np.ndarray, lower: np.ndarray, upper: np.ndarray, seed: int = 0,
                     rounds: tuple = (0.05, 0.1, 0.2, 0.35, 0.5), per_round: int = 64):
    """A start pose near `start` (the mid-range a rest-to-rest family starts from when the
    config gives none) that keeps every pair its margin apart, or None when `start`
    already keeps them or none is found. Candidates: `start` moved by Gaussian steps of a
    growing share of each joint's half range, within the bounds; the clear one nearest
    `start` (in half ranges) is taken. (The UR5's mid-range pose -- every joint at 0, the arm
    stretched at shoulder height -- puts its wrist below the floor.)"""
    d0 = cm.clearances(np.asarray(start, float)[None])[0]
    if not d0.size or (d0 - cm.margins).min() >= 0:
        return None
    half = 0.5 * (upper - lower)
    rng = np.random.default_rng(seed)
    for share in rounds:
        cand = np.clip(start + rng.normal(size=(per_round, start.size)) * share * half, lower, upper)
        D = cm.clearances(cand)
        ok = np.flatnonzero((D - cm.margins).min(axis=1) >= 0)
        if ok.size:
            far = np.linalg.norm((cand[ok] - start) / np.where(half > 0, half, 1.0), axis=1)
            return cand[ok[int(np.argmin(far))]]
    return None


def dense_distances(traj, cm, dt):
    T = float(traj.duration)
    n_pts = int(np.ceil(T / dt)) + 1
    t = np.linspace(0.0, T, n_pts)
    return t, cm.clearances(traj.sample(t)[0], path=True), (float(t[1] - t[0]) if n_pts > 1 else 0.0)


def _new_times(t, D, margins, limit=60):
    dmin = (D - margins).min(axis=1)
    n = len(dmin)
    left = np.r_[np.inf, dmin[:-1]]
    right = np.r_[dmin[1:], np.inf]
    idx = np.flatnonzero((dmin <= left) & (dmin <= right) & (dmin < 0.5 * margins.max()))
    idx = idx[np.argsort(dmin[idx])][:limit]
    return t[np.clip(idx, 0, n - 1)]


def refine(slsqp, problem, x0, max_time: float | None = None):
    """One constrained SLSQP descent from x0 (outside the optimiser's budget, at most
    `max_time` seconds), after collision samples were added. Returns the best feasible
    point seen, or None."""
    import time

    from ..search import PhaseOver
    A, b = problem.linear_constraints_cached
    cons = [{"type": "ineq", "fun": lambda x: b - A @ x, "jac": lambda x: -A}]
    if problem.effort_bound is not None:
        cons.append({"type": "ineq", "fun": lambda x: problem.effort_constraints(x)[0],
                     "jac": lambda x: problem.effort_constraints(x)[1]})
    cons.append({"type": "ineq", "fun": problem.collision.values, "jac": problem.collision.jacobian})
    t0 = time.perf_counter()
    stop = (lambda: False) if max_time is None else (lambda: time.perf_counter() - t0 > max_time)  # noqa: E731
    best = {"f": np.inf, "x": None}

    def on_point(f, x):
        if np.isfinite(f) and f < best["f"] and slsqp._feasible(problem, x, A, b):
            best.update(f=f, x=x.copy())

    problem.release()
    problem.smooth = slsqp.smooth if problem.criterion == "cond" else 0.0
    try:
        slsqp._local(problem, x0, cons, stop, on_point)
    except PhaseOver:
        pass
    finally:
        problem.smooth = 0.0
    return best["x"]


def enforce_collision_free(problem, param, x, cm, spec, limit_repair, scale, rounds: int = 6):
    """(x, traj, limit report, collision report) with both valid, or TrajectoryError."""
    from ..optimizers import MultiStartSLSQP

    opts = dict(spec.optimizer_options) if spec.optimizer == "slsqp" else {}
    opts["maxiter"] = min(int(opts.get("maxiter", 200)), 60)     # a local repair, not a new search
    slsqp = MultiStartSLSQP(**opts)
    # Rounds share the 15 % of a wall-time budget the designer kept (at least 2 s each);
    # with an evaluation budget only, each round runs to SLSQP's convergence (reproducible).
    refine_time = None if spec.max_time is None else max(2.0, 0.15 * spec.max_time / max(rounds, 1))
    traj = param.build(x)
    x, traj, lrep = limit_repair(x)
    for _ in range(rounds):
        t, D, dt = dense_distances(traj, cm, spec.check_dt)
        crep = report_from_distances(cm, t, D, dt)
        if crep.valid and lrep.valid:
            return x, traj, lrep, crep
        if not crep.valid:
            problem.collision.add_times(_new_times(t, D, cm.margins))
            problem.collision.tighten(D, cm.margins)
        xn = refine(slsqp, problem, x, refine_time)
        if xn is None:
            break
        x, traj, lrep = limit_repair(xn)
    # Last resort: shrink every excursion toward the centre (offset or start) pose.
    for f in (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2):
        xs, traj_s, lrep_s = limit_repair(scale(x, f))
        t, D, dt = dense_distances(traj_s, cm, spec.check_dt)
        crep_s = report_from_distances(cm, t, D, dt)
        if crep_s.valid and lrep_s.valid:
            return xs, traj_s, lrep_s, crep_s
    t, D, dt = dense_distances(traj, cm, spec.check_dt)
    raise TrajectoryError("no collision-free trajectory found within the limits: "
                          + report_from_distances(cm, t, D, dt).summary())

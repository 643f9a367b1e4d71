"""When an abort's hold point is due, and where: robust to when the controller takes it.

The hold is one point at rest. The joint_trajectory_controller interpolates a cubic from its
state (x, v) at the moment it takes the trajectory to that point. The take comes some latency
L after the joint state the hold is computed from; meanwhile the arm goes on along the
excitation: ``x(L) = q + qd L + dx(L)``, ``v(L) = qd + dv(L)``, with (dx, dv) the commanded
path's own motion beyond its velocity at the state (`path_ahead`; `constant_acceleration`:
``dx = qdd L**2 / 2``, ``dv = qdd L``). The path, not its acceleration at the
state held constant: a state 0.1 s old on an excitation twice the demo's speed put the real
peak at 2.4x the limit against a plan of 1.35x. With the point at ``g``, due ``T`` after the joint state
(anchored in time: the cubic lasts ``h = T - L``) or ``T`` after the take (not anchored:
``h = T``), the cubic's acceleration is linear in time, so its peak is at one end:

    start: (6 (g - x) - 4 v h) / h**2,    end: (2 v h - 6 (g - x)) / h**2

Each bound is an interval of g; a joint brakes within `peak` x its limit at every latency in
[lo, hi] when the intervals over a grid of latencies meet. `plan` bisects for the earliest T
at which they meet on every joint, and puts each joint's point in the middle of its
intersection. A point planned for one latency brakes harder when the controller takes it
later (measured on the real controller under load: 2.4x the limit for a take 63 ms late),
and a point planned for a coasting arm brakes harder than planned when the arm was
accelerating (measured: 1.53x against a plan of 1.2x): both are in the plan now. Past
``hi`` the peak grows gradually; nothing jumps.

Written by hand: an intersection of intervals over a closed-form cubic; no library states it.
"""
from __future__ import annotations

import numpy as np

HOLD_PEAK = 1.35      # x the limit: the planned deceleration, for any latency in the range
_GRID = 41            # latencies checked across [lo, hi]
_BISECT = 40


def _interval(T, x, v, L, A, anchored: bool):
    """(lower, upper) (n,) of the points g whose cubic stays within |acceleration| <= A (n,) for
    every latency L (K,), the arm at x, v (K, n) when taken."""
    h = ((T - L) if anchored else np.full_like(L, T))[:, None]
    band = A * h * h
    start, end = x + v * h * (2.0 / 3.0), x + v * h / 3.0      # the centres of the start's and end's bounds
    lo = (np.maximum(start, end) - band / 6.0).max(axis=0)
    hi = (np.minimum(start, end) + band / 6.0).min(axis=0)
    return lo, hi


def constant_acceleration(qdd):
    """`ahead` for `plan`: the arm at a constant acceleration `qdd` (n,)."""
    qdd = np.nan_to_num(np.atleast_1d(np.asarray(qdd, float)))
    return lambda L: (0.5 * qdd * np.asarray(L, float)[:, None] ** 2, qdd * np.asarray(L, float)[:, None])


def path_ahead(trajectory, tau: float):
    """`ahead` for `plan`: L (K,) -> (dx, dv) (K, n), how `trajectory` (its ``sample(t)``)
    moves beyond its velocity at its time `tau` in the L after it; at rest before its start
    and after its end."""
    end = float(trajectory.duration)

    def ahead(L):
        taus = tau + np.concatenate([[0.0], np.asarray(L, float)])
        q, qd = trajectory.sample(np.clip(taus, 0.0, end))[:2]
        qd = np.where(((taus >= 0.0) & (taus <= end))[:, None], qd, 0.0)
        return q[1:] - q[0] - qd[0] * np.asarray(L, float)[:, None], qd[1:] - qd[0]
    return ahead


def plan(qd, ahead, limit, stop_time: float, lo: float, hi: float, anchored: bool,
         peak: float = HOLD_PEAK) -> tuple[float, np.ndarray]:
    """(T, offsets (n,)): the hold point is at ``q + offsets``, due T after the joint state
    (anchored) or after the take. T is the earliest, at least `stop_time` after the latest
    take `hi` (anchored; else `stop_time`), whose cubic brakes every joint (velocity `qd` (n,),
    then the motion `ahead(L)` beyond it: `path_ahead`, `constant_acceleration`; None: coasting)
    within `peak` x its acceleration limit `limit` (n,; inf or 0: no limit) for a take at any
    latency in [`lo`, `hi`] (s)."""
    qd = np.nan_to_num(np.atleast_1d(np.asarray(qd, float)))
    limit = np.atleast_1d(np.asarray(limit, float))
    lo, hi = max(float(lo), 0.0), max(float(hi), float(lo), 0.0)
    L = np.linspace(lo, hi, _GRID)
    ahead = constant_acceleration(np.zeros_like(qd)) if ahead is None else ahead      # None: coasting
    dx, dv = (np.nan_to_num(np.asarray(a, float)) for a in ahead(L))
    x, v = qd * L[:, None] + dx, qd + dv
    usable = np.isfinite(limit) & (limit > 0)
    A = np.where(usable, peak * np.where(usable, limit, 1.0), np.inf)
    floor = (hi if anchored else 0.0) + stop_time

    def meets(T):
        a, b = _interval(T, x[:, usable], v[:, usable], L, A[usable], anchored)
        return bool(np.all(a <= b))

    T = floor
    if usable.any() and not meets(T):
        a, b = floor, floor + 1.0
        for _ in range(_BISECT):                         # the intervals widen as T grows (as h**2)
            if meets(b):
                break
            a, b = b, b + 2.0 * (b - a)
        for _ in range(_BISECT):
            m = 0.5 * (a + b)
            a, b = (a, m) if meets(m) else (m, b)
        T = b
    # each joint's point: the middle of its interval (a joint without a limit: braking evenly at hi)
    a, b = _interval(T, x, v, L, np.where(usable, A, 0.0), anchored)
    h_hi = (T - hi) if anchored else T
    even = x[-1] + 0.5 * v[-1] * h_hi
    return T, np.where(usable, 0.5 * (a + b), even)


def hold_message(joint_names, limits, stop_time: float, t: float, q, qd, now: float | None,
                 latencies: tuple[float, float], anchored: bool, ahead=None) -> dict:
    """One point at rest near the arm's state (t, q, qd; `ahead`: its motion beyond qd from t,
    `path_ahead` of the commanded path; None: coasting)
    (clipped to the position limits), due in `stop_time` or longer where the acceleration limits
    (`limits`: an excitation LimitSpec) need it. The controller's cubic to it starts from the
    arm's state when the controller takes it: after the state's age and a latency in [lo, hi]
    (`latencies`); `plan` keeps it within HOLD_PEAK x the limits for any of them. Anchored
    (stamp `t`), the point is due after ``now + hi``: a trajectory that ends in the past is
    refused by the controller, which runs on. A velocity beyond 1.5x its joint's limit is a
    glitch, not the arm: it is clipped there (one reading of 30 rad/s on a 3 rad/s wrist
    stretched every joint's hold to 2.4 s and moved their points 0.2 rad); one that is not finite,
    0. A point beyond a position limit is clipped to it: the limit wins over the deceleration."""
    q, qd = np.asarray(q, float), np.asarray(qd, float)
    qd = np.where(np.isfinite(qd), qd, 0.0)                   # no reading of the arm: not braked for
    vmax = 1.5 * np.asarray(limits.velocity, float)
    qd = np.where(np.isfinite(vmax) & (vmax > 0), np.clip(qd, -vmax, vmax), qd)
    age = 0.0 if now is None else max(now - t, 0.0)
    acc = np.asarray(limits.bounds().acceleration, float)
    lo, hi = latencies
    T, offset = plan(qd, ahead, acc, stop_time, age + lo, age + hi, anchored)
    target = np.clip(q + offset, limits.lower, limits.upper)
    ns = int(round(T * 1e9))
    return {"joint_names": list(joint_names), "stamp_ns": int(round(t * 1e9)) if anchored else 0,
            # no accelerations: the joint_trajectory_controller then interpolates a cubic
            "points": [{"positions": target.tolist(), "velocities": [0.0] * len(joint_names),
                        "time_from_start": {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}}]}


def hold_note(points: dict, latencies: tuple[float, float], measured) -> str:
    """One log line: when the hold is due, for which latencies, from which measured."""
    due = points["points"][0]["time_from_start"]
    return (f"hold: at rest {due['sec'] + 1e-9 * due['nanosec']:.3f} s after the state it starts from "
            f"({'stamped' if points['stamp_ns'] else 'from when the controller takes it'}), planned for controller "
            f"latencies {latencies[0]:.3f}-{latencies[1]:.3f} s (measured: "
            + (", ".join(f"{x:.3f}" for x in measured) or "none") + ")")

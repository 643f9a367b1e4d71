"""When an abort's hold point is due, and where: robust to when the controller takes it.

The hold is one point at rest. The joint_trajectory_controller interpolates a cubic from its
measured state (q, qd) at the moment it takes the trajectory to that point. The take comes
some latency L after the joint state the hold is computed from; the arm coasts meanwhile.
With the point at ``q + qd * gamma`` and due ``T`` after the joint state (anchored in time) or
``T`` after the take (not anchored), the cubic's acceleration is linear in time, so its peak is
at one end (per unit of velocity, with ``h`` the cubic's duration):

    start: (6 (gamma - L) - 4 h) / h**2,    end: (2 h - 6 (gamma - L)) / h**2

A point planned for one latency brakes harder when the controller takes it later: measured on
the real controller under load, 2.4x the acceleration limit for a take 63 ms late. So `plan`
chooses the earliest T, and its gamma, whose cubic brakes within HOLD_PEAK times each joint's
acceleration limit for every latency in [lo, hi] (the range measured, with a margin): an
abort may brake up to 20 % harder than the excitation's limit, and no harder however the
latency falls in that range. Past ``hi`` the peak grows gradually; nothing jumps.

Written by hand: a two-number minimax over a closed-form cubic; no library states it.
"""
from __future__ import annotations

import numpy as np

HOLD_PEAK = 1.2       # x the limit: the planned deceleration, for any latency in the range
_GRID = 41            # latencies checked across [lo, hi]


def _peaks(gamma, T, L, anchored: bool):
    """Peak |acceleration| per unit velocity (gamma (G, 1), L (1, K)): (G, K)."""
    h = (T - L) if anchored else np.full_like(L, T)
    d = 6.0 * (gamma - L)
    return np.maximum(np.abs(d - 4.0 * h), np.abs(2.0 * h - d)) / h ** 2


def _best_gamma(T, L, anchored: bool) -> tuple[float, float]:
    """(worst peak over L, gamma) minimising it (convex in gamma: two grid passes)."""
    lo, hi = 0.0, T + float(L.max())
    g = w = None
    for _ in range(2):
        gs = np.linspace(lo, hi, 201)[:, None]
        ws = _peaks(gs, T, L, anchored).max(axis=1)
        i = int(np.argmin(ws))
        g, w = float(gs[i, 0]), float(ws[i])
        step = (hi - lo) / 200.0
        lo, hi = max(g - step, 0.0), g + step
    return w, g


def plan(ratio: float, stop_time: float, lo: float, hi: float, anchored: bool,
         peak: float = HOLD_PEAK) -> tuple[float, float]:
    """(T, gamma) of the hold point for the joint with the largest ``|qd| / a_max`` (`ratio`, s):
    the earliest T, at least `stop_time` after the latest take `hi`, whose cubic brakes within
    `peak` x the limit at any latency in [`lo`, `hi`] (s)."""
    lo, hi = max(float(lo), 0.0), max(float(hi), float(lo), 0.0)
    floor = (hi if anchored else 0.0) + stop_time
    if ratio <= 0.0:
        return floor, 0.5 * (lo + hi)                       # at rest: hold where it is
    L = np.linspace(lo, hi, _GRID)[None, :]
    limit = peak / ratio
    a, b = floor, floor + 4.0 * ratio + 1.0
    if _best_gamma(a, L, anchored)[0] > limit:
        for _ in range(50):                                  # bisection: the worst peak falls with T
            m = 0.5 * (a + b)
            if _best_gamma(m, L, anchored)[0] <= limit:
                b = m
            else:
                a = m
        a = b
    return a, _best_gamma(a, L, anchored)[1]


def hold_message(joint_names, limits, stop_time: float, t: float, q, qd, now: float | None,
                 latencies: tuple[float, float], anchored: bool) -> dict:
    """One point at rest near the arm's state (t, q, qd) (clipped to the position limits), due in
    `stop_time` or longer where the acceleration limits (`limits`: an excitation LimitSpec) need it.
    The controller's cubic to it starts from the arm's state when the controller takes it: after
    the state's age and a latency in [lo, hi] (`latencies`); `plan` keeps it within HOLD_PEAK x the
    limits for any of them. Anchored (stamp `t`), the point is due after ``now + hi``: a trajectory
    that ends in the past is refused by the controller, which runs on."""
    q, qd = np.asarray(q, float), np.asarray(qd, float)
    age = 0.0 if now is None else max(now - t, 0.0)
    acc = np.asarray(limits.bounds().acceleration, float)
    usable = np.isfinite(acc) & (acc > 0)
    need = np.abs(qd[usable]) / acc[usable]
    lo, hi = latencies
    T, gamma = plan(float(need.max()) if need.size else 0.0, stop_time, age + lo, age + hi, anchored)
    target = np.clip(q + qd * gamma, limits.lower, limits.upper)
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

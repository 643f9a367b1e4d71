"""The slow, rest-to-rest approach from the current pose to the excitation's start pose:
a quintic whose peak velocity and acceleration are a fraction of the limits."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import TrajectoryError
from ..excitation.constraints import LimitSpec, Margins

_PEAK_VEL = 1.875             # max of d/dtau of the quintic 10 t^3 - 15 t^4 + 6 t^5
_PEAK_ACC = 10.0 / math.sqrt(3.0)   # max |d2/dtau2| of the same quintic


@dataclass(frozen=True)
class ApproachTrajectory:
    """Rest-to-rest quintic (minimum jerk) straight line in joint space from `start` to `goal`."""

    joint_names: tuple[str, ...]
    start: np.ndarray
    goal: np.ndarray
    duration: float

    def sample(self, t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        T = self.duration
        d = self.goal - self.start
        if T <= 0:
            z = np.zeros((t.size, d.size))
            return self.goal + z, z, z.copy()
        s = np.clip(t / T, 0.0, 1.0)[:, None]
        p = 10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5
        v = (30 * s ** 2 - 60 * s ** 3 + 30 * s ** 4) / T
        a = (60 * s - 180 * s ** 2 + 120 * s ** 3) / T ** 2
        return self.start + p * d, v * d, a * d


def plan_approach(joint_names: Sequence[str], q_now, q_start, velocity_limits, acceleration_limits,
                  speed_fraction: float = 0.1, acceleration_fraction: float = 0.1,
                  min_duration: float = 2.0) -> ApproachTrajectory:
    """The slow approach: the shortest quintic whose peak velocity and acceleration stay
    within the given fractions of the limits, and at least `min_duration` long."""
    q0 = np.asarray(q_now, dtype=float)
    q1 = np.asarray(q_start, dtype=float)
    vel = np.asarray(velocity_limits, dtype=float)
    acc = np.asarray(acceleration_limits, dtype=float)
    if not (0 < speed_fraction <= 1 and 0 < acceleration_fraction <= 1):
        raise TrajectoryError("approach speed and acceleration fractions must be in (0, 1]")
    if not (np.isfinite(q0).all() and np.isfinite(q1).all()):
        raise TrajectoryError("approach: current or start position is not finite")
    d = np.abs(q1 - q0)
    t_vel = _PEAK_VEL * d / (speed_fraction * vel)
    t_acc = np.sqrt(_PEAK_ACC * d / (acceleration_fraction * acc))
    T = float(max(min_duration, t_vel.max(initial=0.0), t_acc.max(initial=0.0)))
    # Round up to the millisecond so the commanded points carry the exact duration.
    T = math.ceil(T * 1000.0) / 1000.0
    return ApproachTrajectory(tuple(joint_names), q0, q1, T)


def approach_limits(limits: LimitSpec) -> LimitSpec:
    """The limits the approach is checked against: the URDF position range without the
    margin (the arm may start inside the margin band), the same velocity and
    acceleration limits with their margins."""
    m = limits.margins
    return LimitSpec(limits.joint_names, limits.lower, limits.upper, limits.velocity, limits.acceleration,
                     None, Margins(0.0, m.velocity, m.acceleration, m.effort))


# ------------------------------------------------------------ collision-aware approach
@dataclass(frozen=True)
class ViaApproach:
    """Rest-to-rest quintics through one or more intermediate poses (at rest at each)."""

    joint_names: tuple[str, ...]
    segments: tuple[ApproachTrajectory, ...]

    @property
    def duration(self) -> float:
        return float(sum(s.duration for s in self.segments))

    @property
    def start(self):
        return self.segments[0].start

    @property
    def goal(self):
        return self.segments[-1].goal

    @property
    def via(self):
        return [s.goal for s in self.segments[:-1]]

    def sample(self, t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        n = len(self.joint_names)
        q, qd, qdd = (np.empty((t.size, n)) for _ in range(3))
        t0 = 0.0
        ends = np.cumsum([s.duration for s in self.segments])
        for k, seg in enumerate(self.segments):
            last = k == len(self.segments) - 1
            sel = (t >= t0) & ((t < ends[k]) | last) if k else ((t < ends[k]) | last)
            if sel.any():
                a, b, c = seg.sample(t[sel] - t0)
                q[sel], qd[sel], qdd[sel] = a, b, c
            t0 = ends[k]
        return q, qd, qdd


def _path_distances(cm, qa, qb, lever):
    """Distances along the straight joint-space segment qa -> qb, sampled so that no geometry
    point moves more than half the margin between samples."""
    step = 0.5 * max(cm.margin, 1e-3)
    n = max(2, int(math.ceil(float(np.abs(qb - qa) @ lever) / step)) + 1)
    s = np.linspace(0.0, 1.0, n)[:, None]
    return cm.clearances(qa + s * (qb - qa), path=True)


def plan_safe_approach(joint_names, q_now, q_start, limits: LimitSpec, collision, speed_fraction=0.1,
                       acceleration_fraction=0.1, min_duration=2.0, candidates: int = 300, seed: int = 0,
                       dt: float = 1e-3):
    """The approach from q_now to q_start, around obstacles: the straight quintic if it keeps
    every checked pair at its margin (or, for a pair already closer at q_now, no closer than
    it is now less 1 mm), else retract (every joint but the root-most toward the neutral
    pose), turn, extend, else the shortest collision-free path through one intermediate pose
    found among `candidates` random poses within the limits (each segment a rest-to-rest
    quintic). TrajectoryError with the
    colliding pair when the arm is in collision now or no such path is found: nothing moves."""
    from ..excitation.collision.check import report_from_distances

    names = tuple(joint_names)
    q0, q1 = np.asarray(q_now, dtype=float), np.asarray(q_start, dtype=float)
    b = limits.bounds()

    def quintic(a, c):
        return plan_approach(names, a, c, b.velocity, b.acceleration, speed_fraction, acceleration_fraction,
                             min_duration)

    if collision is None or not collision.active:
        return quintic(q0, q1)
    cm = collision
    d_now = cm.clearances(q0[None])[0]
    if (d_now < 0).any():
        p = int(np.argmin(d_now))
        raise TrajectoryError(f"the arm is in collision at its current pose ({cm.pair_label(p)}: {d_now[p]:.3g} m); "
                              "not moving")
    thr = np.minimum(cm.margins, d_now - 1e-3)
    d_goal = cm.clearances(q1[None])[0]
    if (d_goal < thr).any():
        p = int(np.argmin(d_goal - thr))
        raise TrajectoryError(f"the excitation's start pose is closer than the margin: {cm.pair_label(p)} at "
                              f"{d_goal[p]:.3g} m; not moving")
    lever = cm.lever_bounds()

    def clear(qa, qc):
        return bool((_path_distances(cm, qa, qc, lever) >= thr).all())

    def final(traj):
        T = float(traj.duration)
        t = np.linspace(0.0, T, int(math.ceil(T / dt)) + 1)
        D = cm.clearances(traj.sample(t)[0], path=True)
        ok = bool((D >= thr).all())
        return ok, report_from_distances(cm, t, D, float(t[1] - t[0]))

    direct = quintic(q0, q1)
    ok, rep = final(direct)
    if ok:
        return direct
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(b.lower), b.lower, -np.pi)
    hi = np.where(np.isfinite(b.upper), b.upper, np.pi)
    # 1. Retract every joint but the root-most toward the neutral pose (often an upright
    #    or folded home), turn the root joint, extend: q0 -> r(q0) -> r(q1) -> q1.
    home = np.clip(np.zeros(len(names)), lo, hi)
    root = int(np.argmin(cm.robot._jid))
    rest = np.arange(len(names)) != root
    for a in (0.5, 0.75, 1.0):
        v0, v1 = q0.copy(), q1.copy()
        v0[rest] = (1 - a) * q0[rest] + a * home[rest]
        v1[rest] = (1 - a) * q1[rest] + a * home[rest]
        pts = [q0, v0] + ([] if np.allclose(v0, v1) else [v1]) + [q1]
        if all((cm.clearances(v[None])[0] >= thr).all() for v in pts[1:-1]) and \
                all(clear(pa, pb) for pa, pb in zip(pts[:-1], pts[1:])):
            traj = ViaApproach(names, tuple(quintic(pa, pb) for pa, pb in zip(pts[:-1], pts[1:])))
            if final(traj)[0]:
                return traj
    # 2. One intermediate pose: random around the midpoint, spreading out to the whole range.
    mid = 0.5 * (q0 + q1)
    spread = np.linspace(0.1, 1.0, candidates)[:, None] * (hi - lo) * 0.5
    Q = np.clip(mid + rng.uniform(-1.0, 1.0, (candidates, len(names))) * spread, lo, hi)
    Dv = cm.clearances(Q)
    good = np.flatnonzero((Dv >= thr + 2e-3).all(axis=1))
    length = np.abs(Q[good] - q0).sum(1) + np.abs(Q[good] - q1).sum(1)
    for k in good[np.argsort(length)]:
        if clear(q0, Q[k]) and clear(Q[k], q1):
            traj = ViaApproach(names, (quintic(q0, Q[k]), quintic(Q[k], q1)))
            if final(traj)[0]:
                return traj
    raise TrajectoryError(f"the straight approach from the current pose collides ({rep.summary()}) and no "
                          "collision-free path through an intermediate pose was found (retract toward the neutral "
                          f"pose, or one of {candidates} random intermediate poses); move the arm closer to the "
                          "excitation's start pose first. Not moving")

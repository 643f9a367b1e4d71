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

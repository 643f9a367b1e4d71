"""A trajectory run several times back to back (identification + held-out repetition)."""
from __future__ import annotations

import numpy as np

from ..errors import TrajectoryError


class Repeated:
    """`traj` repeated `count` times. Allowed only when the end state (position, velocity,
    acceleration) equals the start state, so the joined trajectory is smooth."""

    def __init__(self, traj, count: int, atol: float = 1e-6):
        if count < 1:
            raise TrajectoryError(f"repetition count must be >= 1, got {count}")
        self.traj = traj
        self.count = int(count)
        self.joint_names = tuple(traj.joint_names)
        T = float(traj.duration)
        if count > 1:
            a = traj.sample(np.array([0.0]))
            b = traj.sample(np.array([T]))
            for label, x0, x1 in zip(("position", "velocity", "acceleration"), a, b):
                gap = np.abs(x1[0] - x0[0])
                if gap.max() > atol * max(1.0, np.abs(x0).max()):
                    j = self.joint_names[int(np.argmax(gap))]
                    raise TrajectoryError(
                        f"cannot repeat the trajectory: joint {j!r} {label} differs by {gap.max():.3g} between "
                        "its end and its start")
        self.period = T
        self.duration = T * self.count

    def sample(self, t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        local = np.where(t >= self.duration, self.period, np.mod(t, self.period))
        local = np.where((t > 0) & (local == 0) & (t <= self.duration), np.where(t == self.duration, self.period, 0.0), local)
        return self.traj.sample(np.clip(local, 0.0, self.period))

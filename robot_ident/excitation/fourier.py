"""Finite Fourier series excitation (source B).

    q_i(t)   = q0_i + sum_l [ a_il/(wf*l) sin(wf*l*t) - b_il/(wf*l) cos(wf*l*t) ]
    qd_i(t)  = sum_l [ a_il cos(wf*l*t) + b_il sin(wf*l*t) ]
    qdd_i(t) = sum_l [ -a_il*wf*l sin(wf*l*t) + b_il*wf*l cos(wf*l*t) ]

The trajectory is periodic with period 2*pi/wf, so repeating it is seamless; it does
not start at rest (the modified series of the excitation issue does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import TrajectoryError


@dataclass(frozen=True)
class FourierTrajectory:
    joint_names: tuple[str, ...]
    wf: float              # base angular frequency [rad/s]
    q0: np.ndarray         # (n,)
    a: np.ndarray          # (n, L)
    b: np.ndarray          # (n, L)

    def __post_init__(self):
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        n = len(self.joint_names)
        q0 = np.asarray(self.q0, dtype=float)
        a = np.atleast_2d(np.asarray(self.a, dtype=float))
        b = np.atleast_2d(np.asarray(self.b, dtype=float))
        if not (self.wf > 0 and np.isfinite(self.wf)):
            raise TrajectoryError(f"Fourier base frequency wf must be positive, got {self.wf}")
        if q0.shape != (n,) or a.shape[0] != n or a.shape != b.shape:
            raise TrajectoryError(f"Fourier coefficients do not match {n} joints: q0 {q0.shape}, "
                                  f"a {a.shape}, b {b.shape}")
        for arr, label in ((q0, "q0"), (a, "a"), (b, "b")):
            if not np.isfinite(arr).all():
                raise TrajectoryError(f"Fourier coefficient {label} is not finite")
        object.__setattr__(self, "q0", q0)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    @property
    def harmonics(self) -> int:
        return self.a.shape[1]

    @property
    def period(self) -> float:
        return 2 * np.pi / self.wf

    @property
    def duration(self) -> float:
        return self.period

    def sample(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, qd, qdd at times t, each of shape (len(t), n)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        w = self.wf * np.arange(1, self.harmonics + 1)           # (L,)
        s, c = np.sin(np.outer(t, w)), np.cos(np.outer(t, w))     # (N, L)
        q = self.q0 + s @ (self.a / w).T - c @ (self.b / w).T
        qd = c @ self.a.T + s @ self.b.T
        qdd = -s @ (self.a * w).T + c @ (self.b * w).T
        return q, qd, qdd

    def scaled(self, factor) -> "FourierTrajectory":
        """Same shape with the oscillation scaled per joint (q0 unchanged)."""
        f = np.broadcast_to(np.asarray(factor, dtype=float), self.q0.shape)[:, None]
        return FourierTrajectory(self.joint_names, self.wf, self.q0, self.a * f, self.b * f)

    @classmethod
    def random_within_limits(cls, joint_names: Sequence[str], lower, upper, velocity, acceleration,
                             wf: float = 0.2 * np.pi, harmonics: int = 5, margin: float = 0.1,
                             seed: int = 0, dense_dt: float = 0.002) -> "FourierTrajectory":
        """Random coefficients, centred in the range and scaled per joint to use (1 - margin)
        of the tightest of position range, velocity and acceleration limits, checked on a
        dense grid. Not optimised: the excitation designer does that."""
        n = len(joint_names)
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        velocity, acceleration = np.asarray(velocity, float), np.asarray(acceleration, float)
        for arr, label in ((lower, "lower"), (upper, "upper"), (velocity, "velocity"),
                           (acceleration, "acceleration")):
            if arr.shape != (n,):
                raise TrajectoryError(f"{label} limits must have {n} entries, got {arr.shape}")
        lo = np.where(np.isfinite(lower), lower, -np.pi)
        hi = np.where(np.isfinite(upper), upper, np.pi)
        for k, j in enumerate(joint_names):
            if not hi[k] > lo[k]:
                raise TrajectoryError(f"joint {j!r}: position range [{lo[k]}, {hi[k]}] is empty")
            if not (velocity[k] > 0 and acceleration[k] > 0):
                raise TrajectoryError(f"joint {j!r}: velocity and acceleration limits must be positive")
        rng = np.random.default_rng(seed)
        a = rng.normal(size=(n, harmonics))
        b = rng.normal(size=(n, harmonics))
        unit = cls(joint_names, wf, np.zeros(n), a, b)
        t = np.arange(0.0, unit.period, dense_dt)
        q, qd, qdd = unit.sample(t)
        half = 0.5 * (q.max(0) - q.min(0))
        s = (1.0 - margin) * np.minimum.reduce([
            0.5 * (hi - lo) / half,
            velocity / np.abs(qd).max(0),
            acceleration / np.abs(qdd).max(0),
        ])
        q0 = 0.5 * (lo + hi) - s * 0.5 * (q.max(0) + q.min(0))
        return cls(joint_names, wf, q0, a * s[:, None], b * s[:, None])

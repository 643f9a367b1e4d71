"""Trajectory families besides the plain Fourier series (see fourier.py).

Every family is a frozen dataclass with ``joint_names``, ``duration`` and
``sample(t) -> (q, qd, qdd)`` (arrays of shape (len(t), n)), valid for any t in
[0, duration] (outside it the boundary state is held, at rest).

* `ModifiedFourierTrajectory` -- source B's series plus a 5th-order polynomial
  correction so that the arm starts and stops at rest at the start pose.
* `PolynomialTrajectory` -- source A's 7th-order polynomial per joint with zero
  position offset, velocity and acceleration at both ends.
* `JointMovesTrajectory` -- one joint at a time (sources C, D): smooth rest-to-rest
  moves of a single joint with the others held, chained.

Boundary conditions are built into the construction, they are not constraints the
optimiser has to satisfy. For the polynomial and joint-move families they hold
exactly in floating point (the profiles have factors ``tau**k (1 - tau)**k``); for
the modified Fourier series they hold to round-off.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TrajectoryError
from .fourier import FourierTrajectory


def _times(t) -> np.ndarray:
    t = np.atleast_1d(np.asarray(t, dtype=float))
    if t.ndim != 1 or not np.isfinite(t).all():
        raise TrajectoryError("sample times must be a finite 1-D array")
    return t


def _check_matrix(arr, shape, label) -> np.ndarray:
    a = np.asarray(arr, dtype=float)
    if a.shape != shape:
        raise TrajectoryError(f"{label} must have shape {shape}, got {a.shape}")
    if not np.isfinite(a).all():
        raise TrajectoryError(f"{label} is not finite")
    return a


# ----------------------------------------------------------------------------------
# Modified Fourier series
# ----------------------------------------------------------------------------------
def _quintic_basis(tau: np.ndarray):
    """Powers tau**0..5 and their first and second derivatives (in tau), (N, 6) each."""
    k = np.arange(6)
    p = tau[:, None] ** k
    d1 = np.zeros_like(p)
    d1[:, 1:] = k[1:] * tau[:, None] ** (k[1:] - 1)
    d2 = np.zeros_like(p)
    d2[:, 2:] = k[2:] * (k[2:] - 1) * tau[:, None] ** (k[2:] - 2)
    return p, d1, d2


# Rows: p(0), p'(0), p''(0), p(1), p'(1), p''(1) of sum_k c_k tau**k.
_QUINTIC_BC = np.vstack([_quintic_basis(np.array([x]))[i][0] for x in (0.0, 1.0) for i in range(3)])
_QUINTIC_BC_INV = np.linalg.inv(_QUINTIC_BC)


@dataclass(frozen=True)
class ModifiedFourierTrajectory:
    """Fourier series that starts and ends at rest at ``start`` (one period long).

        f(t) = sum_l [ a_l/(wf l) sin(wf l t) - b_l/(wf l) cos(wf l t) ]
        q(t) = start + f(t) - f(0) + p(t / T),     T = 2 pi / wf

    where p is the quintic in tau = t/T with p(0) = 0, p(1) = f(0) - f(T) (= 0 up to
    round-off), p'(0) = -T f'(0), p'(1) = -T f'(T), p''(0) = -T^2 f''(0),
    p''(1) = -T^2 f''(T). Hence q(0) = q(T) = start and qd = qdd = 0 at both ends.
    Everything is linear in (a, b).
    """

    joint_names: tuple[str, ...]
    wf: float
    start: np.ndarray      # (n,)
    a: np.ndarray          # (n, L)
    b: np.ndarray          # (n, L)

    family = "modified_fourier"

    def __post_init__(self):
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        n = len(self.joint_names)
        if not (self.wf > 0 and np.isfinite(self.wf)):
            raise TrajectoryError(f"base frequency wf must be positive, got {self.wf}")
        a = np.atleast_2d(np.asarray(self.a, dtype=float))
        object.__setattr__(self, "start", _check_matrix(self.start, (n,), "start"))
        object.__setattr__(self, "a", _check_matrix(a, (n, a.shape[1]), "a"))
        object.__setattr__(self, "b", _check_matrix(np.atleast_2d(self.b), a.shape, "b"))

    @property
    def harmonics(self) -> int:
        return self.a.shape[1]

    @property
    def period(self) -> float:
        return 2 * np.pi / self.wf

    @property
    def duration(self) -> float:
        return self.period

    def _fourier(self) -> FourierTrajectory:
        return FourierTrajectory(self.joint_names, self.wf, np.zeros(len(self.joint_names)),
                                 self.a, self.b)

    def sample(self, t):
        t = np.clip(_times(t), 0.0, self.duration)
        four = self._fourier()
        T = self.duration
        f, fd, fdd = four.sample(t)
        (f0, fT), (v0, vT), (a0, aT) = four.sample(np.array([0.0, T]))
        # Boundary values of the correction, rows as in _QUINTIC_BC, columns = joints.
        bc = np.vstack([np.zeros_like(f0), -T * v0, -T * T * a0, f0 - fT, -T * vT, -T * T * aT])
        c = _QUINTIC_BC_INV @ bc                          # (6, n)
        p, d1, d2 = _quintic_basis(t / T)
        q = self.start + (f - f0) + p @ c
        qd = fd + (d1 @ c) / T
        qdd = fdd + (d2 @ c) / (T * T)
        return q, qd, qdd


# ----------------------------------------------------------------------------------
# 7th-order polynomial (source A)
# ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PolynomialTrajectory:
    """7th-order polynomial per joint, at rest at ``start`` at both ends (source A).

        q(t) = start + g(tau) (c0 + c1 tau),  g = tau^3 (1 - tau)^3,  tau = t / duration

    The degree-7 polynomials with q - start, qd and qdd zero at both ends are exactly
    this two-parameter family per joint (8 coefficients minus 6 conditions), so
    ``coefficients`` = (c0, c1) per joint; `power_coefficients` gives source A's
    a0..a7 of x(t) = sum a_k t^k.
    """

    joint_names: tuple[str, ...]
    duration: float
    start: np.ndarray          # (n,)
    coefficients: np.ndarray   # (n, 2)

    family = "polynomial7"

    def __post_init__(self):
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        n = len(self.joint_names)
        if not (self.duration > 0 and np.isfinite(self.duration)):
            raise TrajectoryError(f"polynomial duration must be positive, got {self.duration}")
        object.__setattr__(self, "start", _check_matrix(self.start, (n,), "start"))
        object.__setattr__(self, "coefficients",
                           _check_matrix(self.coefficients, (n, 2), "polynomial coefficients"))

    @staticmethod
    def profile(tau: np.ndarray):
        """Per-coefficient shape functions and their tau-derivatives: (N, 2) each."""
        u = tau - tau * tau
        du = 1.0 - 2.0 * tau
        g, dg, ddg = u ** 3, 3 * u * u * du, 6 * u * du * du - 6 * u * u
        one = np.ones_like(tau)
        s = np.stack([g, g * tau], axis=1)
        ds = np.stack([dg, dg * tau + g * one], axis=1)
        dds = np.stack([ddg, ddg * tau + 2 * dg], axis=1)
        return s, ds, dds

    def sample(self, t):
        T = self.duration
        tau = np.clip(_times(t), 0.0, T) / T
        s, ds, dds = self.profile(tau)
        c = self.coefficients.T                              # (2, n)
        return self.start + s @ c, (ds @ c) / T, (dds @ c) / (T * T)

    def power_coefficients(self) -> np.ndarray:
        """(n, 8) coefficients a0..a7 of q_i(t) = sum_k a_k t^k."""
        # tau^3 (1 - tau)^3 = tau^3 - 3 tau^4 + 3 tau^5 - tau^6
        g = np.array([0, 0, 0, 1, -3, 3, -1, 0], dtype=float)
        gt = np.roll(g, 1)
        out = np.outer(self.coefficients[:, 0], g) + np.outer(self.coefficients[:, 1], gt)
        out[:, 0] += self.start
        return out / self.duration ** np.arange(8)


# ----------------------------------------------------------------------------------
# One joint at a time (sources C, D)
# ----------------------------------------------------------------------------------
def smoothstep7(tau: np.ndarray):
    """s(tau) = 35 tau^4 - 84 tau^5 + 70 tau^6 - 20 tau^7 and its derivatives: rest to rest
    with zero velocity, acceleration and jerk at both ends, exactly."""
    u = tau * (1.0 - tau)
    s = tau ** 4 * (35.0 - 84.0 * tau + 70.0 * tau ** 2 - 20.0 * tau ** 3)
    ds = 140.0 * u ** 3
    dds = 420.0 * u * u * (1.0 - 2.0 * tau)
    # s(1) is 1 exactly in floating point (35 - 84 + 70 - 20); enforce at tau = 1 anyway.
    s = np.where(tau >= 1.0, 1.0, s)
    return s, ds, dds


@dataclass(frozen=True)
class JointMovesTrajectory:
    """Chained rest-to-rest moves of a single joint each, the others held.

    Move k drives joint ``move_joints[k]`` by ``displacements[k]`` in
    ``durations[k]`` seconds along `smoothstep7`; moves follow each other without pause.
    """

    joint_names: tuple[str, ...]
    start: np.ndarray            # (n,)
    move_joints: tuple[str, ...]
    displacements: np.ndarray    # (M,)
    durations: np.ndarray        # (M,)

    family = "joint_moves"

    def __post_init__(self):
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        object.__setattr__(self, "move_joints", tuple(self.move_joints))
        n, m = len(self.joint_names), len(self.move_joints)
        if m == 0:
            raise TrajectoryError("a joint-moves trajectory needs at least one move")
        for j in self.move_joints:
            if j not in self.joint_names:
                raise TrajectoryError(f"move of joint {j!r}, which is not one of {self.joint_names}")
        object.__setattr__(self, "start", _check_matrix(self.start, (n,), "start"))
        object.__setattr__(self, "displacements", _check_matrix(self.displacements, (m,), "displacements"))
        d = _check_matrix(self.durations, (m,), "durations")
        if not (d > 0).all():
            raise TrajectoryError("every move duration must be positive")
        object.__setattr__(self, "durations", d)

    @property
    def duration(self) -> float:
        return float(self.durations.sum())

    def move_matrices(self, t):
        """Shape matrices (N, M) of each move's position, velocity, acceleration profile,
        so q = start + S @ (E * displacements) with E mapping moves to joints."""
        t = np.clip(_times(t), 0.0, self.duration)
        t0 = np.concatenate([[0.0], np.cumsum(self.durations)[:-1]])
        tau = np.clip((t[:, None] - t0[None, :]) / self.durations[None, :], 0.0, 1.0)
        s, ds, dds = smoothstep7(tau)
        return s, ds / self.durations, dds / self.durations ** 2

    def joint_matrix(self) -> np.ndarray:
        """(M, n) one-hot map of moves to joints."""
        E = np.zeros((len(self.move_joints), len(self.joint_names)))
        for k, j in enumerate(self.move_joints):
            E[k, self.joint_names.index(j)] = 1.0
        return E

    def sample(self, t):
        s, ds, dds = self.move_matrices(t)
        D = self.displacements[:, None] * self.joint_matrix()
        return self.start + s @ D, ds @ D, dds @ D


# ----------------------------------------------------------------------------------
# trajectory_msgs-style points
# ----------------------------------------------------------------------------------
def trajectory_points(traj, rate: float = 100.0) -> dict:
    """Plain-data JointTrajectory: ``{"joint_names": [...], "points": [{"positions",
    "velocities", "accelerations", "time_from_start": {"sec", "nanosec"}}]}``
    sampled at ``rate`` Hz from 0 to the duration inclusive. No ROS import: the
    nodes turn this into trajectory_msgs/JointTrajectory."""
    if not (rate > 0 and np.isfinite(rate)):
        raise TrajectoryError(f"point rate must be positive, got {rate}")
    T = float(traj.duration)
    n_pts = int(np.floor(T * rate + 1e-9)) + 1
    t = np.arange(n_pts) / rate
    if t[-1] < T - 1e-12:
        t = np.append(t, T)
    q, qd, qdd = traj.sample(t)
    points = []
    for k, tk in enumerate(t):
        ns = int(round(tk * 1e9))
        points.append({
            "positions": q[k].tolist(),
            "velocities": qd[k].tolist(),
            "accelerations": qdd[k].tolist(),
            "time_from_start": {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000},
        })
    return {"joint_names": list(traj.joint_names), "points": points}


__all__ = ["ModifiedFourierTrajectory", "PolynomialTrajectory", "JointMovesTrajectory",
           "smoothstep7", "trajectory_points"]

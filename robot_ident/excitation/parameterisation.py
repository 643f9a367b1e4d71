"""Decision vectors of the excitation design: a flat vector ``x`` <-> a trajectory.

Every family here is *affine* in its decision vector once the fixed data (frequency,
harmonics, start pose, durations) are chosen:

    q(t) = q_off(t) + Bq(t) @ x,   qd(t) = qd_off(t) + Bqd(t) @ x,   qdd likewise.

`Parameterisation.basis(t)` returns these matrices (computed from the family's own
``sample`` by linearity, so there is one source of truth for the formulas). The
designer then gets exact linear position/velocity/acceleration constraints and
exact state derivatives for the gradient of the criterion.

Each variable belongs to one joint (``var_joint``). A joint may have one *offset*
variable (the Fourier centre q0) that moves the whole joint curve rigidly; all its
other variables scale its excursion, which `repair` uses to pull any vector back
inside the limits (used by the population methods and after the gradient method).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import TrajectoryError
from .families import JointMovesTrajectory, ModifiedFourierTrajectory, PolynomialTrajectory
from .fourier import FourierTrajectory


@dataclass(frozen=True)
class Bounds:
    """Effective joint limits (margins already applied), identified joint order."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray


class Parameterisation(ABC):
    """Base class: subclasses set ``joint_names``, ``var_joint``, ``offset_var`` and
    implement ``build(x)`` and ``box(bounds)``."""

    family: str = ""
    joint_names: tuple[str, ...]
    var_joint: np.ndarray      # (K,) joint index of every variable
    offset_var: np.ndarray     # (n,) index of the joint's rigid offset variable, or -1

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @property
    def n_vars(self) -> int:
        return len(self.var_joint)

    @property
    def duration(self) -> float:
        return float(self.build(np.zeros(self.n_vars)).duration)

    @abstractmethod
    def build(self, x):
        """The trajectory of decision vector x."""

    @abstractmethod
    def box(self, bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of every variable."""

    @abstractmethod
    def to_vector(self, traj) -> np.ndarray:
        """The decision vector of a trajectory of this family."""

    def acceleration_implied(self, bounds: Bounds, spacing: float) -> np.ndarray:
        """(n,) bool: joints whose acceleration limit holds wherever their velocity limit
        holds on a constraint grid of this spacing [s], so that the optimiser may leave
        their acceleration rows out. No joint unless the family proves it."""
        return np.zeros(self.n, dtype=bool)

    def basis(self, t):
        """(off, B) for q, qd, qdd: off (N, n), B (N, n, K), exact by linearity."""
        t = np.asarray(t, dtype=float)
        K = self.n_vars
        off = self.build(np.zeros(K)).sample(t)
        B = [np.empty((len(t), self.n, K)) for _ in range(3)]
        for k in range(K):
            e = np.zeros(K)
            e[k] = 1.0
            s = self.build(e).sample(t)
            for i in range(3):
                B[i][:, :, k] = s[i] - off[i]
        return off, tuple(B)

    # ------------------------------------------------------------------ repair
    def repair(self, x, bounds: Bounds, off, B, shrink: float = 1.0 - 1e-9) -> np.ndarray:
        """Scale each joint's excursion (and move its offset, if it has one) so that the
        states on the grid behind ``off, B`` are inside ``bounds``. Never enlarges."""
        x = np.array(x, dtype=float)
        qo, qdo, qddo = off
        Bq, Bqd, Bqdd = B
        scal = np.ones(self.n_vars, dtype=bool)
        has_off = self.offset_var >= 0
        scal[self.offset_var[has_off]] = False
        xs = np.where(scal, x, 0.0)
        xo = np.where(scal, 0.0, x)
        exc_q = Bq @ xs                                   # (N, n) scalable part
        base_q = qo + Bq @ xo
        qd = qdo + Bqd @ x
        qdd = qddo + Bqdd @ x
        with np.errstate(divide="ignore", invalid="ignore"):
            s_v = np.where(np.abs(qd).max(0) > 0, bounds.velocity / np.abs(qd).max(0), np.inf)
            s_a = np.where(np.abs(qdd).max(0) > 0, bounds.acceleration / np.abs(qdd).max(0), np.inf)
            ptp = exc_q.max(0) - exc_q.min(0)
            s_range = np.where(ptp > 0, (bounds.upper - bounds.lower) / ptp, np.inf)
            # Anchored joints: base_q + s * exc_q within [lower, upper] at every sample.
            up = np.where(exc_q > 0, (bounds.upper - base_q) / exc_q, np.inf)
            lo = np.where(exc_q < 0, (bounds.lower - base_q) / exc_q, np.inf)
            s_anchor = np.minimum(up.min(0), lo.min(0))
        s_pos = np.where(has_off, s_range, s_anchor)
        s_raw = np.minimum.reduce([s_v, s_a, s_pos])
        # Idempotent: a joint already inside its limits (s_raw >= 1) is left alone.
        s = np.where(s_raw >= 1.0, 1.0, np.clip(s_raw * shrink, 0.0, 1.0))
        x = np.where(scal, x * s[self.var_joint], x)
        # Offsets: centre each floating joint's curve inside the range if it sticks out.
        for j in np.flatnonzero(has_off):
            k = self.offset_var[j]
            curve = qo[:, j] + Bq[:, j, :] @ np.where(np.arange(self.n_vars) == k, 0.0, x)
            slope = Bq[0, j, k]                           # q changes by slope * x_k
            lo_k = (bounds.lower[j] - curve.min()) / slope
            hi_k = (bounds.upper[j] - curve.max()) / slope
            lo_k, hi_k = min(lo_k, hi_k), max(lo_k, hi_k)
            x[k] = np.clip(x[k], lo_k, hi_k) if lo_k <= hi_k else 0.5 * (lo_k + hi_k)
        return x


def _amplitude_box(bounds: Bounds, wf: float, L: int) -> np.ndarray:
    """(n, L) largest useful |a_l|, |b_l| of a Fourier harmonic under each bound alone."""
    w = wf * np.arange(1, L + 1)
    rng = np.where(np.isfinite(bounds.upper - bounds.lower), bounds.upper - bounds.lower, 2 * np.pi)
    return np.minimum.reduce([np.broadcast_to(bounds.velocity[:, None], (len(rng), L)),
                              bounds.acceleration[:, None] / w[None, :],
                              0.5 * rng[:, None] * w[None, :]])


class FourierParameters(Parameterisation):
    """x = [q0 (n), a (n*L, row-major), b (n*L)] of `FourierTrajectory`; with a start pose
    q0 is not free but set so that q(0) = start."""

    family = "fourier"

    def __init__(self, joint_names: Sequence[str], wf: float, harmonics: int, start=None):
        self.joint_names = tuple(joint_names)
        self.wf, self.L = float(wf), int(harmonics)
        if self.L < 1:
            raise TrajectoryError("the Fourier series needs at least one harmonic")
        n, L = self.n, self.L
        self.start = None if start is None else np.asarray(start, dtype=float)
        per_joint = np.repeat(np.arange(n), L)
        if self.start is None:
            self.var_joint = np.concatenate([np.arange(n), per_joint, per_joint])
            self.offset_var = np.arange(n)
        else:
            self.var_joint = np.concatenate([per_joint, per_joint])
            self.offset_var = -np.ones(n, dtype=int)

    def _split(self, x):
        n, L = self.n, self.L
        x = np.asarray(x, dtype=float)
        if x.shape != (self.n_vars,):
            raise TrajectoryError(f"decision vector has {x.shape} entries, expected {self.n_vars}")
        k = 0 if self.start is not None else n
        a = x[k:k + n * L].reshape(n, L)
        b = x[k + n * L:].reshape(n, L)
        if self.start is None:
            q0 = x[:n]
        else:
            q0 = self.start + (b / (self.wf * np.arange(1, L + 1))).sum(1)
        return q0, a, b

    def build(self, x) -> FourierTrajectory:
        q0, a, b = self._split(x)
        return FourierTrajectory(self.joint_names, self.wf, q0, a, b)

    def to_vector(self, traj) -> np.ndarray:
        parts = [traj.a.ravel(), traj.b.ravel()]
        return np.concatenate(([traj.q0] if self.start is None else []) + parts)

    def acceleration_implied(self, bounds: Bounds, spacing: float) -> np.ndarray:
        """A joint's velocity is a trigonometric polynomial of degree L in wf, so by
        Bernstein's inequality sup |qdd| <= L wf sup |qd| (exact, for every coefficient
        vector). The velocity rows bound |qd| only on the grid: at the peak t* of |qd|,
        qd' = 0 and |qd''| <= (L wf)^2 sup |qd| (Bernstein twice), and a grid point lies
        within spacing / 2 of t*, so sup |qd| <= grid max / (1 - (L wf spacing)^2 / 8).
        Where L wf times that bound is within the acceleration limit, the acceleration
        rows can never be the binding ones."""
        Lw = self.L * self.wf
        shrink = 1.0 - (Lw * spacing) ** 2 / 8.0
        if shrink <= 0.0:
            return np.zeros(self.n, dtype=bool)
        return Lw * bounds.velocity / shrink <= bounds.acceleration

    def box(self, bounds: Bounds):
        amp = _amplitude_box(bounds, self.wf, self.L).ravel()
        hi = np.concatenate([amp, amp])
        lo = -hi
        if self.start is None:
            lo = np.concatenate([np.where(np.isfinite(bounds.lower), bounds.lower, -np.pi), lo])
            hi = np.concatenate([np.where(np.isfinite(bounds.upper), bounds.upper, np.pi), hi])
        return lo, hi


class ModifiedFourierParameters(Parameterisation):
    """x = [a (n*L), b (n*L)] of `ModifiedFourierTrajectory` at a given start pose."""

    family = "modified_fourier"

    def __init__(self, joint_names, wf: float, harmonics: int, start):
        self.joint_names = tuple(joint_names)
        self.wf, self.L = float(wf), int(harmonics)
        self.start = np.asarray(start, dtype=float)
        per_joint = np.repeat(np.arange(self.n), self.L)
        self.var_joint = np.concatenate([per_joint, per_joint])
        self.offset_var = -np.ones(self.n, dtype=int)

    def build(self, x) -> ModifiedFourierTrajectory:
        x = np.asarray(x, dtype=float)
        nL = self.n * self.L
        return ModifiedFourierTrajectory(self.joint_names, self.wf, self.start,
                                         x[:nL].reshape(self.n, self.L), x[nL:].reshape(self.n, self.L))

    def to_vector(self, traj) -> np.ndarray:
        return np.concatenate([traj.a.ravel(), traj.b.ravel()])

    def box(self, bounds: Bounds):
        amp = _amplitude_box(bounds, self.wf, self.L).ravel()
        hi = np.concatenate([amp, amp])
        return -hi, hi


class PolynomialParameters(Parameterisation):
    """x = [c0, c1] per joint (row-major) of `PolynomialTrajectory`."""

    family = "polynomial7"

    def __init__(self, joint_names, duration: float, start):
        self.joint_names = tuple(joint_names)
        self.T = float(duration)
        self.start = np.asarray(start, dtype=float)
        self.var_joint = np.repeat(np.arange(self.n), 2)
        self.offset_var = -np.ones(self.n, dtype=int)

    def build(self, x) -> PolynomialTrajectory:
        return PolynomialTrajectory(self.joint_names, self.T, self.start,
                                    np.asarray(x, dtype=float).reshape(self.n, 2))

    def to_vector(self, traj) -> np.ndarray:
        return traj.coefficients.ravel().copy()

    def box(self, bounds: Bounds):
        # max |tau^3 (1-tau)^3| = 1/64: a position excursion of the full range needs |c| ~ 64*range.
        rng = np.where(np.isfinite(bounds.upper - bounds.lower), bounds.upper - bounds.lower, 2 * np.pi)
        hi = np.repeat(64.0 * rng, 2) * np.tile([1.0, 2.0], self.n)
        return -hi, hi


class JointMovesParameters(Parameterisation):
    """x = displacement of each move of `JointMovesTrajectory`; each joint in ``order``
    moves out and back (two moves of ``move_duration``), so the trajectory ends at the start.
    The two displacements of a joint are tied (out d, back -d): x has one entry per joint."""

    family = "joint_moves"

    def __init__(self, joint_names, start, move_duration: float = 2.0, order=None):
        self.joint_names = tuple(joint_names)
        self.start = np.asarray(start, dtype=float)
        self.order = tuple(order or self.joint_names)
        self.move_duration = float(move_duration)
        self.var_joint = np.array([self.joint_names.index(j) for j in self.order])
        self.offset_var = -np.ones(self.n, dtype=int)

    def build(self, x) -> JointMovesTrajectory:
        x = np.asarray(x, dtype=float)
        joints = tuple(j for j in self.order for _ in range(2))
        disp = np.stack([x, -x], axis=1).ravel()
        return JointMovesTrajectory(self.joint_names, self.start, joints, disp,
                                    np.full(len(joints), self.move_duration))

    def to_vector(self, traj) -> np.ndarray:
        return traj.displacements[0::2].copy()

    def box(self, bounds: Bounds):
        rng = np.where(np.isfinite(bounds.upper - bounds.lower), bounds.upper - bounds.lower, 2 * np.pi)
        hi = rng[self.var_joint]
        return -hi, hi

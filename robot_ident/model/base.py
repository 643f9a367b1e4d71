"""Numerical base parameters (source B): which combinations of the standard
parameters the effort data can determine at all.

Method
------
1. Stack the standard regressor ``W`` at random states (q uniform in the joint
   range, qd and qdd uniform in +-velocity / +-acceleration scales), sample-major.
   Columns are scaled to unit norm so the rank test does not depend on units;
   columns whose norm is below 1e-10 of the largest are round-off and set to zero.
2. The numerical rank ``r`` comes from QR with column pivoting (Householder, LAPACK
   ``geqp3``): ``r = #{i : |R_ii| > rank_tol * |R_00|}`` with ``rank_tol = 1e-8`` by
   default. Structural dependencies give ``|R_ii|/|R_00|`` at round-off level
   (~1e-14) while genuinely independent columns of an arm stay above ~1e-5, so the
   decision is far from the tolerance on either side; the gap is measured and a
   ``ModelError`` is raised when it is not clear (< 1e3).
3. Which columns to keep: the first ``r`` columns that are independent of the ones
   before them in *layout order* (QR without pivoting, same tolerance). This keeps
   the inboard body's parameters and regroups outboard ones into them -- the
   classic grouping such as ``shoulder_pan.Izz + shoulder_lift.Iyy + ...``. If that
   greedy choice does not reach rank ``r`` the pivoted selection is used instead.
4. With ``W = [W1 W2]`` (kept, dropped) and ``W2 = W1 @ beta``, the base parameters
   are ``phi_b = phi_1 + beta @ phi_2`` and the base regressor is ``W1``
   (``beta = R1^-1 R2`` from the QR of the reordered matrix).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..errors import ModelError
from .robot import RobotModel

DEFAULT_RANK_TOL = 1e-8
_BETA_ZERO = 1e-10  # regrouping coefficients below this are round-off
_ZERO_COLUMN = 1e-10  # column norm relative to the largest one below which a column is zero


@dataclass(frozen=True)
class BaseParameters:
    """The base-parameter reduction of a standard layout."""

    standard_names: tuple[str, ...]
    independent: np.ndarray   # indices of kept standard columns (phi_1), in base order
    dependent: np.ndarray     # indices of regrouped standard columns (phi_2)
    beta: np.ndarray          # (r, n_std - r): phi_b = phi_1 + beta @ phi_2
    names: tuple[str, ...]    # readable names of the base parameters
    rank_tol: float
    rank_gap: float           # smallest kept |R_ii| / largest dropped |R_ii| (inf if none dropped)

    @property
    def size(self) -> int:
        return len(self.independent)

    @property
    def projection(self) -> np.ndarray:
        """(r, n_std) matrix P with phi_b = P @ phi."""
        P = np.zeros((self.size, len(self.standard_names)))
        P[np.arange(self.size), self.independent] = 1.0
        P[:, self.dependent] = self.beta
        return P

    def project(self, theta: np.ndarray) -> np.ndarray:
        """Base parameter values of a standard parameter vector."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape[-1] != len(self.standard_names):
            raise ValueError(f"standard vector has {theta.shape[-1]} entries, layout has "
                             f"{len(self.standard_names)}")
        return theta[..., self.independent] + theta[..., self.dependent] @ self.beta.T

    def regressor(self, W_standard: np.ndarray) -> np.ndarray:
        """Base regressor: the kept columns of a standard regressor."""
        return W_standard[:, self.independent]

    def standard_from_base(self, phi_b: np.ndarray) -> np.ndarray:
        """One standard vector with these base values (regrouped parameters set to zero)."""
        theta = np.zeros(len(self.standard_names))
        theta[self.independent] = phi_b
        return theta

    @classmethod
    def from_regressor(cls, W: np.ndarray, names, rank_tol: float = DEFAULT_RANK_TOL) -> "BaseParameters":
        W = np.asarray(W, dtype=float)
        names = tuple(names)
        if W.ndim != 2 or W.shape[1] != len(names):
            raise ValueError(f"regressor has shape {W.shape}, expected (rows, {len(names)})")
        if not np.isfinite(W).all():
            raise ModelError("regressor used for the base-parameter reduction contains NaN or inf")
        if W.shape[0] < W.shape[1]:
            raise ModelError(f"base-parameter reduction needs at least {W.shape[1]} regressor rows, "
                             f"got {W.shape[0]}")
        norms = np.linalg.norm(W, axis=0)
        # Columns at round-off level (e.g. gravity times cos(pi/2) ~ 6e-17) are structural
        # zeros; scaling them to unit norm would turn round-off into a fake direction.
        zero = norms <= _ZERO_COLUMN * norms.max()
        scale = np.where(zero, 1.0, norms)
        Ws = W / scale
        Ws[:, zero] = 0.0

        _, Rp, _ = sla.qr(Ws, mode="economic", pivoting=True)
        dp = np.abs(np.diag(Rp))
        if dp[0] == 0:
            raise ModelError("the regressor is identically zero: no parameter affects the efforts")
        keep = dp > rank_tol * dp[0]
        rank = int(keep.sum())
        gap = float(dp[keep].min() / dp[~keep].max()) if (~keep).any() and dp[~keep].max() > 0 else np.inf
        if gap < 1e3:
            raise ModelError(
                f"base-parameter rank is ambiguous: |R_ii| gap {gap:.3g} around tolerance {rank_tol:g}; "
                "sample more varied states or check the model")

        # Greedy selection in layout order (unpivoted QR).
        _, R0 = np.linalg.qr(Ws, mode="reduced")
        d0 = np.abs(np.diag(R0))
        indep = np.flatnonzero(d0 > rank_tol * dp[0])
        if len(indep) != rank:
            _, _, piv = sla.qr(Ws, mode="economic", pivoting=True)
            indep = np.sort(piv[:rank])
        dep = np.setdiff1d(np.arange(W.shape[1]), indep)

        W1, W2 = Ws[:, indep], Ws[:, dep]
        beta_s, *_ = np.linalg.lstsq(W1, W2, rcond=None)
        fit = np.linalg.norm(W1 @ beta_s - W2) / max(np.linalg.norm(W2), 1e-300) if dep.size else 0.0
        if dep.size and np.linalg.norm(W2) > 0 and fit > 1e-6:
            raise ModelError(f"regrouped columns are not combinations of the kept ones (residual {fit:.2g})")
        # Undo column scaling: W2 = W1 beta  with W = Ws * scale.
        beta = beta_s * scale[dep][None, :] / scale[indep][:, None]
        beta[np.abs(beta) < _BETA_ZERO] = 0.0
        base_names = tuple(_regrouped_name(names[i], [names[j] for j in dep], beta[k])
                           for k, i in enumerate(indep))
        return cls(names, indep, dep, beta, base_names, rank_tol, gap)

    @classmethod
    def from_model(cls, model: RobotModel, n_samples: int = 400, seed: int = 0,
                   velocity_scale: float = 2.0, acceleration_scale: float = 10.0,
                   rank_tol: float = DEFAULT_RANK_TOL) -> "BaseParameters":
        """Reduce the model's layout with its regressor at random states."""
        rng = np.random.default_rng(seed)
        lo, hi = model.limits.lower.copy(), model.limits.upper.copy()
        lo[~np.isfinite(lo)] = -np.pi
        hi[~np.isfinite(hi)] = np.pi
        q = rng.uniform(lo, hi, size=(n_samples, model.n))
        qd = rng.uniform(-velocity_scale, velocity_scale, size=(n_samples, model.n))
        qdd = rng.uniform(-acceleration_scale, acceleration_scale, size=(n_samples, model.n))
        return cls.from_regressor(model.regressor(q, qd, qdd), model.layout.names, rank_tol)


def _regrouped_name(kept: str, dependent_names, coeffs) -> str:
    parts = [kept]
    for name, c in zip(dependent_names, coeffs):
        if c == 0.0:
            continue
        if abs(c - 1.0) < 1e-9:
            parts.append(f"+ {name}")
        elif abs(c + 1.0) < 1e-9:
            parts.append(f"- {name}")
        else:
            parts.append(f"{'+' if c > 0 else '-'} {abs(c):.4g}*{name}")
    return " ".join(parts)

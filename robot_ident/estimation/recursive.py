"""Online estimation: recursive (weighted) least squares with a forgetting factor.

Each update takes the n rows of one sample (all joints at once, a block update):

    K = P W^T (lambda S + W P W^T)^-1,   x += K (y - W x),   P = (P - K W P) / lambda

with S = diag(sigma_j^2) the per-joint noise variances (weights as in WLS). With
lambda = 1 this is exactly batch WLS with a vanishing prior (P0 = p0 * 1 in scaled
coordinates); lambda < 1 forgets old data with a time constant of 1 / (1 - lambda)
samples, for slowly changing parameters (payload, warm-up friction).

Column scaling: parameters differ by orders of magnitude, so the filter runs on
x_s = x * scale with scale given (e.g. from the CAD values) or 1.
"""
from __future__ import annotations

import numpy as np

from ..errors import IdentificationError
from .least_squares import _per_joint
from .problem import IdentificationProblem, require_rows
from .result import IdentificationResult
from .uncertainty import hac_covariance


class RecursiveLeastSquares:
    def __init__(self, n_params: int, n_joints: int, forgetting: float = 1.0, sigma=None,
                 p0: float = 1e4, scale=None, x0=None):
        if not 0.0 < forgetting <= 1.0:
            raise IdentificationError(f"forgetting factor must be in (0, 1], got {forgetting}")
        self.p = n_params
        self.n = n_joints
        self.lam = float(forgetting)
        self.S = np.diag(np.ones(n_joints) if sigma is None else np.asarray(sigma, float) ** 2)
        self.scale = np.ones(n_params) if scale is None else np.asarray(scale, float)
        self.xs = np.zeros(n_params) if x0 is None else np.asarray(x0, float) * self.scale
        self.P = np.eye(n_params) * p0
        self.count = 0
        self._ssr = 0.0   # weighted sum of squared a-priori residuals (for the noise scale)

    @property
    def estimate(self) -> np.ndarray:
        return self.xs / self.scale

    def covariance(self) -> np.ndarray:
        return self.P / np.outer(self.scale, self.scale)

    def update(self, W_rows: np.ndarray, y: np.ndarray, joints=None) -> np.ndarray:
        """One sample: W_rows (k, p) and y (k,) for the given joint indices (default: all n
        joints in order; fewer when some joints are in the friction dead band)."""
        Wsc = W_rows / self.scale
        e = y - Wsc @ self.xs
        PWt = self.P @ Wsc.T
        S = self.S if joints is None else self.S[np.ix_(joints, joints)]
        Sinn = self.lam * S + Wsc @ PWt
        K = np.linalg.solve(Sinn, PWt.T).T
        self.xs = self.xs + K @ e
        self.P = (self.P - K @ PWt.T) / self.lam
        self.P = 0.5 * (self.P + self.P.T)
        self._ssr += float(e @ np.linalg.solve(Sinn, e))
        self.count += 1
        return self.estimate


def recursive_estimate(problem: IdentificationProblem, forgetting: float = 1.0, sigma=None) -> IdentificationResult:
    """Run RLS over the problem's rows, one sample at a time, in recording order."""
    n = len(problem.joint_names)
    require_rows(problem, "rls")
    if problem.sample_of_row is None:
        raise IdentificationError("recursive estimation needs the sample index of each row (build_problem)")
    norms = np.linalg.norm(problem.W, axis=0)
    scale = np.where(norms > 0, norms / np.sqrt(problem.n_rows), 1.0)
    rls = RecursiveLeastSquares(problem.n_params, n, forgetting, sigma, scale=scale)
    starts = np.flatnonzero(np.r_[True, np.diff(problem.sample_of_row) != 0])
    ends = np.r_[starts[1:], problem.n_rows]
    for a, b in zip(starts, ends):
        rls.update(problem.W[a:b], problem.y[a:b], problem.joint_of_row[a:b])
    x = rls.estimate
    r = problem.y - problem.W @ x
    rms, sig = _per_joint(problem, r)
    # Autocorrelation-consistent sandwich around RLS's information matrix (uncertainty.py);
    # with forgetting 1 that is the batch weighted normal matrix.
    wrow = 1.0 / (np.ones(n) if sigma is None else np.asarray(sigma, float))[problem.joint_of_row]
    cov, info = hac_covariance(problem.W * wrow[:, None], r * wrow, rls.covariance(), problem.sample_of_row,
                               problem.joint_of_row, n)
    sv = np.linalg.svd(problem.W, compute_uv=False)
    return IdentificationResult(method="rls", base=problem.base, values=x,
                                std=np.sqrt(np.clip(np.diag(cov), 0, None)), covariance=cov,
                                condition_number=float(sv[0] / sv[-1]), n_samples=problem.n_samples,
                                n_rows=problem.n_rows, joint_names=problem.joint_names, residual_rms=rms,
                                joint_sigma=sig, extra={"forgetting": forgetting, **info})


def recursive_weighted(problem: IdentificationProblem, forgetting: float = 1.0) -> IdentificationResult:
    """RLS with per-joint noise levels from a WLS pass, as an online node configures them
    after a warm-up; with forgetting 1 it reproduces batch WLS."""
    from .least_squares import wls
    return recursive_estimate(problem, forgetting, sigma=wls(problem).joint_sigma)

"""Ordinary and weighted least squares on base parameters (sources B and D).

OLS:  x = argmin ||y - W x||^2,  sigma^2 = ||y - W x||^2 / (M - p),  C = sigma^2 (W^T W)^-1.
WLS (two passes, after Gautier): an OLS pass gives each joint's residual variance
sigma_j^2 = ||r_j||^2 / (M_j - p * M_j / M); rows of joint j are weighted by 1/sigma_j
and solved again; C = s^2 (W^T S^-2 W)^-1 with s^2 the weighted residual variance
(close to 1 when the noise model is right). Relative standard deviations are
100 * std / |x| percent (source D).

The reported covariance is the autocorrelation-consistent (HAC) sandwich of
estimation/uncertainty.py, not sigma^2 (W^T W)^-1: filtered efforts and smooth model
error make neighbouring residuals correlated, and the white-noise formula would then
be several times too optimistic. For white residuals the two agree.

Solves use a QR of the column-scaled matrix and an SVD of its small R factor, so the
covariance is computed without forming W^T W, and a rank-deficient matrix is refused with the names of the
parameters the data cannot separate.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from ..errors import IdentificationError
from ..util.parallel import ForkedCall
from .problem import IdentificationProblem
from .r_factor import r_factor
from .result import IdentificationResult
from .uncertainty import hac_covariance

# Smallest singular value of the column-scaled matrix, relative to the largest, that
# still counts as identifiable. Below it the data do not determine the parameters.
RANK_TOL = 1e-8


def _check(problem: IdentificationProblem) -> None:
    M, p = problem.n_rows, problem.W.shape[1]
    if M < p:
        raise IdentificationError(f"{M} equations for {p} base parameters: record more (moving) samples")
    if not np.isfinite(problem.W).all():
        raise IdentificationError("the regressor contains NaN or inf (check positions and velocities)")
    bad = ~np.isfinite(problem.y)
    if bad.any():
        j = problem.joint_names[problem.joint_of_row[np.flatnonzero(bad)[0]]]
        raise IdentificationError(f"measured effort of joint {j!r} contains NaN or inf")


def _solve(W: np.ndarray, y: np.ndarray, names) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Least squares via a QR of the column-scaled [W y] (only R is kept, so memory stays
    at one copy of W) and an SVD of the small R; returns x, (W^T W)^-1, residual, cond(W)."""
    norms = np.linalg.norm(W, axis=0)
    zero = norms == 0
    if zero.any():
        listed = ", ".join(repr(names[i]) for i in np.flatnonzero(zero)[:6])
        raise IdentificationError(f"the data do not excite base parameter(s) {listed}: their regressor "
                                  "columns are zero on the kept samples")
    p = W.shape[1]
    Raug = r_factor(np.column_stack([W / norms, y]))
    R, c = Raug[:p, :p], Raug[:p, p]
    U, s, Vt = np.linalg.svd(R)
    if s[-1] < RANK_TOL * s[0]:
        v = Vt[-1]
        worst = np.argsort(-np.abs(v))[:4]
        listed = ", ".join(f"{names[i]!r}" for i in worst if abs(v[i]) > 0.1)
        raise IdentificationError(
            f"the identification matrix is rank deficient (scaled condition number {s[0] / s[-1]:.3g}); "
            f"the data cannot separate {listed}. Use a richer excitation or fix these parameters")
    x = (Vt.T @ ((U.T @ c) / s)) / norms
    inv = ((Vt.T / s ** 2) @ Vt) / np.outer(norms, norms)
    r = y - W @ x
    sv = np.linalg.svd(R * norms, compute_uv=False)     # singular values of W = Q R diag(norms)
    return x, inv, r, float(sv[0] / sv[-1])


def _per_joint(problem: IdentificationProblem, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(problem.joint_names)
    counts = problem.rows_per_joint()
    ss = np.bincount(problem.joint_of_row, weights=r ** 2, minlength=n)
    rms = np.sqrt(ss / np.maximum(counts, 1))
    M, p = problem.n_rows, problem.W.shape[1]
    dof = counts - p * counts / M
    sigma = np.sqrt(ss / np.maximum(dof, 1.0))
    return rms, sigma


def _covariance(problem: IdentificationProblem, W_w, r_w, inv, x, joint_weights) -> tuple[np.ndarray, dict]:
    """HAC covariance from the rows. A compressed problem has no time series of
    residuals: its rows are re-read from where they came from (`problem.rows`,
    estimation/store_hac.py) when it says; without that it gets the white-noise formula
    and says so (likely optimistic: see estimation/uncertainty.py)."""
    if not problem.compressed:
        return hac_covariance(W_w, r_w, inv, problem.sample_of_row, problem.joint_of_row, len(problem.joint_names))
    if problem.rows is not None:
        return problem.rows.hac_covariance(x, joint_weights, inv, problem.n_rows)
    M, p = problem.n_rows, W_w.shape[1]
    s2 = float(r_w @ r_w) / max(M - p, 1)
    return s2 * inv, {"std_model": "white residuals (compressed problem: the residual autocorrelation is not "
                                   "available, so these standard deviations are likely optimistic)"}


def ols(problem: IdentificationProblem) -> IdentificationResult:
    _check(problem)
    W, y = problem.W, problem.y
    x, inv, r, cond = _solve(W, y, problem.param_names)
    cov, info = _covariance(problem, W, r, inv, x, np.ones(len(problem.joint_names)))
    rms, sig = _per_joint(problem, r)
    res = _result("ols", problem, x, cov, cond, rms, sig)
    res.extra.update(info)
    return res


WLS_MAX_PASSES = 10         # weighted solves at most
WLS_SIGMA_TOLERANCE = 0.01  # re-weighting stops when no joint's residual sigma moves by more than this


def _weighted_solve(problem: IdentificationProblem):
    """WLS: (x, (Ww^T Ww)^-1, weighted residual, row weights, per-joint weights 1 / sigma_j,
    cond(W)). The weights are each joint's residual sigma, re-estimated from the weighted
    fit until they settle: the OLS residual of a joint with small efforts (a wrist) is mostly
    the other joints' misfit leaking in, not its own noise, and weighting by it once kept the
    leak (bench/zoo.py, noise-free UR10: wrist_3 held-out error 52 % after one pass, 0.14 %
    after the weights settle)."""
    _check(problem)
    W, y = problem.W, problem.y
    _, _, r0, cond = _solve(W, y, problem.param_names)
    _, sigma_j = _per_joint(problem, r0)
    if (sigma_j <= 0).any():
        j = problem.joint_names[int(np.argmin(sigma_j))]
        raise IdentificationError(f"joint {j!r} has zero residual after OLS: its efforts are fitted "
                                  "exactly, so no noise level can be estimated for weighting")
    for _ in range(WLS_MAX_PASSES):
        w = 1.0 / sigma_j[problem.joint_of_row]
        x, inv_w, rw, _ = _solve(W * w[:, None], y * w, problem.param_names)
        _, new = _per_joint(problem, y - W @ x)
        if not (new > 1e-9 * sigma_j.max()).all() or np.abs(new / sigma_j - 1.0).max() <= WLS_SIGMA_TOLERANCE:
            break
        sigma_j = new
    return x, inv_w, rw, w, 1.0 / sigma_j, cond


def wls_values(problem: IdentificationProblem) -> np.ndarray:
    """The WLS estimate alone (no covariance): the best fit of the model's structure."""
    return _weighted_solve(problem)[0]


def wls(problem: IdentificationProblem) -> IdentificationResult:
    return WlsFit(problem).result()


class WlsFit:
    """The WLS estimate (`fit`: its result with the covariance still NaN) and, from
    `result()`, the whole result. With `aside` the HAC covariance, which re-reads every row,
    is computed in a forked process (util/parallel.ForkedCall) while the caller goes on
    (the physically consistent estimate's level 2); `close()` ends that process."""

    def __init__(self, problem: IdentificationProblem, aside: bool = False):
        W, y = problem.W, problem.y
        M, p = problem.n_rows, W.shape[1]
        x, inv_w, rw, w, joint_w, cond = _weighted_solve(problem)
        covariance = partial(_covariance, problem, W * w[:, None], rw, inv_w, x, joint_w)
        self._pending = ForkedCall(covariance, "computing the WLS covariance") if aside else None
        self._done = None if aside else covariance()
        try:
            rms, sigma_final = _per_joint(problem, y - W @ x)   # noise estimate from the WLS residuals
            self.fit = _result("wls", problem, x, np.full((p, p), np.nan), cond, rms, sigma_final)
            self.fit.extra["weighted_residual_variance"] = float(rw @ rw) / max(M - p, 1)
        except BaseException:
            self.close()
            raise

    def result(self) -> IdentificationResult:
        if self._done is None:
            self._done = self._pending.result()
        cov, info = self._done
        res = replace(self.fit, covariance=cov, std=np.sqrt(np.clip(np.diag(cov), 0.0, None)),
                      extra=dict(self.fit.extra))
        res.extra.update(info)
        return res

    def close(self) -> None:
        if self._pending is not None:
            self._pending.close()


def _result(method, problem, x, cov, cond, rms, sigma) -> IdentificationResult:
    std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    return IdentificationResult(method=method, base=problem.base, values=x, std=std, covariance=cov,
                                condition_number=cond, n_samples=problem.n_samples, n_rows=problem.n_rows,
                                joint_names=problem.joint_names, residual_rms=rms, joint_sigma=sigma)


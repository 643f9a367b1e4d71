"""Robust estimation: iteratively reweighted least squares (IRLS) with a robust loss.

Start from WLS. Each iteration standardises the residuals of every joint by a robust
scale (1.4826 x median absolute deviation of that joint's residuals), turns them into
weights with the chosen loss, and solves the weighted problem again, until the
estimate moves by less than `tol` (relative). Outlier samples (spikes, stick-slip
bursts) end up with weights near zero instead of pulling the fit.

Losses (u = standardised residual, c = tuning constant for 95 % efficiency on
Gaussian noise): huber w = min(1, c/|u|), c = 1.345; cauchy w = 1/(1 + (u/c)^2),
c = 2.385; bisquare w = (1 - (u/c)^2)^2 for |u| < c else 0, c = 4.685.
The covariance is the M-estimator sandwich B^-1 Omega B^-1 with the scores' covariance
Omega autocorrelation-consistent (estimation/uncertainty.py).
"""
from __future__ import annotations

import numpy as np

from ..errors import IdentificationError
from .least_squares import _check, _per_joint, _solve, wls
from .problem import IdentificationProblem, require_rows
from .result import IdentificationResult
from .uncertainty import hac_covariance

LOSSES = {
    "huber": (1.345, lambda u, c: np.minimum(1.0, c / np.maximum(np.abs(u), 1e-300))),
    "cauchy": (2.385, lambda u, c: 1.0 / (1.0 + (u / c) ** 2)),
    "bisquare": (4.685, lambda u, c: np.where(np.abs(u) < c, (1.0 - (u / c) ** 2) ** 2, 0.0)),
}
# psi'(u) of each loss (psi(u) = u * weight(u)), for the M-estimator's sandwich covariance.
PSI_PRIME = {
    "huber": lambda u, c: (np.abs(u) < c).astype(float),
    "cauchy": lambda u, c: (1.0 - (u / c) ** 2) / (1.0 + (u / c) ** 2) ** 2,
    "bisquare": lambda u, c: np.where(np.abs(u) < c, (1.0 - (u / c) ** 2) * (1.0 - 5.0 * (u / c) ** 2), 0.0),
}


def robust_scale(r: np.ndarray, joint: np.ndarray, n: int) -> np.ndarray:
    s = np.empty(n)
    for k in range(n):
        rk = r[joint == k]
        s[k] = 1.4826 * np.median(np.abs(rk - np.median(rk)))
    return s


def irls(problem: IdentificationProblem, loss: str = "cauchy", max_iter: int = 50,
         tol: float = 1e-8) -> IdentificationResult:
    if loss not in LOSSES:
        raise IdentificationError(f"unknown robust loss {loss!r}; available: {', '.join(LOSSES)}")
    require_rows(problem, "robust")
    _check(problem)
    c, weight_fn = LOSSES[loss]
    W, y, joint = problem.W, problem.y, problem.joint_of_row
    n = len(problem.joint_names)
    start = wls(problem)
    x = start.values
    for it in range(1, max_iter + 1):
        r = y - W @ x
        s = robust_scale(r, joint, n)
        if (s <= 0).any():
            j = problem.joint_names[int(np.argmin(s))]
            raise IdentificationError(f"joint {j!r}: robust residual scale is zero (more than half the "
                                      "samples fitted exactly); robust weighting is undefined")
        u = r / s[joint]
        w = weight_fn(u, c) / s[joint] ** 2
        sw = np.sqrt(w)
        x_new, inv_w, rw, _ = _solve(W * sw[:, None], y * sw, problem.param_names)
        step = np.linalg.norm(x_new - x) / max(np.linalg.norm(x), 1e-300)
        x = x_new
        if step < tol:
            break
    # M-estimator sandwich B^-1 Omega B^-1: B = sum psi'(u) W W^T / s^2 (the IRLS weights
    # psi(u)/u would understate it), Omega the autocorrelation-consistent sum of the scores
    # W psi(u) / s (see uncertainty.py).
    u = (y - W @ x) / s[joint]
    dpsi = PSI_PRIME[loss](u, c) / s[joint] ** 2
    B = W.T @ (W * dpsi[:, None])
    try:
        np.linalg.cholesky(B)
        B_inv = np.linalg.inv(B)
    except np.linalg.LinAlgError:          # psi' < 0 on many rows: keep the IRLS normal matrix
        B_inv = inv_w
    cov, info = hac_covariance(W * sw[:, None], rw, B_inv, problem.sample_of_row, joint, n)
    r = y - W @ x
    rms, _ = _per_joint(problem, r)
    res = IdentificationResult(method=f"robust-{loss}", base=problem.base, values=x,
                               std=np.sqrt(np.clip(np.diag(cov), 0, None)), covariance=cov,
                               condition_number=start.condition_number, n_samples=problem.n_samples,
                               n_rows=problem.n_rows, joint_names=problem.joint_names, residual_rms=rms,
                               joint_sigma=s)
    res.extra.update(info)
    res.extra.update({"loss": loss, "iterations": it, "downweighted_rows": int(np.sum(w * s[joint] ** 2 < 0.5))})
    return res

"""Standard deviations that hold when the residuals are correlated in time.

The textbook covariance of a least-squares estimate, sigma^2 (W^T W)^-1, assumes
white residuals. Ours are not: efforts are low-pass filtered (neighbouring samples
share most of their noise) and model error is smooth along the trajectory. With a
20 Hz filter at 200 Hz the white formula underestimates the standard deviations
3-6 fold (issue 12).

We use the heteroskedasticity-and-autocorrelation-consistent (HAC, Newey & West
1987) sandwich instead. With weighted rows W_w, weighted residuals r_w and
A = W_w^T W_w, the scores of one sample s are g_s = sum over its rows of W_w[row] r_w[row]
(every joint of a sample, so cross-joint correlation is included), and

    Omega = sum_{|k| <= L} (1 - |k| / (L + 1)) sum_s g_s g_{s+k}^T     (Bartlett kernel)
    Cov   = M / (M - p) * A^-1 Omega A^-1.

The Bartlett weights keep Omega positive semi-definite. The bandwidth L comes from
the data: the residual autocorrelation of every joint is measured (samples missing
from the problem, e.g. inside the friction dead band, are skipped pair-wise) and L
is LAG_FACTOR times the first lag at which every joint's autocorrelation has dropped
to CORR_FLOOR (or 3 / sqrt(rows per joint), the sampling noise of an autocorrelation, if
larger) or below (residuals that stay correlated get the largest bandwidth). For white residuals L = 0 and the result is White's heteroskedasticity
-robust covariance, which matches sigma^2 A^-1 when the noise is homoskedastic.

Hand-written (about 40 lines of numpy) because neither SciPy nor the other
dependencies provide a HAC estimator; statsmodels would be a heavy new dependency
for this alone.
"""
from __future__ import annotations

import numpy as np

from ..util.blas import single_threaded_blas

CORR_FLOOR = 0.05     # autocorrelation below which residuals count as uncorrelated
LAG_FACTOR = 3        # bandwidth = LAG_FACTOR x correlation length (Bartlett weights taper)
MAX_LAG_FRACTION = 0.1  # of the samples, at most


def residual_autocorrelation(r: np.ndarray, sample: np.ndarray, joint: np.ndarray, n_joints: int,
                             max_lag: int) -> np.ndarray:
    """(n_joints, max_lag + 1) autocorrelation of each joint's residual over sample lags;
    pairs where either sample is missing are skipped. Computed with FFTs of the zero-filled
    series and of its mask."""
    N = int(sample.max()) + 1 if sample.size else 1
    size = 1 << int(np.ceil(np.log2(2 * N + 1)))
    out = np.zeros((n_joints, max_lag + 1))
    for j in range(n_joints):
        rows = joint == j
        e = np.zeros(N)
        m = np.zeros(N)
        e[sample[rows]] = r[rows] - r[rows].mean()
        m[sample[rows]] = 1.0
        fe, fm = np.fft.rfft(e, size), np.fft.rfft(m, size)
        num = np.fft.irfft(fe * np.conj(fe), size)[:max_lag + 1]
        cnt = np.fft.irfft(fm * np.conj(fm), size)[:max_lag + 1]
        cnt = np.maximum(np.round(cnt), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            cov = np.where(cnt > 10, num / cnt, 0.0)
        out[j] = cov / cov[0] if cov[0] > 0 else 0.0
    return out


def correlation_lag(r: np.ndarray, sample: np.ndarray, joint: np.ndarray, n_joints: int) -> int:
    """The HAC bandwidth in samples (see the module doc)."""
    N = int(sample.max()) + 1 if sample.size else 1
    max_lag = max(1, int(MAX_LAG_FRACTION * N))
    rho = residual_autocorrelation(r, sample, joint, n_joints, max_lag)
    return bandwidth_from_autocorrelation(rho, int(np.bincount(joint, minlength=n_joints).min()), max_lag)


def bandwidth_from_autocorrelation(rho: np.ndarray, pairs: int, max_lag: int) -> int:
    """LAG_FACTOR x the first lag at which every joint's autocorrelation (rho: (n, lags + 1),
    lags 0..) is at the floor; rho may stop short of `max_lag` (then residuals correlated
    over all its lags get LAG_FACTOR x its last lag)."""
    # a sample autocorrelation of white noise has std ~ 1/sqrt(pairs): 3 of those is noise
    floor = max(CORR_FLOOR, 3.0 / np.sqrt(max(pairs, 1)))
    below = np.flatnonzero((rho[:, 1:] <= floor).all(axis=0))
    tau = int(below[0]) if below.size else min(rho.shape[1] - 1, max_lag)   # lags 1..tau-1 are correlated
    return int(min(LAG_FACTOR * tau, max_lag))


def hac_covariance(W_w: np.ndarray, r_w: np.ndarray, A_inv: np.ndarray, sample: np.ndarray | None,
                   joint: np.ndarray, n_joints: int) -> tuple[np.ndarray, dict]:
    """HAC covariance of a (weighted) least-squares estimate; returns (cov, info) with
    info = {hac_lag_samples, std_inflation_median} (the median ratio of the HAC standard
    deviations to the white-noise ones)."""
    M, p = W_w.shape
    if sample is None:                       # a hand-built problem: rows are sample-major
        sample = np.arange(M) // max(n_joints, 1)
    with single_threaded_blas():     # a loop of small products: see util/blas.py
        return _hac(W_w, r_w, A_inv, sample, joint, n_joints)


def _hac(W_w, r_w, A_inv, sample, joint, n_joints):
    M, p = W_w.shape
    N = int(sample.max()) + 1
    scores = W_w * r_w[:, None]
    G = np.zeros((N, p))
    np.add.at(G, sample, scores)
    L = correlation_lag(r_w, sample, joint, n_joints)
    omega = G.T @ G
    for k in range(1, L + 1):
        C = G[:-k].T @ G[k:]
        omega += (1.0 - k / (L + 1.0)) * (C + C.T)
    return hac_from_omega(omega, A_inv, M, float(r_w @ r_w), L)


def hac_from_omega(omega: np.ndarray, A_inv: np.ndarray, n_rows: int, rss: float, lag: int) -> tuple[np.ndarray, dict]:
    """The sandwich M / (M - p) A^-1 Omega A^-1 and its info (bandwidth `lag`, median
    inflation over the white-noise standard deviations from the residual sum `rss`)."""
    M, p = n_rows, A_inv.shape[0]
    cov = (M / max(M - p, 1)) * (A_inv @ omega @ A_inv)
    cov = 0.5 * (cov + cov.T)
    white = rss / max(M - p, 1) * np.diag(A_inv)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.sqrt(np.clip(np.diag(cov), 0, None) / white)
    ratio = ratio[np.isfinite(ratio)]
    return cov, {"hac_lag_samples": int(lag),
                 "std_inflation_median": float(np.median(ratio)) if ratio.size else float("nan")}

"""Excitation criteria on the stacked base regressor, with exact state gradients.

Given samples (q, qd, qdd) of a trajectory, ``W`` is the base regressor stacked
sample-major, each joint's rows multiplied by an optional weight ``w_j`` (e.g. the
inverse of the expected effort noise). Criteria:

* ``cond``   -- condition number sigma_max / sigma_min of W (source B). The optimisers
  minimise log(cond), which has the same minimiser.
* ``logdet`` -- D-optimality: log det(W^T W / N) with N the number of samples (so the
  value does not grow with the sampling rate). The optimisers minimise -logdet.

This module holds the criteria of a matrix W and their gradients in W; the regressor
and its state derivatives are evaluator.py's.
"""
from __future__ import annotations

import numpy as np

from ..errors import TrajectoryError

CRITERIA = ("cond", "logdet")


def criterion_values(W: np.ndarray, n_samples: int) -> tuple[float, float]:
    """(cond, logdet) of a stacked base regressor; inf / -inf when rank deficient."""
    s = np.linalg.svd(W, compute_uv=False)
    cond = float(s[0] / s[-1]) if s[-1] > 0 else np.inf
    with np.errstate(divide="ignore"):
        logdet = float(2.0 * np.log(s).sum() - W.shape[1] * np.log(n_samples))
    return cond, logdet


def objective_and_matrix_gradient(W: np.ndarray, criterion: str, n_samples: int, smooth: float = 0.0):
    """Objective to *minimise*, its gradient with respect to W (same shape), and the true
    objective (differs from the first only for the smooth surrogate, ``smooth = p > 0``).

    Uses the eigen-decomposition of the small Gram matrix W^T W (p x p) instead of an
    SVD of the tall W: sigma_i^2 = lambda_i, right singular vectors = eigenvectors,
    and d sigma_i = u_i^T dW v_i with u_i = W v_i / sigma_i. Falls back to the SVD
    when the Gram matrix is too ill-conditioned for that (cond > 1e6)."""
    if criterion not in CRITERIA:
        raise TrajectoryError(f"unknown criterion {criterion!r}; choose one of {', '.join(CRITERIA)}")
    if not np.isfinite(W).all():
        return np.inf, np.zeros_like(W), np.inf
    lam, V = np.linalg.eigh(W.T @ W)
    if lam[0] > lam[-1] * 1e-12:
        s, Vt = np.sqrt(lam[::-1]), V[:, ::-1].T
    else:
        _, s, Vt = np.linalg.svd(W, full_matrices=False)
        if s[-1] <= 0:
            return np.inf, np.zeros_like(W), np.inf
    if criterion == "cond" and smooth:
        # log(||sigma||_p ||1/sigma||_p): a smooth upper bound of log cond (exact as p -> inf).
        lam = s * s / (s[0] * s[-1])                   # scaled for overflow safety
        hp = 0.5 * smooth
        lp, lm = lam ** hp, lam ** -hp
        Sp, Sm = lp.sum(), lm.sum()
        f = float((np.log(Sp) + np.log(Sm)) / smooth)
        dl = 0.5 * (lp / Sp - lm / Sm) / (s * s)        # df / d(sigma_i^2)
        G = 2.0 * W @ ((Vt.T * dl) @ Vt)
    elif criterion == "cond":
        f = float(np.log(s[0] / s[-1]))
        G = W @ (np.outer(Vt[0], Vt[0]) / s[0] ** 2 - np.outer(Vt[-1], Vt[-1]) / s[-1] ** 2)
    else:
        f = -float(2.0 * np.log(s).sum() - W.shape[1] * np.log(n_samples))
        G = -2.0 * W @ ((Vt.T / s ** 2) @ Vt)          # -2 W (W^T W)^-1
    f_true = float(np.log(s[0] / s[-1])) if criterion == "cond" else f
    return f, G, f_true


def objective_value(W: np.ndarray, criterion: str, n_samples: int) -> float:
    cond, logdet = criterion_values(W, n_samples)
    if criterion == "cond":
        return float(np.log(cond))
    if criterion == "logdet":
        return -logdet
    raise TrajectoryError(f"unknown criterion {criterion!r}; choose one of {', '.join(CRITERIA)}")

"""The criterion's state gradient without the 4-D regressor derivative (adjoint order).

`RegressorEvaluator.state_jacobians` builds dY (N, 3n, n, n_std) and then contracts it
with the matrix gradient G = df/dW. Here the contraction comes first: with the
regressor of every perturbed state Y_z (the same 3n + 1 Pinocchio calls per sample),

    df/dz_s = sum_{i,c} G[s, i, c] (Y_z[s, i, c] - Y_0[s, i, c]) / h_z
            = (<G_s, Y_z[s]> - <G_s, Y_0[s]>) / h_z,

one batched matrix-vector product over the (N, 3n + 1, n * n_inertial) stack instead
of a 4-D difference array, a fancy-indexed copy of its base columns and an einsum.
G is scattered once to the standard columns (zeros elsewhere). The actuator columns
(armature, Coulomb, viscous, offset) are differentiated exactly: they are
``qdd_j``, ``tanh(qd_j / v_s)``, ``qd_j`` and ``1`` in joint j's own row, so their
contribution is a few vector operations (coupled transmissions keep the general path).

Pinocchio (computeJointTorqueRegressor) still computes every regressor: a hand-written
derivative of the regressor would be faster again but is a second dynamics
implementation to keep right; the finite differences in q and qd have the same ~1e-6
relative error as before (h = 1e-6), those in qdd are exact (Y is affine in qdd).

`eigen_log_gradients` gives the derivatives of single eigenvalues of W^T W for the
minimax (epigraph) form of log cond (minimax.py).

Used by `RegressorEvaluator.objective_with_state_gradient` when its fast Pinocchio path
applies (plain serial 1-DOF joints, no extra columns, identity transmission).
"""
from __future__ import annotations

import numpy as np

from .criteria import objective_and_matrix_gradient


def perturbed_states(q, qd, qdd, h: float):
    """(N*(3n+1), n) states: each sample, then q_j + h, qd_j + h, qdd_j + 1 for every j."""
    N, n = q.shape
    k = 3 * n + 1
    Q = np.repeat(q[:, None, :], k, 1)
    QD = np.repeat(qd[:, None, :], k, 1)
    QDD = np.repeat(qdd[:, None, :], k, 1)
    j = np.arange(n)
    Q[:, 1 + j, j] += h
    QD[:, 1 + n + j, j] += h
    QDD[:, 1 + 2 * n + j, j] += 1.0
    return Q.reshape(N * k, n), QD.reshape(N * k, n), QDD.reshape(N * k, n)


def applies(ev) -> bool:
    """Whether the adjoint path can serve this evaluator."""
    if ev._perm is None:
        return False
    tr = getattr(ev.model, "transmission", None)
    return tr is None or tr.is_identity


def objective_with_state_gradient(ev, q, qd, qdd, criterion: str, theta=None, smooth: float = 0.0):
    """Same contract as `RegressorEvaluator.objective_with_state_gradient`."""
    q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
    N, n = q.shape
    k = 3 * n + 1
    h = ev.h
    model = ev.model
    ni = model.layout.n_inertial
    Yi = ev.inertial_stack(*perturbed_states(q, qd, qdd, h)).reshape(N, k, n, ni)
    act = model.actuator_regressor(qd, qdd)                     # (N, n, na) at the samples
    na = act.shape[2]
    n_std = ni + na
    Y0 = np.empty((N, n, n_std))
    Y0[:, :, :ni] = Yi[:, 0]
    Y0[:, :, ni:] = act
    w = ev.weights[None, :, None]
    W = (Y0[:, :, ev.cols] * w).reshape(N * n, -1)
    f, G, f_true = objective_and_matrix_gradient(W, criterion, N, smooth)
    ev.last_true = f_true
    Gf = np.zeros((N, n, n_std))
    Gf[:, :, ev.cols] = G.reshape(N, n, -1) * w
    # Inertial columns: contract first, difference after.
    S = np.matmul(Yi.reshape(N, k, n * ni), Gf[:, :, :ni].reshape(N, n * ni, 1))[:, :, 0]
    gz = S[:, 1:] - S[:, :1]
    gz[:, :2 * n] /= h
    # Actuator columns, exact: the joint's own row only.
    if na:
        gz[:, n:] += _actuator_adjoint(model, qd, Gf[:, :, ni:])
    if theta is None:
        return f, gz, None, None
    theta = np.asarray(theta, dtype=float)
    T = Yi @ theta[:ni]                                          # (N, k, n)
    tau = T[:, 0] + act @ theta[ni:]
    dtau = T[:, 1:] - T[:, :1]
    dtau[:, :2 * n] /= h
    # d/dqd_j and d/dqdd_j of the actuator efforts (row j only): theta of the joint's terms
    if na:
        dtau[:, n:] += _actuator_effort_jacobian(model, qd, theta[ni:])
    return f, gz, tau, dtau


def _actuator_derivs(model, qd):
    """Per joint j, for every actuator symbol: (d column / d qd_j, d column / d qdd_j),
    each (N, n) -- joint-major symbol order of `actuator_columns`."""
    syms = model.layout.actuator_symbols
    N, n = qd.shape
    vs = model.friction.coulomb_velocity_scale
    out = []
    for s in syms:
        if s == "Ia":
            out.append((np.zeros((N, n)), np.ones((N, n))))
        elif s == "Fc":
            th = np.tanh(qd / vs)
            out.append(((1.0 - th * th) / vs, np.zeros((N, n))))
        elif s == "Fv":
            out.append((np.ones((N, n)), np.zeros((N, n))))
        else:      # "off" (actuator_columns rejects unknown symbols)
            out.append((np.zeros((N, n)), np.zeros((N, n))))
    return out


def _actuator_adjoint(model, qd, Ga):
    """(N, 2n): sum over the actuator columns of G times their qd and qdd derivatives."""
    N, n = qd.shape
    m = len(model.layout.actuator_symbols)
    j = np.arange(n)
    Gown = Ga[:, j, :].reshape(N, n, n, m)[:, j, j, :]          # (N, n, m): row j, joint j's columns
    out = np.zeros((N, 2 * n))
    for si, (dv, da) in enumerate(_actuator_derivs(model, qd)):
        out[:, :n] += Gown[:, :, si] * dv
        out[:, n:] += Gown[:, :, si] * da
    return out


def _actuator_effort_jacobian(model, qd, theta_a):
    """(N, 2n, n): derivatives of the actuator efforts by qd_j, qdd_j (diagonal in j)."""
    N, n = qd.shape
    m = len(model.layout.actuator_symbols)
    th = np.asarray(theta_a).reshape(n, m)
    diag_v = np.zeros((N, n))
    diag_a = np.zeros((N, n))
    for si, (dv, da) in enumerate(_actuator_derivs(model, qd)):
        diag_v += dv * th[:, si]
        diag_a += da * th[:, si]
    out = np.zeros((N, 2 * n, n))
    j = np.arange(n)
    out[:, j, j] = diag_v
    out[:, n + j, j] = diag_a
    return out


def eigen_log_gradients(ev, q, qd, qdd, idx):
    """Eigenvalues lam (ascending) of W^T W and d log lam_i / d(q, qd, qdd) as (N, 3n, m)
    for the eigenvalue indices ``idx`` (None if W is numerically rank deficient).

    lam_i = ||W v_i||^2, so d log lam_i = (2 / lam_i) (W v_i)^T dW v_i: a rank-one G per
    eigenvalue, contracted here as (perturbed regressors @ v_i) . (W v_i) per sample,
    the same adjoint order as `objective_with_state_gradient`. Distinct eigenvalues are
    assumed (a repeated eigenvalue has no derivative; SLSQP only sees one-sided slopes).
    Works for every model: the general dY path of `state_jacobians` where the fast
    Pinocchio path does not apply."""
    q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
    N, n = q.shape
    idx = np.asarray(idx)
    w = ev.weights
    fast = applies(ev)
    if fast:
        k = 3 * n + 1
        ni = ev.model.layout.n_inertial
        Yi = ev.inertial_stack(*perturbed_states(q, qd, qdd, ev.h)).reshape(N, k, n, ni)
        act = ev.model.actuator_regressor(qd, qdd)
        Y0 = np.concatenate([Yi[:, 0], act], axis=2)
    else:
        Y0, dY = ev.state_jacobians(q, qd, qdd)
    W = (Y0[:, :, ev.cols] * w[None, :, None]).reshape(N * n, -1)
    lam, V = np.linalg.eigh(W.T @ W)
    if not lam[0] > lam[-1] * 1e-14:
        return lam, None
    Vi = V[:, idx]                                              # (p, m)
    Uw = (W @ Vi).reshape(N, n, -1) * w[None, :, None] * (2.0 / lam[idx])
    n_std = Y0.shape[2]
    Vs = np.zeros((n_std, len(idx)))
    Vs[ev.cols] = Vi
    if not fast:
        P = dY @ Vs                                              # (N, 3n, n, m)
        return lam, np.einsum("sznm,snm->szm", P, Uw)
    S = np.einsum("sknm,snm->skm", Yi @ Vs[:ni], Uw)           # (N, k, m)
    gz = S[:, 1:] - S[:, :1]
    gz[:, :2 * n] /= ev.h
    ms = len(ev.model.layout.actuator_symbols)
    if ms == 0:                                                 # rigid-body parameters only
        return lam, gz
    Va = Vs[ni:].reshape(n, ms, -1)                             # joint, symbol, m
    for si, (dv, da) in enumerate(_actuator_derivs(ev.model, qd)):
        own = Va[None, :, si, :] * Uw                           # row j, joint j's column
        gz[:, n:2 * n] += dv[:, :, None] * own
        gz[:, 2 * n:] += da[:, :, None] * own
    return lam, gz

"""The stacked base regressor of a trajectory's samples and its derivatives with respect
to the sampled states, for the criteria of criteria.py.

The standard regressor Y(q, qd, qdd) is affine in qdd and quadratic in qd, so its partial
derivatives in qdd are exact unit differences and those in q and qd are forward
differences with a tiny step; one gradient costs 3n + 1 regressor evaluations per sample
(fast_gradient.py's adjoint form where it applies). Chained with the affine trajectory
basis (parameterisation.py) this gives the exact gradient in the coefficients up to the
finite-difference error (~1e-6 relative).
"""
from __future__ import annotations

import numpy as np

from ..errors import TrajectoryError
from .criteria import objective_and_matrix_gradient


class RegressorEvaluator:
    """Base regressor of a `RobotModel` restricted to the base columns, with row weights,
    and its derivatives with respect to the sampled states."""

    def __init__(self, model, base, joint_weights=None, fd_step: float = 1e-6):
        self.model = model
        self.base = base
        self.n = model.n
        self.cols = np.asarray(base.independent)
        w = np.ones(self.n) if joint_weights is None else np.asarray(joint_weights, dtype=float)
        if w.shape != (self.n,) or not (np.isfinite(w).all() and (w > 0).all()):
            raise TrajectoryError(f"joint weights must be {self.n} positive numbers, got {w}")
        self.weights = w
        self.h = float(fd_step)
        lay = model.layout
        self._coulomb_cols = (np.array([lay.index(f"{u}.Fc") for u in lay.actuator_joints])
                              if "Fc" in lay.actuator_symbols else None)
        # Fast path: when the reduced Pinocchio model has exactly the identified 1-DOF
        # joints with nq == nv (no continuous joints), call Pinocchio directly.
        pm = model.model
        self._perm = None
        n_std = model.layout.n_inertial + self.n * len(model.layout.actuator_symbols)
        if pm.nq == pm.nv == self.n and model.layout.size == n_std:   # no extra columns (e.g. springs)
            perm = np.array([pm.joints[pm.getJointId(j)].idx_v for j in model.joint_names])
            if sorted(perm.tolist()) == list(range(self.n)):
                self._perm = perm
                self._pdata = pm.createData()

    def regressor(self, q, qd, qdd) -> np.ndarray:
        """Same as ``model.regressor`` (stacked standard regressor, sample-major)."""
        if self._perm is None:
            return self.model.regressor(q, qd, qdd)
        q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
        N, n = q.shape
        ni = self.model.layout.n_inertial
        Y = np.empty((N, n, self.model.layout.size))
        Y[:, :, :ni] = self.inertial_stack(q, qd, qdd)
        Y[:, :, ni:] = self.model.actuator_regressor(qd, qdd)
        return Y.reshape(N * n, -1)

    def inertial_stack(self, q, qd, qdd) -> np.ndarray:
        """(N, n, n_inertial) Pinocchio joint torque regressors (fast path only)."""
        from ..model.pin_batch import joint_torque_regressors
        N, n = q.shape
        perm, pm, pd = self._perm, self.model.model, self._pdata
        ident = bool((perm == np.arange(n)).all())
        if ident:
            qp, vp, ap = (np.ascontiguousarray(a, dtype=float) for a in (q, qd, qdd))
        else:
            qp, vp, ap = (np.empty((N, n)) for _ in range(3))
            qp[:, perm], vp[:, perm], ap[:, perm] = q, qd, qdd
        out = np.empty((N, n, self.model.layout.n_inertial))
        joint_torque_regressors(pm, pd, qp, vp, ap, out)
        return out if ident else out[:, perm]

    def standard(self, q, qd, qdd) -> np.ndarray:
        """(N, n, n_std) standard regressor per sample."""
        N = np.shape(q)[0]
        return self.regressor(q, qd, qdd).reshape(N, self.n, -1)

    def base_regressor(self, q, qd, qdd) -> np.ndarray:
        """Weighted stacked base regressor (N*n, p), sample-major."""
        Y = self.standard(q, qd, qdd)[:, :, self.cols] * self.weights[None, :, None]
        return Y.reshape(-1, len(self.cols))

    def state_jacobians(self, q, qd, qdd):
        """Y (N, n, n_std) and dY (N, 3n, n, n_std): derivatives with respect to
        q_j, qd_j, qdd_j (in that block order)."""
        q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
        N, n = q.shape
        h = self.h
        eye = np.eye(n)
        Q = np.concatenate([q[:, None, :], q[:, None, :] + h * eye, np.repeat(q[:, None, :], 2 * n, 1)], 1)
        QD = np.concatenate([qd[:, None, :], np.repeat(qd[:, None, :], n, 1), qd[:, None, :] + h * eye,
                             np.repeat(qd[:, None, :], n, 1)], 1)
        QDD = np.concatenate([qdd[:, None, :], np.repeat(qdd[:, None, :], 2 * n, 1),
                              qdd[:, None, :] + eye], 1)
        k = 3 * n + 1
        Yall = self.regressor(Q.reshape(N * k, n), QD.reshape(N * k, n),
                                    QDD.reshape(N * k, n)).reshape(N, k, n, -1)
        Y = Yall[:, 0]
        dY = Yall[:, 1:] - Y[:, None]
        dY[:, :2 * n] /= h
        # The Coulomb column tanh(qd / v_s) is too curved for a forward difference near
        # qd = 0: use its exact derivative (the other actuator columns are affine).
        tr = getattr(self.model, "transmission", None)
        if self._coulomb_cols is not None and (tr is None or tr.is_identity):
            vs = self.model.friction.coulomb_velocity_scale
            th = np.tanh(qd / vs)
            j = np.arange(n)
            dY[:, n + j, j, self._coulomb_cols] = (1.0 - th * th) / vs
        elif self._coulomb_cols is not None:
            # coupled motors: column k in row j is M[k, j] tanh((M qd)_k / v_s), so its
            # derivative by qd_i is M[k, j] M[k, i] (1 - tanh^2) / v_s
            vs = self.model.friction.coulomb_velocity_scale
            M = tr.motor_from_joint
            th = np.tanh(tr.motor_velocities(qd) / vs)
            g = (1.0 - th * th) / vs
            for k, col in enumerate(self._coulomb_cols):
                dY[:, n:2 * n, :, col] = g[:, k, None, None] * np.outer(M[k], M[k])[None]
        return Y, dY

    def objective_with_state_gradient(self, q, qd, qdd, criterion: str, theta=None, smooth: float = 0.0,
                                      adjoint: bool = True):
        """f, df/d(q, qd, qdd) as (N, 3n), and if theta is given the efforts Y theta (N, n)
        with their state Jacobian (N, 3n, n). ``adjoint``: use fast_gradient.py where it
        applies (False: the general dY path, kept as the reference)."""
        from . import fast_gradient
        if adjoint and fast_gradient.applies(self):
            return fast_gradient.objective_with_state_gradient(self, q, qd, qdd, criterion, theta, smooth)
        Y, dY = self.state_jacobians(q, qd, qdd)
        N = Y.shape[0]
        w = self.weights[None, :, None]
        W = (Y[:, :, self.cols] * w).reshape(N * self.n, -1)
        f, G, f_true = objective_and_matrix_gradient(W, criterion, N, smooth)
        self.last_true = f_true
        G = G.reshape(N, self.n, -1) * w
        gz = np.einsum("sic,szic->sz", G, dY[:, :, :, self.cols], optimize=True)
        if theta is None:
            return f, gz, None, None
        tau = Y @ theta
        dtau = dY @ theta
        return f, gz, tau, dtau

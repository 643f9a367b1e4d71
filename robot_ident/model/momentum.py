"""The generalised momentum of an identified model, for a momentum observer.

With the effort model ``tau = Y(q, qd, qdd) theta`` (model/robot.py: rigid bodies, armature,
friction, offsets, coupled transmissions, springs) written as
``tau = M(q) qdd + h(q, qd)``, the generalised momentum ``p = M(q) qd`` obeys

    dp/dt = tau + tau_ext - beta(q, qd),     beta = h(q, qd) - dM/dt qd

(``dM/dt qd`` is ``(C + C^T) qd``, so ``beta = g + friction + offset + spring - C^T qd``).
An observer of ``tau_ext`` built on it needs no joint acceleration (Haddadin, De Luca and
Albu-Schaeffer, IEEE T-RO 2017).

Both are taken from the regressor itself, so every term the identification has is there
and nothing is written twice:

* ``p = Y(q, 0, qd) theta - Y(q, 0, 0) theta`` (the velocity-free terms cancel);
* ``h = Y(q, qd, 0) theta``;
* ``dM/dt qd`` is the derivative of ``M(q) qd`` along ``qd`` (a forward difference of a
  step of ``STEP`` rad (m) in q; M is smooth, and the error of the step is ~1e-6 relative).

Any standard vector with the result's base values gives the same p and beta (they are
linear in theta and the regrouped directions do not change the efforts).
"""
from __future__ import annotations

import numpy as np

from .robot import RobotModel

STEP = 1e-6      # rad (m): the largest joint displacement of the difference


class MomentumModel:
    """p(q, qd) and beta(q, qd) of a RobotModel with the standard parameters `theta`."""

    def __init__(self, model: RobotModel, theta: np.ndarray):
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (model.layout.size,):
            raise ValueError(f"theta must have {model.layout.size} entries (layout), got {theta.shape}")
        self.model = model
        self.theta = theta
        self.n = model.n

    def terms(self, q, qd) -> tuple[np.ndarray, np.ndarray]:
        """(p, beta), each (N, n), of N samples (one regressor call of 5N samples)."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        qd = np.atleast_2d(np.asarray(qd, dtype=float))
        N, n = q.shape
        speed = np.abs(qd).max(axis=1, keepdims=True)
        eps = STEP / np.where(speed > 0.0, speed, 1.0)          # q + eps qd moves no joint more than STEP
        q1 = q + eps * qd
        z = np.zeros_like(qd)
        Q = np.concatenate([q, q, q, q1, q1])
        V = np.concatenate([z, z, qd, z, z])
        A = np.concatenate([qd, z, z, qd, z])
        tau = (self.model.regressor(Q, V, A) @ self.theta).reshape(5, N, n)
        p = tau[0] - tau[1]
        p1 = tau[3] - tau[4]
        mdot_qd = (p1 - p) / eps
        return p, tau[2] - mdot_qd

    def efforts(self, q, qd, qdd) -> np.ndarray:
        """The model's efforts (N, n) (for checks: M qdd + h)."""
        return (self.model.regressor(q, qd, qdd) @ self.theta).reshape(-1, self.n)

    def coulomb(self) -> np.ndarray:
        """Each joint's Coulomb friction level (n,): its own, or |M^T| |Fc| of its group's
        motors; zeros without a Coulomb term."""
        lay = self.model.layout
        if "Fc" not in lay.actuator_symbols:
            return np.zeros(self.n)
        fc = np.abs([self.theta[lay.index(f"{u}.Fc")] for u in lay.actuator_joints])
        return np.abs(self.model.transmission.motor_from_joint).T @ fc
